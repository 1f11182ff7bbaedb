package dnsserver

import (
	"log/slog"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/zone"
)

// maxUDPSize is the largest UDP answer pgdns sends, whatever the client
// offers: 1232 bytes avoids IP fragmentation on every common path (DNS
// flag day 2020).
const maxUDPSize = 1232

// Config configures a Handler.
type Config struct {
	Zone string // the zone served, e.g. "db.local"
	TTL  uint32 // TTL of every answer and the SOA MINIMUM

	// NameServers are the zone's name servers: the NS RRset in this
	// order, the first one the SOA MNAME. The addresses of a name under
	// the zone are answered for it and sent as glue with NS answers.
	// Empty: one name server, "ns.<zone>", with NameServerIPs.
	NameServers []NameServer

	// NameServerIPs, when NameServers is empty, are answered for
	// "ns.<zone>" (the listen address when it is specific).
	NameServerIPs []netip.Addr

	// LSNWait is how long an lsn- query that no replica satisfies may wait
	// for Refresh to re-probe the replicas; 0 answers at once.
	LSNWait time.Duration
	// Refresh re-probes the replicas of a cluster at once and returns a
	// channel closed when their results are published (probe.Prober.Refresh).
	Refresh func(cluster string) <-chan struct{}

	// OnAnswer, when set, is called once per answer with what was asked
	// and the rcode sent, for metrics.
	OnAnswer func(asked Asked, rcode int)

	// ClientSubnetFrom are the sources (forwarders) whose EDNS Client
	// Subnet option locates the client instead of the source address;
	// empty: the option is ignored.
	ClientSubnetFrom []netip.Prefix

	// OnLSNUnreachable, when set, is called once per lsn- lookup answered
	// at once, without a refresh, because its LSN is beyond any position
	// the cluster's primary can have reached (zone.View.LSNUnreachable).
	OnLSNUnreachable func(cluster string)

	// OnLatency, when set, is called once per answer with the path that
	// built it, its rcode, and how long it took, before it is sent. On
	// the fast path that is from the batch of datagrams read to every
	// reply of the batch built (the replies leave together); on the slow
	// path from the message miekg/dns unpacked to its reply built, an lsn-
	// lookup's wait for a re-probe included. It runs in the UDP readers,
	// which allocate nothing on the fast path: neither may it.
	OnLatency func(path Path, rcode int, took time.Duration)

	// OnLocality, when set, is called once per answer to a replica name
	// (replica, prefer-replica, any) that holds a host, with where it
	// sends the client, for metrics.
	OnLocality func(zone.Locality)
}

// NameServer is one name server of the zone.
type NameServer struct {
	Name  string       // a fully qualified name, in the zone or not
	Addrs []netip.Addr // answered for Name when it is in the zone
}

// Handler answers DNS queries for one zone from a zone.Table.
type Handler struct {
	origin  string   // lower-case FQDN of the zone
	nsNames []string // lower-case FQDNs of the NS RRset; the first is the SOA MNAME
	nsAddrs map[string][]netip.Addr
	ttl     uint32
	serial  uint32 // the least serial answered: the start time
	table   *zone.Table
	log     *slog.Logger
	now     func() time.Time
	onAns   func(asked Asked, rcode int)
	onLat   func(path Path, rcode int, took time.Duration)
	onLoc   func(zone.Locality)
	onUnrch func(cluster string)

	subnetFrom []netip.Prefix // sources whose ECS option is believed

	lsnWait time.Duration
	refresh func(cluster string) <-chan struct{}

	soaWire atomic.Pointer[packedSOA] // the apex SOA packed for the fast path
}

// NewHandler returns a Handler for cfg reading from table.
func NewHandler(cfg Config, table *zone.Table, log *slog.Logger) *Handler {
	origin := dns.CanonicalName(cfg.Zone)
	servers := cfg.NameServers
	if len(servers) == 0 {
		servers = []NameServer{{Name: zone.NameServerLabel + "." + origin, Addrs: cfg.NameServerIPs}}
	}
	h := &Handler{
		origin:  origin,
		nsAddrs: map[string][]netip.Addr{},
		ttl:     cfg.TTL,
		// Serials come from the snapshot (zone.Snapshot.StampSerials);
		// the start time is the floor, for a snapshot that has none yet.
		serial: uint32(time.Now().Unix()),
		table:  table,
		log:    log,
		now:    time.Now,
		onAns:  cfg.OnAnswer,
		onLat:  cfg.OnLatency,
		onLoc:  cfg.OnLocality,

		onUnrch: cfg.OnLSNUnreachable,

		subnetFrom: cfg.ClientSubnetFrom,

		lsnWait: cfg.LSNWait,
		refresh: cfg.Refresh,
	}
	for _, ns := range servers {
		name := dns.CanonicalName(ns.Name)
		h.nsNames = append(h.nsNames, name)
		if dns.IsSubDomain(origin, name) {
			h.nsAddrs[name] = append(h.nsAddrs[name], ns.Addrs...)
		}
	}
	return h
}

