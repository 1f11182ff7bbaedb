package dnsserver

import (
	"errors"
	"log/slog"
	"net"
	"net/netip"
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

	// NameServerIPs, when set, are answered for "ns.<zone>", the name the
	// NS and SOA records point at (the listen address when it is specific).
	NameServerIPs []netip.Addr

	// LSNWait is how long an lsn- query that no replica satisfies may wait
	// for Refresh to re-probe the replicas; 0 answers at once.
	LSNWait time.Duration
	// Refresh re-probes the replicas of a cluster at once and returns a
	// channel closed when their results are published (probe.Prober.Refresh).
	Refresh func(cluster string) <-chan struct{}

	// OnAnswer, when set, is called once per answer with what was asked
	// (a role such as "replica", or "apex", "ns", "invalid", "outside",
	// "malformed") and the rcode sent, for metrics.
	OnAnswer func(kind string, rcode int)
}

// Handler answers DNS queries for one zone from a zone.Table.
type Handler struct {
	origin string // lower-case FQDN of the zone
	nsName string
	ttl    uint32
	serial uint32
	nsIPs  []netip.Addr
	table  *zone.Table
	log    *slog.Logger
	now    func() time.Time
	onAns  func(kind string, rcode int)

	lsnWait time.Duration
	refresh func(cluster string) <-chan struct{}
}

// NewHandler returns a Handler for cfg reading from table.
func NewHandler(cfg Config, table *zone.Table, log *slog.Logger) *Handler {
	origin := dns.CanonicalName(cfg.Zone)
	return &Handler{
		origin: origin,
		nsName: zone.NameServerLabel + "." + origin,
		ttl:    cfg.TTL,
		// The zone's content is not versioned; the start time changes the
		// serial on every restart, which is all secondaries could use.
		serial: uint32(time.Now().Unix()),
		nsIPs:  cfg.NameServerIPs,
		table:  table,
		log:    log,
		now:    time.Now,
		onAns:  cfg.OnAnswer,

		lsnWait: cfg.LSNWait,
		refresh: cfg.Refresh,
	}
}

// ServeDNS implements dns.Handler. It is a thin shell around answer: it
// recovers from panics (the client gets SERVFAIL, the process lives on)
// and fits UDP answers to the size the client can take.
func (h *Handler) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	defer func() {
		if v := recover(); v != nil {
			h.log.Error("panic while answering a query", "panic", v, "question", questionString(req))
			m := new(dns.Msg)
			m.SetRcode(req, dns.RcodeServerFailure)
			_ = w.WriteMsg(m)
		}
	}()
	m, kind := h.answer(req)
	if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
		m.Truncate(udpSize(req))
	}
	_ = w.WriteMsg(m)
	if h.onAns != nil {
		h.onAns(kind, m.Rcode)
	}
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

// answer builds the reply to req and says what kind of name was asked.
// Every outcome maps to one rcode here.
func (h *Handler) answer(req *dns.Msg) (*dns.Msg, string) {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Compress = true
	m.RecursionAvailable = false

	if opt := req.IsEdns0(); opt != nil {
		m.SetEdns0(maxUDPSize, false)
		if opt.Version() != 0 {
			m.Rcode = dns.RcodeBadVers // RFC 6891: only version 0 exists
			return m, "malformed"
		}
	}
	if req.Opcode != dns.OpcodeQuery {
		m.Rcode = dns.RcodeNotImplemented
		return m, "malformed"
	}
	if len(req.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		return m, "malformed"
	}
	q := req.Question[0]
	name := dns.CanonicalName(q.Name)
	parsed, err := zone.Parse(name, h.origin)
	if errors.Is(err, zone.ErrOutsideZone) || (q.Qclass != dns.ClassINET && q.Qclass != dns.ClassANY) {
		m.Rcode = dns.RcodeRefused // not ours, and pgdns never recurses
		return m, "outside"
	}
	m.Authoritative = true
	if err != nil {
		return h.nxdomain(m), "invalid"
	}

	switch parsed.Kind {
	case zone.KindApex:
		h.answerApex(m, q.Qtype)
		return h.nodataIfEmpty(m), "apex"
	case zone.KindNameServer:
		h.answerNameServer(m, q)
		return h.nodataIfEmpty(m), "ns"
	}
	return h.answerHosts(m, q, &parsed), parsed.Target.String()
}

