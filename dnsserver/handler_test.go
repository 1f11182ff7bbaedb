package dnsserver

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/zone"
	"github.com/pgdns/pgdns/zone/zonetest"
)

var t0 = zonetest.T0

// Case is one query and the whole answer expected, records written as in a
// zone file.
type Case struct {
	Qname  string
	Qtype  uint16
	Rcode  int
	AA     bool
	Answer []string
	Ns     []string
	Extra  []string // without the OPT record
}

const soa = "db.local. 1 IN SOA ns.db.local. hostmaster.db.local. 1767268800 60 10 3600 1"

// host is a host probed 120 ms before t0.
func host(ip string, inRecovery bool, replay zone.LSN) zone.Host {
	return zonetest.Host(ip, inRecovery, replay, t0.Add(-120*time.Millisecond))
}

// testSnapshot: zonetest.Main probed 120 ms before t0, its replica behind
// 900 ms and 0x60 bytes behind, and a cluster "orders" of a primary and an
// IPv6 replica.
func testSnapshot() *zone.Snapshot {
	v6 := host("::1", true, 0x3000060)
	return zonetest.Ready(t0, 2*time.Second,
		zonetest.Main(t0.Add(-120*time.Millisecond), 900*time.Millisecond, 0x60),
		zonetest.Cluster("orders", host("127.0.0.21", false, 5), v6),
		opsCluster(),
		twoPortCluster(),
		trustCluster())
}

// trustCluster is cluster "trust": a primary at 127.0.0.51 and a replica
// at 127.0.0.52 of the cluster's system identifier, a foreign server at
// 127.0.0.53 (another initdb listed in hosts) and a host at 127.0.0.54
// that no probe has reached yet.
func trustCluster() *zone.Cluster {
	foreign := host("127.0.0.53", false, 5)
	foreign.SystemID = zonetest.SystemID + 1
	unprobed := host("127.0.0.54", true, 0)
	unprobed.Seen, unprobed.ProbedAt, unprobed.Fails, unprobed.LastError = false, time.Time{}, 1, "connect: connection refused"
	return zonetest.Cluster("trust", host("127.0.0.51", false, 5), host("127.0.0.52", true, 5), foreign, unprobed)
}

// opsCluster is the cluster "ops": a primary drained by Patroni's tag
// (still the primary), a replica drained by pgdns.drain (answered by no
// replica name), an offline replica, a synchronous standby and a plain
// replica.
func opsCluster() *zone.Cluster {
	p := host("127.0.0.31", false, 0x5000)
	p.TagNoLoadBalance, p.SyncNamesSet = true, true
	p.Standbys = []zone.Standby{{AppName: "ops2", Sync: true}, {AppName: "ops4", Sync: true}, {AppName: "ops5"}}
	hosts := []zone.Host{p}
	for i, set := range [][2]string{{"on", ""}, {"", "on"}, {"", ""}, {"bogus", ""}} {
		r := host("127.0.0.3"+string(rune('2'+i)), true, 0x5000)
		r.Lag, r.AppName = 4*time.Millisecond, "ops"+string(rune('2'+i))
		r.Receiver, r.SenderHost, r.SenderPort = "streaming", p.IP.String(), int(p.Port) // streams from the primary
		r.DrainSetting, r.OfflineSetting = set[0], set[1]
		hosts = append(hosts, r)
	}
	for i := range hosts {
		hosts[i].Cluster = "ops"
	}
	return zonetest.Cluster("ops", hosts...)
}

// twoPortCluster is cluster "ports": its primary on 127.0.0.41:5432, a
// replica beside it on 127.0.0.41:5433, one on 127.0.0.42:5433 and one on
// 127.0.0.43:5432; its client port 5432.
func twoPortCluster() *zone.Cluster {
	onPort := func(h zone.Host, port uint16) zone.Host {
		h.Port, h.Addr = port, zone.JoinHostPort(h.IP.String(), port)
		h.Name = zone.DerivedLabel(h.Addr)
		h.StartedAt = t0.Add(time.Duration(port) + time.Duration(h.IP.As4()[3])<<16) // one server each
		return h
	}
	c := zonetest.Cluster("ports", onPort(host("127.0.0.41", false, 9), 5432), onPort(host("127.0.0.41", true, 9), 5433),
		onPort(host("127.0.0.42", true, 9), 5433), onPort(host("127.0.0.43", true, 9), 5432))
	c.Port = 5432
	return c
}

func newTestHandler(snap *zone.Snapshot) *Handler {
	table := zone.NewTable()
	table.Store(snap)
	h := NewHandler(Config{Zone: "DB.local", TTL: 1, NameServerIPs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}},
		table, slog.New(slog.NewTextHandler(io.Discard, nil)))
	h.now = func() time.Time { return t0 }
	h.serial = uint32(t0.Unix())
	return h
}

// caseQuery is tc's question as a client sends it: with EDNS (a 1232-byte
// buffer, DO set) or without.
func caseQuery(tc Case, edns bool) *dns.Msg {
	req := new(dns.Msg)
	req.SetQuestion(tc.Qname, tc.Qtype)
	if edns {
		req.SetEdns0(1232, true)
	}
	return req
}

// tooManyForUDP is a ready snapshot of one cluster, "main", with a primary
// and 199 replicas: more than one datagram holds.
func tooManyForUDP() *zone.Snapshot {
	c := &zone.Cluster{Name: "main"}
	for i := range 200 {
		h := host(fmt.Sprintf("10.0.%d.%d", i/250, i%250+1), i > 0, 9)
		c.Hosts = append(c.Hosts, h)
	}
	c.Decide(t0, 2*time.Second, 3)
	return &zone.Snapshot{Ready: true, Clusters: []*zone.Cluster{c}, Default: "main", StaleAfter: 2 * time.Second, Interval: zonetest.Interval}
}