// ServeDNS implements dns.Handler. It is a thin shell around answer: it
// recovers from panics (the client gets SERVFAIL, the process lives on)
// and fits UDP answers to the size the client can take.
func (h *Handler) ServeDNS(w dns.ResponseWriter, req *dns.Msg) { h.serve(w, req, true) }

// immediate is h answering every lsn- lookup at once, as lsn_wait 0 does:
// the UDP server's answer when every waiting slot is taken.
type immediate struct{ h *Handler }

// ServeDNS implements dns.Handler.
func (i immediate) ServeDNS(w dns.ResponseWriter, req *dns.Msg) { i.h.serve(w, req, false) }

// serve is ServeDNS; mayWait false answers lsn- lookups without waiting.
func (h *Handler) serve(w dns.ResponseWriter, req *dns.Msg, mayWait bool) {
	var start time.Time
	if h.onLat != nil {
		start = time.Now()
	}
	defer func() {
		if v := recover(); v != nil {
			h.log.Error("panic while answering a query", "panic", v, "question", questionString(req))
			m := new(dns.Msg)
			m.SetRcode(req, dns.RcodeServerFailure)
			_ = w.WriteMsg(m)
		}
	}()
	m, asked := h.reply(req, sourceAddr(w.RemoteAddr()), mayWait)
	if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
		size := udpSize(req)
		fitAdditional(m, size)
		m.Truncate(size)
	}
	// Counted before it is sent: whoever has the answer can see it counted.
	if h.onAns != nil {
		h.onAns(asked, m.Rcode)
	}
	if h.onLat != nil {
		h.onLat(PathSlow, m.Rcode, time.Since(start))
	}
	_ = w.WriteMsg(m)
}

func questionString(req *dns.Msg) string {
	if req == nil || len(req.Question) == 0 {
		return ""
	}
	return req.Question[0].String()
}

// udpSize is how large a UDP answer to req may be.
func udpSize(req *dns.Msg) int {
	size := dns.MinMsgSize
	if opt := req.IsEdns0(); opt != nil {
		size = max(int(opt.UDPSize()), dns.MinMsgSize)
	}
	return min(size, maxUDPSize)
}

// answer is answerFrom for a client whose address is not known (tests).
func (h *Handler) answer(req *dns.Msg) (*dns.Msg, Asked) {
	return h.answerFrom(req, netip.Addr{})
}

// answerFrom builds the reply to req, which came from src, and says what
// was asked. The zone decides the outcome (lookup); finish maps it to an
// rcode.
func (h *Handler) answerFrom(req *dns.Msg, src netip.Addr) (*dns.Msg, Asked) {
	return h.reply(req, src, true)
}

// reply is answerFrom; mayWait false answers an lsn- lookup without
// waiting.
func (h *Handler) reply(req *dns.Msg, src netip.Addr, mayWait bool) (*dns.Msg, Asked) {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Compress = true
	m.RecursionAvailable = false

	if rcode := ednsError(req); rcode != dns.RcodeSuccess {
		if rcode != dns.RcodeFormatError || countOPT(req.Extra) == 1 {
			m.SetEdns0(maxUDPSize, req.IsEdns0().Do())
		}
		m.Rcode = rcode
		return m, AskedMalformed
	}
	if opt := req.IsEdns0(); opt != nil {
		m.SetEdns0(maxUDPSize, opt.Do()) // RFC 3225: DO is echoed
	}
	if req.Opcode != dns.OpcodeQuery {
		m.Rcode = dns.RcodeNotImplemented
		return m, AskedMalformed
	}
	if len(req.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		return m, AskedMalformed
	}
	v := h.table.View(h.now()) // the one read of the zone this answer makes (see answerHosts)
	from, ecs := h.clientLocation(req, src, v.Snap)
	if ecs != nil {
		opt := m.IsEdns0() // there is one: the option came in the query's
		opt.Option = append(opt.Option, ecs)
	}
	asked, outcome, v := h.lookup(m, req.Question[0], from, v, mayWait)
	return h.finish(m, outcome, v.Snap), asked
}

