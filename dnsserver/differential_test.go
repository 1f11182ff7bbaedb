package dnsserver

import (
	"encoding/binary"
	"errors"
	"net"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/zone/zonetest"
)

// rawExchange sends wire to addr over UDP and returns the reply, nil when
// none comes within wait.
func rawExchange(t *testing.T, addr string, wire []byte, wait time.Duration) []byte {
	t.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(wire); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 65535)
	n, err := c.Read(buf)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

// differentialDatagrams are raw queries, plain and odd, that the UDP fast
// server and miekg/dns's own server must answer alike.
func differentialDatagrams(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	pack := func(m *dns.Msg) []byte {
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range cases {
		for _, size := range []int{-1, 0, 512, 1232, 4096} {
			for _, do := range []bool{false, true} {
				if size < 0 && do {
					continue
				}
				m := new(dns.Msg)
				m.SetQuestion(tc.Qname, tc.Qtype)
				m.Id = 0x1234
				if size >= 0 {
					m.SetEdns0(uint16(size), do)
				}
				out[tc.Qname+"/"+dns.TypeToString[tc.Qtype]+"/"+itoa(size)+"/"+map[bool]string{true: "do"}[do]] = pack(m)
			}
		}
	}
	base := func() *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion("pRiMaRy.Db.LoCaL.", dns.TypeA)
		m.Id = 0x4321
		return m
	}
	m := base()
	m.Response = true
	out["response"] = pack(m)
	for _, op := range []int{dns.OpcodeIQuery, dns.OpcodeStatus, dns.OpcodeNotify, dns.OpcodeUpdate, 15} {
		m := base()
		m.Opcode = op
		out["opcode"+itoa(op)] = pack(m)
	}
	m = base()
	m.Question = nil
	out["qdcount0"] = pack(m)
	m = base()
	m.Question = append(m.Question, dns.Question{Name: "replica.db.local.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
	out["qdcount2"] = pack(m)
	m = base()
	m.Answer = []dns.RR{aRecord("primary.db.local.", 1, testSrc.Addr())}
	out["with-answer"] = pack(m)
	m = base()
	m.Question[0].Qclass = dns.ClassCHAOS
	out["class-ch"] = pack(m)
	m = base()
	m.Question[0].Qclass = dns.ClassANY
	out["class-any"] = pack(m)
	m = base()
	m.SetEdns0(1232, true)
	m.IsEdns0().SetVersion(1)
	out["edns-v1"] = pack(m)
	m = base()
	m.SetEdns0(1232, false)
	m.IsEdns0().SetExtendedRcode(dns.RcodeBadVers)
	out["edns-ext-rcode"] = pack(m)
	m = base()
	m.SetEdns0(1232, false)
	m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0123456789abcdef"})
	out["edns-cookie"] = pack(m)
	m = base()
	m.SetEdns0(1232, false)
	m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.IPv4(10, 1, 7, 0)})
	out["edns-ecs-untrusted"] = pack(m)
	m = base()
	m.SetEdns0(1232, false)
	m.Extra = append(m.Extra, m.Extra[0])
	out["two-opts"] = pack(m)
	m = base()
	m.SetEdns0(1232, false)
	m.Extra = append(m.Extra, m.Extra[0])
	m.IsEdns0().SetVersion(1)
	out["two-opts-v1"] = pack(m)
	for _, scope := range []uint8{0, 1, 24} {
		m = base()
		m.SetEdns0(1232, true)
		m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, SourceScope: scope, Address: net.IPv4(10, 1, 7, 0)})
		out["edns-ecs-scope"+itoa(int(scope))] = pack(m)
	}
	for _, v := range []uint8{1, 2, 255} {
		m = base()
		m.SetEdns0(512, false)
		m.IsEdns0().SetVersion(v)
		out["edns-version"+itoa(int(v))] = pack(m)
	}
	m = base()
	m.CheckingDisabled, m.AuthenticatedData, m.RecursionDesired = true, true, false
	out["cd-ad-nord"] = pack(m)
	m = base()
	m.Zero = true
	out["z-bit"] = pack(m)
	plain := pack(base())
	out["trailing"] = append(slices.Clone(plain), 0, 0, 0)
	out["cut"] = plain[:len(plain)-3]
	out["header-only"] = plain[:12]
	out["short"] = plain[:11]
	out["empty"] = []byte{}
	hdr := slices.Clone(plain[:12])
	binary.BigEndian.PutUint16(hdr[4:], 1)
	// primary.db.local via a compression pointer to a label inside the question.
	out["pointer"] = append(hdr, 7, 'p', 'r', 'i', 'm', 'a', 'r', 'y', 0xC0, 12+8+1, 0, 1, 0, 1)
	return out
}

func itoa(i int) string {
	if i < 0 {
		return "none"
	}
	return strconv.Itoa(i)
}