func (h *Handler) nxdomain(m *dns.Msg) *dns.Msg {
	m.Rcode = dns.RcodeNameError
	m.Ns = []dns.RR{h.soaRecord()}
	return m
}

// nodataIfEmpty turns an empty answer into NOERROR/NODATA with the SOA in
// the authority section, so that resolvers cache it only for the TTL.
func (h *Handler) nodataIfEmpty(m *dns.Msg) *dns.Msg {
	if len(m.Answer) == 0 {
		m.Ns = []dns.RR{h.soaRecord()}
	}
	return m
}

func (h *Handler) answerApex(m *dns.Msg, qtype uint16) {
	switch qtype {
	case dns.TypeSOA:
		m.Answer = []dns.RR{h.soaRecord()}
	case dns.TypeNS:
		m.Answer = []dns.RR{h.nsRecord()}
		m.Extra = append(m.Extra, h.glue()...)
	case dns.TypeANY:
		m.Answer = []dns.RR{h.soaRecord()} // RFC 8482: one small answer
	}
}

func (h *Handler) answerNameServer(m *dns.Msg, q dns.Question) {
	m.Answer = h.addresses(q.Name, q.Qtype)
}

// glue returns the address records of ns.<zone>, when known.
func (h *Handler) glue() []dns.RR {
	return append(h.addresses(h.nsName, dns.TypeA), h.addresses(h.nsName, dns.TypeAAAA)...)
}

func (h *Handler) addresses(name string, qtype uint16) []dns.RR {
	var rrs []dns.RR
	for _, ip := range h.nsIPs {
		switch {
		case qtype == dns.TypeA && ip.Is4():
			rrs = append(rrs, aRecord(name, h.ttl, ip))
		case qtype == dns.TypeAAAA && ip.Is6():
			rrs = append(rrs, aaaaRecord(name, h.ttl, ip))
		}
	}
	return rrs
}

// answerHosts answers a role name from the current snapshot.
func (h *Handler) answerHosts(m *dns.Msg, q dns.Question, parsed *zone.Query) *dns.Msg {
	snap := h.table.Load()
	now := h.now()
	var buf [8]*zone.Host
	turn := h.table.Turn()
	hosts, err := snap.Select(parsed, now, turn, buf[:0])
	if err == nil && h.shouldWaitForReplay(parsed, hosts) {
		// Read-your-writes: the write is probably on a replica already,
		// just not in this snapshot. Re-probe the replicas (shared with
		// other waiting lookups) for up to lsn_wait, then select again.
		cluster := parsed.Cluster
		if cluster == "" {
			cluster = snap.Default
		}
		timer := time.NewTimer(h.lsnWait)
		select {
		case <-h.refresh(cluster):
		case <-timer.C:
		}
		timer.Stop()
		snap, now = h.table.Load(), h.now()
		hosts, err = snap.Select(parsed, now, turn, buf[:0])
	}
	switch {
	case errors.Is(err, zone.ErrNotReady):
		m.Authoritative = false
		m.Rcode = dns.RcodeServerFailure
		return m
	case errors.Is(err, zone.ErrUnknownCluster):
		return h.nxdomain(m)
	case err != nil:
		panic(err) // Select returns no other error; ServeDNS turns this into SERVFAIL
	}

	// The owner name is echoed as the client wrote it (0x20 case
	// randomisation relies on that).
	owner := q.Name
	if q.Qtype == dns.TypeANY {
		// RFC 8482: ANY gets one small synthesized record, not every
		// address: no amplification, and nothing to cache wrongly.
		m.Answer = []dns.RR{&dns.HINFO{Hdr: header(owner, dns.TypeHINFO, h.ttl), Cpu: "RFC8482"}}
		return m
	}
	for _, host := range hosts {
		ip := host.IP
		switch {
		case q.Qtype == dns.TypeTXT:
			m.Answer = append(m.Answer, txtRecord(owner, h.ttl, host, now))
		case q.Qtype == dns.TypeA && ip.Is4():
			m.Answer = append(m.Answer, aRecord(owner, h.ttl, ip))
		case q.Qtype == dns.TypeAAAA && ip.Is6() && !ip.Is4In6():
			m.Answer = append(m.Answer, aaaaRecord(owner, h.ttl, ip))
		}
	}
	return h.nodataIfEmpty(m)
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