// ednsError is the rcode for a query whose EDNS is wrong, RcodeSuccess
// when it is right or absent: more than one OPT record is FORMERR (RFC
// 6891 6.1.1), and the reply has none (which one would it answer?); a
// version other than 0 is BADVERS, with an OPT of version 0, the one
// pgdns speaks (6.1.3); a Client Subnet option with a SCOPE PREFIX-LENGTH
// other than 0 is FORMERR (RFC 7871 6: it must be 0 in queries), believed
// or not. The UDP fast path takes none of these (parseWire): they all
// come here.
func ednsError(req *dns.Msg) int {
	opt := req.IsEdns0()
	switch {
	case opt == nil:
		return dns.RcodeSuccess
	case countOPT(req.Extra) > 1:
		return dns.RcodeFormatError
	case opt.Version() != 0:
		return dns.RcodeBadVers
	}
	for _, o := range opt.Option {
		if ecs, ok := o.(*dns.EDNS0_SUBNET); ok && ecs.SourceScope != 0 {
			return dns.RcodeFormatError
		}
	}
	return dns.RcodeSuccess
}

func countOPT(rrs []dns.RR) int {
	n := 0
	for _, rr := range rrs {
		if rr.Header().Rrtype == dns.TypeOPT {
			n++
		}
	}
	return n
}

// lookup fills the answer to q, asked by a client in location from (""
// when unknown), from v, and returns what was asked, the zone's outcome
// and the view the answer was read from.
func (h *Handler) lookup(m *dns.Msg, q dns.Question, from string, v zone.View, mayWait bool) (Asked, zone.Outcome, zone.View) {
	name := dns.CanonicalName(q.Name)
	parsed, err := zone.Parse(name, h.origin)
	switch o := zone.OutcomeOf(err); {
	case o == zone.Refused || (q.Qclass != dns.ClassINET && q.Qclass != dns.ClassANY):
		return AskedOutside, zone.Refused, v // not ours, and pgdns never recurses
	case q.Qtype == dns.TypeAXFR || q.Qtype == dns.TypeIXFR:
		return AskedTransfer, zone.Refused, v // no zone transfers, as CoreDNS without "transfer"
	case o != zone.Answered:
		return AskedInvalid, o, v
	}
	if addrs, ok := h.nsAddrs[name]; ok {
		m.Answer = h.addresses(q.Name, q.Qtype, addrs)
		return AskedNameServer, zone.Answered, v
	}

	if parsed.ENT {
		// host.<cluster>, _tcp.<name>: empty non-terminals. NXDOMAIN
		// there would deny every name below (RFC 8020), so they answer
		// NOERROR, no record, the SOA, when those names exist.
		switch o := zone.OutcomeOf(v.EmptyNonTerminal(&parsed)); o {
		case zone.Answered, zone.NotReady:
			return AskedCluster, o, v
		default:
			return AskedInvalid, o, v
		}
	}
	switch parsed.Kind {
	case zone.KindApex:
		h.answerApex(m, q.Qtype, v.Snap)
		return AskedApex, zone.Answered, v
	case zone.KindNameServer:
		return AskedInvalid, zone.NoSuchName, v // not one of the configured name servers
	case zone.KindCluster:
		if parsed.SRV {
			// _postgresql._tcp.<cluster>: the cluster in the SRV
			// proposals' shape (zone.Query.ClusterService).
			if _, err := v.Snap.LookupCluster(parsed.Cluster); err != nil {
				return AskedInvalid, zone.OutcomeOf(err), v
			}
			parsed.From = from
			parsed = parsed.ClusterService()
			o, v := h.answerHosts(m, q, &parsed, v, mayWait)
			return AskedCluster, o, v
		}
		asked, o := h.answerCluster(m, q, parsed.Cluster, v.Snap)
		return asked, o, v
	case zone.KindHostName:
		return AskedHost, h.answerHostName(m, q, &parsed, v), v
	}
	parsed.From = from
	o, v := h.answerHosts(m, q, &parsed, v, mayWait)
	return askedRole(parsed.Target), o, v
}