// startBoth serves h with pgdns's UDP fast server and with miekg/dns's
// own UDP server (a handler that is not a *Handler), and returns their
// addresses.
func startBoth(t *testing.T, h *Handler) (fast, miekg string) {
	t.Helper()
	fast = startServer(t, h)
	srv, err := Start("127.0.0.1:0", dns.HandlerFunc(h.ServeDNS), Limits{MaxTCPConns: 64, TCPIdle: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(t.Context()) })
	if srv.fast != nil {
		t.Fatal("a handler func is served by the fast server")
	}
	return fast, srv.Addr()
}

// sameReply fails t unless a and b (either nil: no reply) say the same:
// header, question, and records (as sets when sets, else only how many
// per section, for answers that rotate through more hosts than fit).
func sameReply(t *testing.T, a, b []byte, sets bool) {
	t.Helper()
	if (a == nil) != (b == nil) {
		t.Fatalf("fast server replied %v, miekg/dns's server %v", a != nil, b != nil)
	}
	if a == nil {
		return
	}
	var fm, sm dns.Msg
	if err := fm.Unpack(a); err != nil {
		t.Fatalf("fast reply does not unpack: %v", err)
	}
	if err := sm.Unpack(b); err != nil {
		t.Fatalf("miekg reply does not unpack: %v", err)
	}
	if fm.MsgHdr != sm.MsgHdr || !slices.Equal(fm.Question, sm.Question) {
		t.Fatalf("replies differ:\nfast\n%v\nmiekg\n%v", &fm, &sm)
	}
	str := func(rrs []dns.RR) []string {
		var s []string
		for _, rr := range rrs {
			if sets {
				s = append(s, rr.String())
			} else {
				s = append(s, dns.TypeToString[rr.Header().Rrtype])
			}
		}
		slices.Sort(s)
		return s
	}
	if !slices.Equal(str(fm.Answer), str(sm.Answer)) || !slices.Equal(str(fm.Ns), str(sm.Ns)) || !slices.Equal(str(fm.Extra), str(sm.Extra)) {
		t.Fatalf("records differ:\nfast\n%v\nmiekg\n%v", &fm, &sm)
	}
}

// The UDP fast server answers every datagram as miekg/dns's own UDP server
// did before it, with the same handler and zone: the same reply (records
// as sets: replicas rotate), or no reply to either (a response, junk).
func TestUDPFastServerMatchesMiekgServer(t *testing.T) {
	fast, miekg := startBoth(t, newTestHandler(testSnapshot()))
	for name, wire := range differentialDatagrams(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sameReply(t, rawExchange(t, fast, wire, time.Second), rawExchange(t, miekg, wire, time.Second), true)
		})
	}
}

// Where more replicas than fit in the datagram are selected, both servers
// send as many, with TC, for every size a client may offer.
func TestUDPFastServerTruncatesAsMiekgServer(t *testing.T) {
	h := newTestHandler(tooManyForUDP())
	fast, miekg := startBoth(t, h)
	for _, name := range []string{"replica.db.local.", "ANY.db.local.", "lag-10s.replica.db.local.", "prefer-replica.db.local."} {
		for _, size := range []int{-1, 0, 511, 512, 513, 600, 1000, 1231, 1232, 1233, 4096, 65535} {
			for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
				m := new(dns.Msg)
				m.SetQuestion(name, qtype)
				if size >= 0 {
					m.SetEdns0(uint16(size), size%2 == 1)
				}
				wire, err := m.Pack()
				if err != nil {
					t.Fatal(err)
				}
				sameReply(t, rawExchange(t, fast, wire, time.Second), rawExchange(t, miekg, wire, time.Second), false)
			}
		}
	}
}

// A new snapshot is answered at once over UDP: after a failover the fast
// server sends the new primary, and NODATA carries the new serial (its SOA
// is packed once per serial).
func TestUDPFastServerAnswersTheNewSnapshot(t *testing.T) {
	h := newTestHandler(testSnapshot())
	fast, _ := startBoth(t, h)
	ask := func(name string, qtype uint16) *dns.Msg {
		req := new(dns.Msg)
		req.SetQuestion(name, qtype)
		return exchange(t, "udp", fast, req)
	}
	if m := ask("primary.db.local.", dns.TypeA); len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != "127.0.0.11" {
		t.Fatalf("before the failover: %v", m)
	}
	if m := ask("primary.db.local.", dns.TypeAAAA); len(m.Ns) != 1 || m.Ns[0].(*dns.SOA).Serial != h.serial {
		t.Fatalf("before the failover, NODATA: %v", m)
	}
	for i := range 3 {
		promoted := host("127.0.0.12", false, 0x3000060)
		snap := zonetest.Ready(t0, 2*time.Second, zonetest.Cluster("main", host("127.0.0.11", true, 0x3000060), promoted))
		snap.Clusters[0].Serial = h.serial + uint32(i) + 1
		h.table.Store(snap)
		if m := ask("primary.db.local.", dns.TypeA); len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != "127.0.0.12" {
			t.Fatalf("after failover %d: %v", i, m)
		}
		if m := ask("primary.db.local.", dns.TypeAAAA); len(m.Ns) != 1 || m.Ns[0].(*dns.SOA).Serial != h.serial+uint32(i)+1 {
			t.Fatalf("after failover %d, NODATA: %v", i, m)
		}
	}
}