var cases = []Case{
	{Qname: "primary.db.local.", Qtype: dns.TypeA, AA: true, Answer: []string{"primary.db.local. 1 IN A 127.0.0.11"}},
	{Qname: "PRIMARY.Db.Local.", Qtype: dns.TypeA, AA: true, Answer: []string{"PRIMARY.Db.Local. 1 IN A 127.0.0.11"}},
	{Qname: "master.db.local.", Qtype: dns.TypeA, AA: true, Answer: []string{"master.db.local. 1 IN A 127.0.0.11"}},
	{Qname: "replica.db.local.", Qtype: dns.TypeA, AA: true, Answer: []string{"replica.db.local. 1 IN A 127.0.0.12", "replica.db.local. 1 IN A 127.0.0.13"}},
	{Qname: "lag-50ms.replica.db.local.", Qtype: dns.TypeA, AA: true, Answer: []string{"lag-50ms.replica.db.local. 1 IN A 127.0.0.12"}},
	{Qname: "bytes-1kb.standby.db.local.", Qtype: dns.TypeA, AA: true, Answer: []string{"bytes-1kb.standby.db.local. 1 IN A 127.0.0.12", "bytes-1kb.standby.db.local. 1 IN A 127.0.0.13"}},
	{Qname: "bytes-16b.standby.db.local.", Qtype: dns.TypeA, AA: true, Answer: []string{"bytes-16b.standby.db.local. 1 IN A 127.0.0.12"}},
	{Qname: "lsn-0-3000060.replica.db.local.", Qtype: dns.TypeA, AA: true, Answer: []string{"lsn-0-3000060.replica.db.local. 1 IN A 127.0.0.12"}},
	{Qname: "lsn-0-3000061.replica.db.local.", Qtype: dns.TypeA, AA: true, Ns: []string{soa}},
	{Qname: "lsn-0-3000061.prefer-replica.db.local.", Qtype: dns.TypeA, AA: true, Answer: []string{"lsn-0-3000061.prefer-replica.db.local. 1 IN A 127.0.0.11"}},
	{Qname: "lag-10ms.any.db.local.", Qtype: dns.TypeA, AA: true, Answer: []string{"lag-10ms.any.db.local. 1 IN A 127.0.0.11", "lag-10ms.any.db.local. 1 IN A 127.0.0.12"}},
	{Qname: "primary.orders.db.local.", Qtype: dns.TypeA, AA: true, Answer: []string{"primary.orders.db.local. 1 IN A 127.0.0.21"}},
	{Qname: "replica.orders.db.local.", Qtype: dns.TypeAAAA, AA: true, Answer: []string{"replica.orders.db.local. 1 IN AAAA ::1"}},
	{Qname: "replica.orders.db.local.", Qtype: dns.TypeA, AA: true, Ns: []string{soa}}, // only IPv6 replicas: NODATA
	{Qname: "primary.db.local.", Qtype: dns.TypeMX, AA: true, Ns: []string{soa}},       // a type with no data
	{Qname: "lag-50ms.replica.db.local.", Qtype: dns.TypeTXT, AA: true, Answer: []string{
		`lag-50ms.replica.db.local. 1 IN TXT "host=127.0.0.12:5432 role=replica lag_ms=3 lag_bytes=0 replay_lsn=0/3000060 age_ms=120 name=127-0-0-12-5432.host.main.db.local."`}},
	{Qname: "db.local.", Qtype: dns.TypeSOA, AA: true, Answer: []string{soa}},
	{Qname: "db.local.", Qtype: dns.TypeNS, AA: true, Answer: []string{"db.local. 1 IN NS ns.db.local."}, Extra: []string{"ns.db.local. 1 IN A 127.0.0.1"}},
	{Qname: "db.local.", Qtype: dns.TypeA, AA: true, Ns: []string{soa}},
	{Qname: "ns.db.local.", Qtype: dns.TypeA, AA: true, Answer: []string{"ns.db.local. 1 IN A 127.0.0.1"}},
	{Qname: "nope.db.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, AA: true, Ns: []string{soa}},
	{Qname: "nope.db.local.", Qtype: dns.TypeSOA, Rcode: dns.RcodeNameError, AA: true, Ns: []string{soa}},
	// <cluster>.<zone> is an empty non-terminal (RFC 8020) holding the
	// cluster's SOA.
	{Qname: "main.db.local.", Qtype: dns.TypeA, AA: true, Ns: []string{soa}},
	{Qname: "orders.db.local.", Qtype: dns.TypeAAAA, AA: true, Ns: []string{soa}},
	{Qname: "orders.db.local.", Qtype: dns.TypeTXT, AA: true, Ns: []string{soa}},
	{Qname: "Orders.DB.local.", Qtype: dns.TypeSOA, AA: true, Answer: []string{"Orders.DB.local. 1 IN SOA ns.db.local. hostmaster.db.local. 1767268800 60 10 3600 1"}},
	{Qname: "main.db.local.", Qtype: dns.TypeSOA, AA: true, Answer: []string{"main.db.local. 1 IN SOA ns.db.local. hostmaster.db.local. 1767268800 60 10 3600 1"}},
	{Qname: "main.db.local.", Qtype: dns.TypeNS, AA: true, Ns: []string{soa}},
	// No zone transfers.
	{Qname: "db.local.", Qtype: dns.TypeAXFR, Rcode: dns.RcodeRefused},
	{Qname: "db.local.", Qtype: dns.TypeIXFR, Rcode: dns.RcodeRefused},
	{Qname: "orders.db.local.", Qtype: dns.TypeAXFR, Rcode: dns.RcodeRefused},
	{Qname: "primary.nope.db.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, AA: true, Ns: []string{soa}},
	{Qname: "lag-5.replica.db.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, AA: true, Ns: []string{soa}},
	{Qname: "dc-nowhere.replica.db.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, AA: true, Ns: []string{soa}}, // an unknown location
	{Qname: "dc-a.dc-b.replica.db.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, AA: true, Ns: []string{soa}},
	{Qname: "lag-1s.lag-2s.replica.db.local.", Qtype: dns.TypeTXT, Rcode: dns.RcodeNameError, AA: true, Ns: []string{soa}},
	{Qname: "example.com.", Qtype: dns.TypeA, Rcode: dns.RcodeRefused},
	{Qname: ".", Qtype: dns.TypeNS, Rcode: dns.RcodeRefused},
	// Drains, the offline role and the sync filter (the cluster "ops").
	{Qname: "primary.ops.db.local.", Qtype: dns.TypeA, AA: true, Answer: []string{"primary.ops.db.local. 1 IN A 127.0.0.31"}},
	{Qname: "replica.ops.db.local.", Qtype: dns.TypeA, AA: true, Answer: []string{"replica.ops.db.local. 1 IN A 127.0.0.34", "replica.ops.db.local. 1 IN A 127.0.0.35"}},
	{Qname: "any.ops.db.local.", Qtype: dns.TypeA, AA: true, Answer: []string{"any.ops.db.local. 1 IN A 127.0.0.31", "any.ops.db.local. 1 IN A 127.0.0.34", "any.ops.db.local. 1 IN A 127.0.0.35"}},
	{Qname: "lsn-0-5000.dc-nowhere.offline.ops.db.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, AA: true, Ns: []string{soa}},
	{Qname: "offline.ops.db.local.", Qtype: dns.TypeA, AA: true, Answer: []string{"offline.ops.db.local. 1 IN A 127.0.0.33"}},
	{Qname: "lag-1ms.offline.ops.db.local.", Qtype: dns.TypeA, AA: true, Ns: []string{soa}},
	{Qname: "sync.replica.ops.db.local.", Qtype: dns.TypeA, AA: true, Answer: []string{"sync.replica.ops.db.local. 1 IN A 127.0.0.34"}},
	{Qname: "sync.offline.ops.db.local.", Qtype: dns.TypeA, AA: true, Answer: []string{"sync.offline.ops.db.local. 1 IN A 127.0.0.34"}},
	{Qname: "sync.lsn-0-5001.prefer-replica.ops.db.local.", Qtype: dns.TypeA, AA: true, Answer: []string{"sync.lsn-0-5001.prefer-replica.ops.db.local. 1 IN A 127.0.0.31"}},
	{Qname: "sync.replica.db.local.", Qtype: dns.TypeA, AA: true, Ns: []string{soa}}, // main has no synchronous standby
	{Qname: "offline.db.local.", Qtype: dns.TypeA, AA: true, Answer: []string{"offline.db.local. 1 IN A 127.0.0.12", "offline.db.local. 1 IN A 127.0.0.13"}},
	{Qname: "sync.sync.replica.db.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, AA: true, Ns: []string{soa}},
	{Qname: "primary.ops.db.local.", Qtype: dns.TypeTXT, AA: true, Answer: []string{
		`primary.ops.db.local. 1 IN TXT "host=127.0.0.31:5432 role=primary lag_ms=unknown lag_bytes=unknown replay_lsn=0/5000 age_ms=120 drained=true drained_by=noloadbalance name=127-0-0-31-5432.host.ops.db.local."`}},
	{Qname: "offline.ops.db.local.", Qtype: dns.TypeTXT, AA: true, Answer: []string{
		`offline.ops.db.local. 1 IN TXT "host=127.0.0.33:5432 role=replica lag_ms=4 lag_bytes=0 replay_lsn=0/5000 age_ms=120 offline=true name=127-0-0-33-5432.host.ops.db.local."`}},
	{Qname: "sync.replica.ops.db.local.", Qtype: dns.TypeTXT, AA: true, Answer: []string{
		`sync.replica.ops.db.local. 1 IN TXT "host=127.0.0.34:5432 role=replica lag_ms=4 lag_bytes=0 replay_lsn=0/5000 age_ms=120 sync=true name=127-0-0-34-5432.host.ops.db.local."`}},

	// Host names: a host's address whatever its role.
	{Qname: "127-0-0-13-5432.host.main.db.local.", Qtype: dns.TypeA, AA: true, Answer: []string{"127-0-0-13-5432.host.main.db.local. 1 IN A 127.0.0.13"}},
	{Qname: "127-0-0-13-5432.host.main.db.local.", Qtype: dns.TypeAAAA, AA: true, Ns: []string{soa}},
	{Qname: "0-0-0-0-0-0-0-1-5432.host.orders.db.local.", Qtype: dns.TypeAAAA, AA: true, Answer: []string{"0-0-0-0-0-0-0-1-5432.host.orders.db.local. 1 IN AAAA ::1"}},
	{Qname: "127-0-0-11-5432.host.main.db.local.", Qtype: dns.TypeTXT, AA: true, Answer: []string{
		`127-0-0-11-5432.host.main.db.local. 1 IN TXT "host=127.0.0.11:5432 role=primary lag_ms=unknown lag_bytes=unknown replay_lsn=0/3000060 age_ms=120 name=127-0-0-11-5432.host.main.db.local. port=5432"`}},
	{Qname: "_postgresql._tcp.127-0-0-11-5432.host.main.db.local.", Qtype: dns.TypeSRV, AA: true,
		Answer: []string{"_postgresql._tcp.127-0-0-11-5432.host.main.db.local. 1 IN SRV 10 0 5432 127-0-0-11-5432.host.main.db.local."},
		Extra:  []string{"127-0-0-11-5432.host.main.db.local. 1 IN A 127.0.0.11"}},
	{Qname: "127-0-0-99-5432.host.main.db.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, AA: true, Ns: []string{soa}}, // no such host
	// A host name answers only a server proven to be its cluster's (review
	// S2): a foreign server or a host never probed gets NODATA, and its
	// TXT says why.
	{Qname: "127-0-0-52-5432.host.trust.db.local.", Qtype: dns.TypeA, AA: true, Answer: []string{"127-0-0-52-5432.host.trust.db.local. 1 IN A 127.0.0.52"}},
	{Qname: "127-0-0-53-5432.host.trust.db.local.", Qtype: dns.TypeA, AA: true, Ns: []string{soa}},
	{Qname: "127-0-0-53-5432.host.trust.db.local.", Qtype: dns.TypeAAAA, AA: true, Ns: []string{soa}},
	{Qname: "_postgresql._tcp.127-0-0-53-5432.host.trust.db.local.", Qtype: dns.TypeSRV, AA: true, Ns: []string{soa}},
	{Qname: "127-0-0-53-5432.host.trust.db.local.", Qtype: dns.TypeTXT, AA: true, Answer: []string{
		`127-0-0-53-5432.host.trust.db.local. 1 IN TXT "host=127.0.0.53:5432 role=unknown lag_ms=unknown lag_bytes=unknown replay_lsn=0/5 age_ms=120 name=127-0-0-53-5432.host.trust.db.local. port=5432 unanswered=foreign"`}},
	{Qname: "127-0-0-54-5432.host.trust.db.local.", Qtype: dns.TypeA, AA: true, Ns: []string{soa}},
	{Qname: "_postgresql._tcp.127-0-0-54-5432.host.trust.db.local.", Qtype: dns.TypeSRV, AA: true, Ns: []string{soa}},
	{Qname: "127-0-0-54-5432.host.trust.db.local.", Qtype: dns.TypeTXT, AA: true, Answer: []string{
		`127-0-0-54-5432.host.trust.db.local. 1 IN TXT "host=127.0.0.54:5432 role=unknown lag_ms=unknown lag_bytes=unknown replay_lsn=0/0 age_ms=0 name=127-0-0-54-5432.host.trust.db.local. port=5432 unanswered=unprobed"`}},
	// A host name carries no port: its TXT says the host's, and srv_only
	// when the cluster's address answers leave it out (review S1).
	{Qname: "127-0-0-42-5433.host.ports.db.local.", Qtype: dns.TypeA, AA: true, Answer: []string{"127-0-0-42-5433.host.ports.db.local. 1 IN A 127.0.0.42"}},
	{Qname: "127-0-0-42-5433.host.ports.db.local.", Qtype: dns.TypeTXT, AA: true, Answer: []string{
		`127-0-0-42-5433.host.ports.db.local. 1 IN TXT "host=127.0.0.42:5433 role=replica lag_ms=0 lag_bytes=0 replay_lsn=0/9 age_ms=120 name=127-0-0-42-5433.host.ports.db.local. port=5433 srv_only=port"`}},
	{Qname: "127-0-0-41-5433.host.ports.db.local.", Qtype: dns.TypeTXT, AA: true, Answer: []string{
		`127-0-0-41-5433.host.ports.db.local. 1 IN TXT "host=127.0.0.41:5433 role=replica lag_ms=0 lag_bytes=0 replay_lsn=0/9 age_ms=120 name=127-0-0-41-5433.host.ports.db.local. port=5433 srv_only=address"`}},
	{Qname: "127-0-0-43-5432.host.ports.db.local.", Qtype: dns.TypeTXT, AA: true, Answer: []string{
		`127-0-0-43-5432.host.ports.db.local. 1 IN TXT "host=127.0.0.43:5432 role=replica lag_ms=0 lag_bytes=0 replay_lsn=0/9 age_ms=120 name=127-0-0-43-5432.host.ports.db.local. port=5432"`}},
	{Qname: "127-0-0-11-5432.host.orders.db.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, AA: true, Ns: []string{soa}}, // another cluster's host
	{Qname: "127-0-0-11-5432.host.nope.db.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, AA: true, Ns: []string{soa}},
	{Qname: "127-0-0-11-5432.host.db.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, AA: true, Ns: []string{soa}},

	// Empty non-terminals (review R12): host.<cluster> above the host
	// names, _tcp.<name> above _postgresql._tcp.<name>. NXDOMAIN there
	// would let a resolver deny every name below (RFC 8020); names below
	// them outside the grammar stay NXDOMAIN, and so does a non-terminal
	// with nothing below it.
	{Qname: "host.main.db.local.", Qtype: dns.TypeA, AA: true, Ns: []string{soa}},
	{Qname: "host.orders.db.local.", Qtype: dns.TypeAAAA, AA: true, Ns: []string{soa}},
	{Qname: "host.main.db.local.", Qtype: dns.TypeSOA, AA: true, Ns: []string{soa}},
	{Qname: "host.nope.db.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, AA: true, Ns: []string{soa}},
	{Qname: "x_y.host.main.db.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, AA: true, Ns: []string{soa}},
	{Qname: "_tcp.replica.db.local.", Qtype: dns.TypeA, AA: true, Ns: []string{soa}},
	{Qname: "_tcp.replica.db.local.", Qtype: dns.TypeSRV, AA: true, Ns: []string{soa}},
	{Qname: "_tcp.lag-100ms.replica.orders.db.local.", Qtype: dns.TypeTXT, AA: true, Ns: []string{soa}},
	{Qname: "_tcp.main.db.local.", Qtype: dns.TypeA, AA: true, Ns: []string{soa}},
	{Qname: "_tcp.127-0-0-11-5432.host.main.db.local.", Qtype: dns.TypeA, AA: true, Ns: []string{soa}},
	{Qname: "_tcp.127-0-0-99-5432.host.main.db.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, AA: true, Ns: []string{soa}},
	{Qname: "_tcp.host.main.db.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, AA: true, Ns: []string{soa}},
	{Qname: "_tcp.nope.db.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, AA: true, Ns: []string{soa}},
	{Qname: "_tcp.primary.nope.db.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, AA: true, Ns: []string{soa}},
	{Qname: "_tcp.dc-nowhere.replica.db.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, AA: true, Ns: []string{soa}},
	{Qname: "_tcp.db.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, AA: true, Ns: []string{soa}},
	{Qname: "_tcp.ns.db.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, AA: true, Ns: []string{soa}},
	{Qname: "_tcp._tcp.replica.db.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, AA: true, Ns: []string{soa}},
	{Qname: "x._tcp.replica.db.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, AA: true, Ns: []string{soa}},
	{Qname: "_postgresql._tcp.host.main.db.local.", Qtype: dns.TypeSRV, Rcode: dns.RcodeNameError, AA: true, Ns: []string{soa}},

	// SRV: the A answer's hosts, with their ports and names.
	{Qname: "_postgresql._tcp.primary.db.local.", Qtype: dns.TypeSRV, AA: true,
		Answer: []string{"_postgresql._tcp.primary.db.local. 1 IN SRV 10 0 5432 127-0-0-11-5432.host.main.db.local."},
		Extra:  []string{"127-0-0-11-5432.host.main.db.local. 1 IN A 127.0.0.11"}},
	{Qname: "_postgresql._tcp.lag-50ms.replica.db.local.", Qtype: dns.TypeSRV, AA: true,
		Answer: []string{"_postgresql._tcp.lag-50ms.replica.db.local. 1 IN SRV 10 0 5432 127-0-0-12-5432.host.main.db.local."},
		Extra:  []string{"127-0-0-12-5432.host.main.db.local. 1 IN A 127.0.0.12"}},
	{Qname: "_postgresql._tcp.any.db.local.", Qtype: dns.TypeSRV, AA: true,
		Answer: []string{
			"_postgresql._tcp.any.db.local. 1 IN SRV 10 0 5432 127-0-0-11-5432.host.main.db.local.",
			"_postgresql._tcp.any.db.local. 1 IN SRV 20 0 5432 127-0-0-12-5432.host.main.db.local.",
			"_postgresql._tcp.any.db.local. 1 IN SRV 20 0 5432 127-0-0-13-5432.host.main.db.local."},
		Extra: []string{"127-0-0-11-5432.host.main.db.local. 1 IN A 127.0.0.11", "127-0-0-12-5432.host.main.db.local. 1 IN A 127.0.0.12",
			"127-0-0-13-5432.host.main.db.local. 1 IN A 127.0.0.13"}},
	{Qname: "_postgresql._tcp.main.db.local.", Qtype: dns.TypeSRV, AA: true,
		Answer: []string{
			"_postgresql._tcp.main.db.local. 1 IN SRV 10 0 5432 127-0-0-11-5432.host.main.db.local.",
			"_postgresql._tcp.main.db.local. 1 IN SRV 20 0 5432 127-0-0-12-5432.host.main.db.local.",
			"_postgresql._tcp.main.db.local. 1 IN SRV 20 0 5432 127-0-0-13-5432.host.main.db.local."},
		Extra: []string{"127-0-0-11-5432.host.main.db.local. 1 IN A 127.0.0.11", "127-0-0-12-5432.host.main.db.local. 1 IN A 127.0.0.12",
			"127-0-0-13-5432.host.main.db.local. 1 IN A 127.0.0.13"}},
	{Qname: "_postgresql._tcp.replica.orders.db.local.", Qtype: dns.TypeSRV, AA: true,
		Answer: []string{"_postgresql._tcp.replica.orders.db.local. 1 IN SRV 10 0 5432 0-0-0-0-0-0-0-1-5432.host.orders.db.local."},
		Extra:  []string{"0-0-0-0-0-0-0-1-5432.host.orders.db.local. 1 IN AAAA ::1"}},
	{Qname: "_postgresql._tcp.lsn-0-3000061.replica.db.local.", Qtype: dns.TypeSRV, AA: true, Ns: []string{soa}}, // no host fits
	{Qname: "_postgresql._tcp.primary.db.local.", Qtype: dns.TypeA, AA: true, Ns: []string{soa}},                 // an SRV name has no address
	{Qname: "_postgresql._tcp.primary.db.local.", Qtype: dns.TypeAAAA, AA: true, Ns: []string{soa}},
	{Qname: "_postgresql._tcp.primary.db.local.", Qtype: dns.TypeTXT, AA: true, Answer: []string{
		`_postgresql._tcp.primary.db.local. 1 IN TXT "host=127.0.0.11:5432 role=primary lag_ms=unknown lag_bytes=unknown replay_lsn=0/3000060 age_ms=120 name=127-0-0-11-5432.host.main.db.local."`}},
	{Qname: "primary.db.local.", Qtype: dns.TypeSRV, AA: true, Ns: []string{soa}}, // SRV lives under _postgresql._tcp.
	{Qname: "_postgresql._udp.primary.db.local.", Qtype: dns.TypeSRV, Rcode: dns.RcodeNameError, AA: true, Ns: []string{soa}},
	{Qname: "_mysql._tcp.primary.db.local.", Qtype: dns.TypeSRV, Rcode: dns.RcodeNameError, AA: true, Ns: []string{soa}},
	{Qname: "_postgresql._tcp.nonsense.db.local.", Qtype: dns.TypeSRV, Rcode: dns.RcodeNameError, AA: true, Ns: []string{soa}},
	{Qname: "_postgresql._tcp.lag-5.replica.db.local.", Qtype: dns.TypeSRV, Rcode: dns.RcodeNameError, AA: true, Ns: []string{soa}},
	{Qname: "_postgresql._tcp.primary.nope.db.local.", Qtype: dns.TypeSRV, Rcode: dns.RcodeNameError, AA: true, Ns: []string{soa}},
	{Qname: "_postgresql._tcp.db.local.", Qtype: dns.TypeSRV, Rcode: dns.RcodeNameError, AA: true, Ns: []string{soa}},
	{Qname: "_postgresql._tcp.ns.db.local.", Qtype: dns.TypeSRV, Rcode: dns.RcodeNameError, AA: true, Ns: []string{soa}},
	{Qname: "_postgresql._tcp.primary.example.com.", Qtype: dns.TypeSRV, Rcode: dns.RcodeRefused},

	// The cluster's SRV: never a drained replica (nor an offline one,
	// which replica names never answer); the drained primary stays.
	{Qname: "_postgresql._tcp.ops.db.local.", Qtype: dns.TypeSRV, AA: true,
		Answer: []string{
			"_postgresql._tcp.ops.db.local. 1 IN SRV 10 0 5432 127-0-0-31-5432.host.ops.db.local.",
			"_postgresql._tcp.ops.db.local. 1 IN SRV 20 0 5432 127-0-0-34-5432.host.ops.db.local.",
			"_postgresql._tcp.ops.db.local. 1 IN SRV 20 0 5432 127-0-0-35-5432.host.ops.db.local."},
		Extra: []string{"127-0-0-31-5432.host.ops.db.local. 1 IN A 127.0.0.31", "127-0-0-34-5432.host.ops.db.local. 1 IN A 127.0.0.34",
			"127-0-0-35-5432.host.ops.db.local. 1 IN A 127.0.0.35"}},
	// A drained replica keeps its own name.
	{Qname: "127-0-0-32-5432.host.ops.db.local.", Qtype: dns.TypeA, AA: true, Answer: []string{"127-0-0-32-5432.host.ops.db.local. 1 IN A 127.0.0.32"}},

	// Hosts on two ports: A names answer those on the client port, each
	// address once; SRV answers them all with their ports.
	{Qname: "replica.ports.db.local.", Qtype: dns.TypeA, AA: true, Answer: []string{"replica.ports.db.local. 1 IN A 127.0.0.43"}},
	{Qname: "any.ports.db.local.", Qtype: dns.TypeA, AA: true, Answer: []string{"any.ports.db.local. 1 IN A 127.0.0.43"}},
	{Qname: "lsn-0-9.replica.ports.db.local.", Qtype: dns.TypeA, AA: true, Answer: []string{"lsn-0-9.replica.ports.db.local. 1 IN A 127.0.0.43"}},
	{Qname: "_postgresql._tcp.replica.ports.db.local.", Qtype: dns.TypeSRV, AA: true,
		Answer: []string{
			"_postgresql._tcp.replica.ports.db.local. 1 IN SRV 10 0 5433 127-0-0-41-5433.host.ports.db.local.",
			"_postgresql._tcp.replica.ports.db.local. 1 IN SRV 10 0 5433 127-0-0-42-5433.host.ports.db.local.",
			"_postgresql._tcp.replica.ports.db.local. 1 IN SRV 10 0 5432 127-0-0-43-5432.host.ports.db.local."},
		Extra: []string{"127-0-0-41-5433.host.ports.db.local. 1 IN A 127.0.0.41", "127-0-0-42-5433.host.ports.db.local. 1 IN A 127.0.0.42",
			"127-0-0-43-5432.host.ports.db.local. 1 IN A 127.0.0.43"}},
	{Qname: "_postgresql._tcp.ports.db.local.", Qtype: dns.TypeSRV, AA: true,
		Answer: []string{
			"_postgresql._tcp.ports.db.local. 1 IN SRV 10 0 5432 127-0-0-41-5432.host.ports.db.local.",
			"_postgresql._tcp.ports.db.local. 1 IN SRV 20 0 5433 127-0-0-41-5433.host.ports.db.local.",
			"_postgresql._tcp.ports.db.local. 1 IN SRV 20 0 5433 127-0-0-42-5433.host.ports.db.local.",
			"_postgresql._tcp.ports.db.local. 1 IN SRV 20 0 5432 127-0-0-43-5432.host.ports.db.local."},
		Extra: []string{"127-0-0-41-5432.host.ports.db.local. 1 IN A 127.0.0.41", "127-0-0-41-5433.host.ports.db.local. 1 IN A 127.0.0.41",
			"127-0-0-42-5433.host.ports.db.local. 1 IN A 127.0.0.42", "127-0-0-43-5432.host.ports.db.local. 1 IN A 127.0.0.43"}},
	{Qname: "127-0-0-41-5433.host.ports.db.local.", Qtype: dns.TypeA, AA: true, Answer: []string{"127-0-0-41-5433.host.ports.db.local. 1 IN A 127.0.0.41"}},
	{Qname: "lsn-0-9.replica.ports.db.local.", Qtype: dns.TypeTXT, AA: true, Answer: []string{
		`lsn-0-9.replica.ports.db.local. 1 IN TXT "host=127.0.0.41:5433 role=replica lag_ms=0 lag_bytes=0 replay_lsn=0/9 age_ms=120 name=127-0-0-41-5433.host.ports.db.local. srv_only=address"`,
		`lsn-0-9.replica.ports.db.local. 1 IN TXT "host=127.0.0.42:5433 role=replica lag_ms=0 lag_bytes=0 replay_lsn=0/9 age_ms=120 name=127-0-0-42-5433.host.ports.db.local. srv_only=port"`,
		`lsn-0-9.replica.ports.db.local. 1 IN TXT "host=127.0.0.43:5432 role=replica lag_ms=0 lag_bytes=0 replay_lsn=0/9 age_ms=120 name=127-0-0-43-5432.host.ports.db.local."`}},
}

func TestHandler(t *testing.T) {
	forEachPath(t, func(t *testing.T, answer answerFunc) {
		h := newTestHandler(testSnapshot())
		for _, tc := range cases {
			t.Run(tc.Qname+"/"+dns.TypeToString[tc.Qtype], func(t *testing.T) {
				req := new(dns.Msg)
				req.SetQuestion(tc.Qname, tc.Qtype)
				m, _ := answer(h, req)
				checkReply(t, tc, m)
			})
		}
	})
}

// checkReply compares a reply with a Case whole. Answers of more than one
// record are compared as sets: replica order rotates.
func checkReply(t *testing.T, tc Case, m *dns.Msg) {
	t.Helper()
	if m.Rcode != tc.Rcode {
		t.Errorf("rcode %s, want %s", dns.RcodeToString[m.Rcode], dns.RcodeToString[tc.Rcode])
	}
	if m.Authoritative != tc.AA {
		t.Errorf("AA %v, want %v", m.Authoritative, tc.AA)
	}
	if m.RecursionAvailable {
		t.Error("RA set")
	}
	compareSection(t, "answer", m.Answer, tc.Answer)
	compareSection(t, "authority", m.Ns, tc.Ns)
	var extra []dns.RR
	for _, rr := range m.Extra {
		if rr.Header().Rrtype != dns.TypeOPT {
			extra = append(extra, rr)
		}
	}
	compareSection(t, "additional", extra, tc.Extra)
}

func compareSection(t *testing.T, section string, got []dns.RR, want []string) {
	t.Helper()
	var g, w []string
	for _, rr := range got {
		g = append(g, normalise(rr.String()))
	}
	for _, s := range want {
		rr, err := dns.NewRR(s)
		if err != nil {
			t.Fatalf("bad expected record %q: %v", s, err)
		}
		w = append(w, normalise(rr.String()))
	}
	slices.Sort(g)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		t.Errorf("%s section:\n got  %q\n want %q", section, g, w)
	}
}

func normalise(s string) string { return strings.Join(strings.Fields(s), " ") }

func TestHandlerNotReady(t *testing.T) {
	forEachPath(t, func(t *testing.T, answer answerFunc) {
		h := newTestHandler(&zone.Snapshot{})
		for _, name := range []string{"primary.db.local.", "lag-1s.replica.db.local."} {
			req := new(dns.Msg)
			req.SetQuestion(name, dns.TypeA)
			m, _ := answer(h, req)
			checkReply(t, Case{Rcode: dns.RcodeServerFailure}, m)
		}
		// The apex does not depend on the probe.
		req := new(dns.Msg)
		req.SetQuestion("db.local.", dns.TypeSOA)
		m, _ := answer(h, req)
		checkReply(t, Case{AA: true, Answer: []string{soa}}, m)
		// Which clusters exist is not known before the first snapshot.
		req.SetQuestion("main.db.local.", dns.TypeSOA)
		m, _ = answer(h, req)
		checkReply(t, Case{Rcode: dns.RcodeServerFailure}, m)
	})
}

// Before the first probe round has finished, a host name is SERVFAIL as
// every other name, though the configuration lists its cluster and host
// (review S2: it answered its configured IP while primary was SERVFAIL).
func TestHandlerHostNameNotReady(t *testing.T) {
	forEachPath(t, func(t *testing.T, answer answerFunc) {
		snap := testSnapshot()
		snap.Ready = false
		h := newTestHandler(snap)
		for _, q := range []struct {
			name  string
			qtype uint16
		}{
			{"127-0-0-11-5432.host.main.db.local.", dns.TypeA},
			{"0-0-0-0-0-0-0-1-5432.host.orders.db.local.", dns.TypeAAAA},
			{"127-0-0-11-5432.host.main.db.local.", dns.TypeTXT},
			{"_postgresql._tcp.127-0-0-11-5432.host.main.db.local.", dns.TypeSRV},
			{"primary.db.local.", dns.TypeA},
		} {
			req := new(dns.Msg)
			req.SetQuestion(q.name, q.qtype)
			m, _ := answer(h, req)
			checkReply(t, Case{Rcode: dns.RcodeServerFailure}, m)
		}
	})
}

// What each answer counts as asked (metrics): an unknown cluster label
// is as invalid as any name outside the grammar.
func TestHandlerAsked(t *testing.T) {
	forEachPath(t, func(t *testing.T, answer answerFunc) {
		h := newTestHandler(testSnapshot())
		for name, want := range map[string]Asked{
			"primary.db.local.": AskedPrimary, "lag-5ms.prefer-standby.db.local.": AskedPreferReplica,
			"any.orders.db.local.": AskedAny, "replica.nope.db.local.": AskedReplica, "sync.offline.ops.db.local.": AskedOffline,
			"main.db.local.": AskedCluster, "nope.db.local.": AskedInvalid,
			"lag-5.replica.db.local.": AskedInvalid, "db.local.": AskedApex, "ns.db.local.": AskedNameServer, "example.com.": AskedOutside,
		} {
			req := new(dns.Msg)
			req.SetQuestion(name, dns.TypeA)
			if _, asked := answer(h, req); asked != want {
				t.Errorf("%s: asked %v, want %v", name, asked, want)
			}
		}
		req := new(dns.Msg)
		req.SetQuestion("db.local.", dns.TypeAXFR)
		if _, asked := answer(h, req); asked != AskedTransfer {
			t.Errorf("AXFR: asked %v", asked)
		}
		req.Opcode = dns.OpcodeNotify
		if _, asked := answer(h, req); asked != AskedMalformed {
			t.Errorf("NOTIFY: asked %v", asked)
		}
	})
}

// The labels answers are counted under: a role name's own, and one each
// for the rest; no two share one.
func TestAskedLabels(t *testing.T) {
	seen := map[string]Asked{}
	for a := range Asked(NumAsked) {
		l := a.String()
		if l == "" || l == "unknown" || strings.HasPrefix(l, "target(") {
			t.Errorf("Asked(%d) has no label: %q", a, l)
		}
		if b, dup := seen[l]; dup {
			t.Errorf("Asked(%d) and Asked(%d) share the label %q", a, b, l)
		}
		seen[l] = a
	}
	for _, tg := range []zone.Target{zone.TargetPrimary, zone.TargetReplica, zone.TargetPreferReplica, zone.TargetAny} {
		if askedRole(tg).String() != tg.String() {
			t.Errorf("%v counts as %v", tg, askedRole(tg))
		}
	}
}

func TestHandlerRotatesReplicas(t *testing.T) {
	forEachPath(t, func(t *testing.T, answer answerFunc) {
		h := newTestHandler(testSnapshot())
		firsts := map[string]bool{}
		for range 4 {
			req := new(dns.Msg)
			req.SetQuestion("replica.db.local.", dns.TypeA)
			m, _ := answer(h, req)
			firsts[m.Answer[0].(*dns.A).A.String()] = true
		}
		if len(firsts) != 2 {
			t.Fatalf("the first replica was always one of %v", firsts)
		}
	})
}

func TestHandlerEDNS(t *testing.T) {
	forEachPath(t, func(t *testing.T, answer answerFunc) {
		h := newTestHandler(testSnapshot())
		req := new(dns.Msg)
		req.SetQuestion("primary.db.local.", dns.TypeA)
		req.SetEdns0(4096, false)
		m, _ := answer(h, req)
		opt := m.IsEdns0()
		if opt == nil || opt.UDPSize() != maxUDPSize {
			t.Fatalf("OPT = %v, want UDP size %d", opt, maxUDPSize)
		}
		if opt.Do() {
			t.Fatal("DO set in the reply to a query without it")
		}
		// RFC 3225: the DO bit of the query is copied into the reply.
		req.IsEdns0().SetDo()
		if m, _ := answer(h, req); m.IsEdns0() == nil || !m.IsEdns0().Do() {
			t.Fatalf("DO not echoed: %v", m.IsEdns0())
		}
		req.IsEdns0().SetVersion(1)
		if m, _ := answer(h, req); m.Rcode != dns.RcodeBadVers {
			t.Fatalf("EDNS version 1: rcode %s", dns.RcodeToString[m.Rcode])
		}
	})
}

func TestHandlerRejectsOddRequests(t *testing.T) {
	forEachPath(t, func(t *testing.T, answer answerFunc) {
		h := newTestHandler(testSnapshot())
		req := new(dns.Msg)
		req.SetQuestion("primary.db.local.", dns.TypeA)
		req.Opcode = dns.OpcodeUpdate
		if m, _ := answer(h, req); m.Rcode != dns.RcodeNotImplemented {
			t.Errorf("UPDATE: %s", dns.RcodeToString[m.Rcode])
		}
		req = new(dns.Msg)
		req.SetQuestion("primary.db.local.", dns.TypeA)
		req.Question[0].Qclass = dns.ClassCHAOS
		if m, _ := answer(h, req); m.Rcode != dns.RcodeRefused {
			t.Errorf("class CH: %s", dns.RcodeToString[m.Rcode])
		}
		req = new(dns.Msg)
		if m, _ := answer(h, req); m.Rcode != dns.RcodeFormatError {
			t.Errorf("no question: %s", dns.RcodeToString[m.Rcode])
		}
	})
}

// Each cluster's SOA carries its own serial, the apex the highest; every
// part of one answer comes from the snapshot loaded for it, and a new
// snapshot moves the serials answered.
func TestHandlerSerials(t *testing.T) {
	forEachPath(t, func(t *testing.T, answer answerFunc) {
		snap := testSnapshot()
		start := uint32(t0.Unix())
		snap.Clusters[0].Serial, snap.Clusters[1].Serial = start+3, start+9
		h := newTestHandler(snap)
		soaAt := func(owner string, serial uint32) string {
			return fmt.Sprintf("%s 1 IN SOA ns.db.local. hostmaster.db.local. %d 60 10 3600 1", owner, serial)
		}
		ask := func(name string, qtype uint16) *dns.Msg {
			req := new(dns.Msg)
			req.SetQuestion(name, qtype)
			m, _ := answer(h, req)
			return m
		}
		checkReply(t, Case{AA: true, Answer: []string{soaAt("db.local.", start+9)}}, ask("db.local.", dns.TypeSOA))
		checkReply(t, Case{AA: true, Answer: []string{soaAt("main.db.local.", start+3)}}, ask("main.db.local.", dns.TypeSOA))
		checkReply(t, Case{AA: true, Answer: []string{soaAt("orders.db.local.", start+9)}}, ask("orders.db.local.", dns.TypeSOA))
		checkReply(t, Case{AA: true, Ns: []string{soaAt("db.local.", start+9)}}, ask("primary.db.local.", dns.TypeMX))
		checkReply(t, Case{AA: true, Ns: []string{soaAt("db.local.", start+9)}}, ask("main.db.local.", dns.TypeA))
		checkReply(t, Case{Rcode: dns.RcodeNameError, AA: true, Ns: []string{soaAt("db.local.", start+9)}}, ask("nope.db.local.", dns.TypeA))

		next := testSnapshot()
		next.Clusters[0].Serial, next.Clusters[1].Serial = start+12, start+9
		h.table.Store(next)
		checkReply(t, Case{AA: true, Answer: []string{soaAt("db.local.", start+12)}}, ask("db.local.", dns.TypeSOA))
		checkReply(t, Case{AA: true, Answer: []string{soaAt("main.db.local.", start+12)}}, ask("main.db.local.", dns.TypeSOA))
		checkReply(t, Case{AA: true, Answer: []string{soaAt("orders.db.local.", start+9)}}, ask("orders.db.local.", dns.TypeSOA))

		// A serial behind the start time (a snapshot without serials) is
		// answered as the start time: serials never go back.
		old := testSnapshot()
		old.Clusters[0].Serial = start - 100
		h.table.Store(old)
		checkReply(t, Case{AA: true, Answer: []string{soaAt("main.db.local.", start)}}, ask("main.db.local.", dns.TypeSOA))
	})
}

// dns.nameservers: every name server is in the NS RRset, the first is the
// SOA MNAME, the addresses of those in the zone are answered and sent as
// glue; ns.<zone> is no longer a name.
func TestHandlerNameServers(t *testing.T) {
	forEachPath(t, func(t *testing.T, answer answerFunc) {
		table := zone.NewTable()
		table.Store(testSnapshot())
		h := NewHandler(Config{Zone: "db.local", TTL: 1, NameServers: []NameServer{
			{Name: "ns1.db.local", Addrs: []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")}},
			{Name: "NS2.db.local.", Addrs: []netip.Addr{netip.MustParseAddr("192.0.2.2")}},
			{Name: "pgdns.example.net.", Addrs: []netip.Addr{netip.MustParseAddr("192.0.2.99")}},
		}}, table, slog.New(slog.NewTextHandler(io.Discard, nil)))
		h.serial = uint32(t0.Unix())
		soa1 := "db.local. 1 IN SOA ns1.db.local. hostmaster.db.local. 1767268800 60 10 3600 1"
		for _, tc := range []Case{
			{Qname: "db.local.", Qtype: dns.TypeNS, AA: true,
				Answer: []string{"db.local. 1 IN NS ns1.db.local.", "db.local. 1 IN NS ns2.db.local.", "db.local. 1 IN NS pgdns.example.net."},
				Extra:  []string{"ns1.db.local. 1 IN A 192.0.2.1", "ns1.db.local. 1 IN AAAA 2001:db8::1", "ns2.db.local. 1 IN A 192.0.2.2"}},
			{Qname: "db.local.", Qtype: dns.TypeSOA, AA: true, Answer: []string{soa1}},
			{Qname: "ns1.db.local.", Qtype: dns.TypeA, AA: true, Answer: []string{"ns1.db.local. 1 IN A 192.0.2.1"}},
			{Qname: "ns1.db.local.", Qtype: dns.TypeAAAA, AA: true, Answer: []string{"ns1.db.local. 1 IN AAAA 2001:db8::1"}},
			{Qname: "ns2.db.local.", Qtype: dns.TypeAAAA, AA: true, Ns: []string{soa1}},
			{Qname: "ns.db.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, AA: true, Ns: []string{soa1}},
			{Qname: "main.db.local.", Qtype: dns.TypeSOA, AA: true, Answer: []string{"main.db.local. 1 IN SOA ns1.db.local. hostmaster.db.local. 1767268800 60 10 3600 1"}},
		} {
			t.Run(tc.Qname+"/"+dns.TypeToString[tc.Qtype], func(t *testing.T) {
				req := new(dns.Msg)
				req.SetQuestion(tc.Qname, tc.Qtype)
				m, _ := answer(h, req)
				checkReply(t, tc, m)
			})
		}
	})
}