// finish maps the outcome to the reply's rcode, AA bit and authority
// section: the one table from outcomes to DNS answers (CoreDNS's file
// plugin does the same with its lookup Result).
func (h *Handler) finish(m *dns.Msg, o zone.Outcome, snap *zone.Snapshot) *dns.Msg {
	if o == zone.Answered && len(m.Answer) == 0 {
		o = zone.NoData // a valid name with no record of the type asked
	}
	switch o {
	case zone.Answered:
		m.Authoritative = true
	case zone.NoData:
		// NOERROR/NODATA with the SOA in the authority section, so that
		// resolvers cache it only for the TTL.
		m.Authoritative = true
		m.Ns = []dns.RR{h.soaRecord(h.origin, h.apexSerial(snap))}
	case zone.NoSuchName:
		m.Authoritative = true
		m.Rcode = dns.RcodeNameError
		m.Ns = []dns.RR{h.soaRecord(h.origin, h.apexSerial(snap))}
	case zone.Refused:
		m.Rcode = dns.RcodeRefused
	case zone.NotReady:
		m.Rcode = dns.RcodeServerFailure // the hosts are not known yet
	default:
		h.log.Error("no answer to a query", "outcome", o.String(), "question", m.Question[0].String())
		m.Rcode = dns.RcodeServerFailure
	}
	return m
}

// apexSerial is the serial of the zone's SOA: the highest of the
// clusters' (so that it moves when any does), never below the start time.
func (h *Handler) apexSerial(snap *zone.Snapshot) uint32 {
	return h.atLeastStart(snap.Serial())
}

func (h *Handler) atLeastStart(serial uint32) uint32 {
	if zone.SerialLess(serial, h.serial) {
		return h.serial
	}
	return serial
}

func (h *Handler) answerApex(m *dns.Msg, qtype uint16, snap *zone.Snapshot) {
	switch qtype {
	case dns.TypeSOA, dns.TypeANY: // ANY: RFC 8482, one small answer
		m.Answer = []dns.RR{h.soaRecord(h.origin, h.apexSerial(snap))}
	case dns.TypeNS:
		for _, name := range h.nsNames {
			m.Answer = append(m.Answer, h.nsRecord(name))
		}
		m.Extra = append(m.Extra, h.glue()...)
	}
}

// answerCluster answers <cluster>.<zone>: an empty non-terminal (RFC 8020:
// never NXDOMAIN, or resolvers drop the whole subtree) that holds the
// cluster's own SOA, so that a client taking the zone of
// primary.orders.db.local to be orders.db.local finds one, with the
// serial of that cluster. A label that names no cluster is as invalid as
// any other name outside the grammar.
func (h *Handler) answerCluster(m *dns.Msg, q dns.Question, name string, snap *zone.Snapshot) (Asked, zone.Outcome) {
	c, err := snap.LookupCluster(name)
	switch o := zone.OutcomeOf(err); {
	case o == zone.NotReady:
		return AskedCluster, o // the clusters are not known yet
	case o != zone.Answered:
		return AskedInvalid, o
	case q.Qtype == dns.TypeSOA || q.Qtype == dns.TypeANY:
		m.Answer = []dns.RR{h.soaRecord(q.Name, h.atLeastStart(c.Serial))}
	}
	return AskedCluster, zone.Answered
}

// glue returns the address records of the name servers in the zone.
func (h *Handler) glue() []dns.RR {
	var rrs []dns.RR
	for _, name := range h.nsNames {
		addrs := h.nsAddrs[name]
		rrs = append(rrs, h.addresses(name, dns.TypeA, addrs)...)
		rrs = append(rrs, h.addresses(name, dns.TypeAAAA, addrs)...)
	}
	return rrs
}

func (h *Handler) addresses(name string, qtype uint16, addrs []netip.Addr) []dns.RR {
	var rrs []dns.RR
	for _, ip := range addrs {
		switch {
		case qtype == dns.TypeA && ip.Is4():
			rrs = append(rrs, aRecord(name, h.ttl, ip))
		case qtype == dns.TypeAAAA && ip.Is6():
			rrs = append(rrs, aaaaRecord(name, h.ttl, ip))
		}
	}
	return rrs
}

// answerHosts answers a role name from v, and returns the outcome and the
// view the answer was read from.
func (h *Handler) answerHosts(m *dns.Msg, q dns.Question, parsed *zone.Query, v zone.View, mayWait bool) (zone.Outcome, zone.View) {
	var buf [8]*zone.Host
	asked := v.Now
	// Selections after a refresh judge the primary's reach as of this
	// moment, when the lookup arrived (zone.Query.Asked).
	parsed.Asked = asked
	hosts, err := v.Select(parsed, buf[:0])
	if err == nil && mayWait && h.shouldWaitForReplay(parsed, hosts) && h.replayReachable(parsed, v, asked, true) {
		// Read-your-writes: the write is probably on a replica already,
		// just not in this snapshot. Re-probe the cluster (shared with
		// other waiting lookups) for up to lsn_wait, selecting again after
		// each round from the new snapshot at a new moment, in the same
		// turn: the first round may be one that was running before the
		// write, the second started after this lookup asked. No second
		// round when the first one's probe of the primary, started after
		// the lookup arrived, proves the LSN beyond it.
		cluster := parsed.Cluster
		if cluster == "" {
			cluster = v.Snap.Default
		}
		timer := time.NewTimer(h.lsnWait)
		for round, waiting := 0, true; waiting && round < 2; round++ {
			select {
			case <-h.refresh(cluster):
			case <-timer.C:
				waiting = false
			}
			v.Snap, v.Now = h.table.Load(), h.now()
			hosts, err = v.Select(parsed, buf[:0])
			waiting = waiting && err == nil && h.shouldWaitForReplay(parsed, hosts) && h.replayReachable(parsed, v, asked, false)
		}
		timer.Stop()
	}
	if err != nil {
		return zone.OutcomeOf(err), v
	}
	if h.onLoc != nil && parsed.Target != zone.TargetPrimary && len(hosts) > 0 {
		h.onLoc(zone.LocalityOf(parsed.From, hosts))
	}

	// The owner name is echoed as the client wrote it (0x20 case
	// randomisation relies on that).
	owner := q.Name
	if q.Qtype == dns.TypeANY {
		// RFC 8482: ANY gets one small synthesized record, not every
		// address: no amplification, and nothing to cache wrongly.
		m.Answer = []dns.RR{&dns.HINFO{Hdr: header(owner, dns.TypeHINFO, h.ttl), Cpu: "RFC8482"}}
		return zone.Answered, v
	}
	switch {
	case q.Qtype == dns.TypeTXT:
		h.evidence(m, owner, parsed, hosts, v)
		return zone.Answered, v
	case parsed.SRV && q.Qtype == dns.TypeSRV:
		h.services(m, owner, parsed, hosts)
		return zone.Answered, v
	case parsed.SRV:
		return zone.Answered, v // an SRV name has no address: NODATA
	}
	for _, host := range hosts {
		ip := host.IP
		switch {
		case q.Qtype == dns.TypeA && ip.Is4():
			m.Answer = append(m.Answer, aRecord(owner, h.ttl, ip))
		case q.Qtype == dns.TypeAAAA && ip.Is6() && !ip.Is4In6():
			m.Answer = append(m.Answer, aaaaRecord(owner, h.ttl, ip))
		}
	}
	return zone.Answered, v
}

// replayReachable reports whether a replica may yet replay q's LSN, for a
// lookup that arrived at asked: false when the LSN is beyond any position
// the primary can have reached (zone.View.LSNUnreachable), so that no
// refresh, which would cost every host of the cluster a probe, can help;
// and, not counted, when the token is on a forked timeline or its write
// was lost in a failover (zone.Snapshot.TokenUnprovable), which no refresh
// undoes. count says
// whether an LSN beyond reach is counted (once, where it is answered at
// once).
func (h *Handler) replayReachable(q *zone.Query, v zone.View, asked time.Time, count bool) bool {
	if v.Snap.TokenUnprovable(q) != "" {
		return false // a forked timeline or a lost write: no host proves the token, nor will one after a refresh
	}
	if !v.LSNUnreachable(q, asked) {
		return true
	}
	if count && h.onUnrch != nil {
		cluster := q.Cluster
		if cluster == "" {
			cluster = v.Snap.Default
		}
		h.onUnrch(cluster)
	}
	return false
}

// shouldWaitForReplay reports whether an answer to an lsn- query holds no
// replica, so that waiting briefly for fresh replay positions may find one.
func (h *Handler) shouldWaitForReplay(q *zone.Query, hosts []*zone.Host) bool {
	if !q.HasLSN || h.lsnWait <= 0 || h.refresh == nil || q.Target == zone.TargetPrimary {
		return false
	}
	for _, host := range hosts {
		if host.Role == zone.RoleReplica {
			return false
		}
	}
	return true
}
