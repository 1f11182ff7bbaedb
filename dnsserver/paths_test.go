package dnsserver

import (
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/zone"
)

// answerFunc answers req with h and says what the query counted as asked.
type answerFunc func(h *Handler, req *dns.Msg) (*dns.Msg, Asked)

// paths are the two ways a query is answered, and every handler test runs
// on both: "msg" is answer, a dns.Msg in and out (TCP, through miekg/dns's
// server); "wire" is what the UDP server does with one datagram (the rate
// limit, the fast path, and miekg/dns for the rest).
var paths = []struct {
	name   string
	answer answerFunc
}{
	{"msg", func(h *Handler, req *dns.Msg) (*dns.Msg, Asked) { return h.answer(req) }},
	{"wire", answerWire},
}

func forEachPath(t *testing.T, f func(t *testing.T, answer answerFunc)) {
	t.Helper()
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) { f(t, p.answer) })
	}
}

var (
	testLocal = &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53}
	testSrc   = netip.MustParseAddrPort("127.0.0.2:40000")
)

// answerWire packs req, answers the datagram as the UDP server does
// (udpServer.answer, and answerSlow off the reader for an lsn- query that
// may wait) and unpacks the reply; nil when nothing is sent.
func answerWire(h *Handler, req *dns.Msg) (*dns.Msg, Asked) {
	wire, err := req.Pack()
	if err != nil {
		panic(err)
	}
	reply, asked := answerDatagram(&udpServer{h: h}, wire)
	if reply == nil {
		return nil, asked
	}
	m := new(dns.Msg)
	if err := m.Unpack(reply); err != nil {
		panic(err)
	}
	return m, asked
}

// answerDatagram is what a reader of s does with one datagram, and what
// the answer counted as asked (AskedMalformed when nothing was counted:
// miekg/dns's server answers those before the handler).
func answerDatagram(s *udpServer, wire []byte) ([]byte, Asked) {
	asked := AskedMalformed
	orig := s.h.onAns
	s.h.onAns = func(a Asked, rcode int) {
		asked = a
		if orig != nil {
			orig(a, rcode)
		}
	}
	defer func() { s.h.onAns = orig }()
	reply, wait := s.answer(wire, testLocal, testSrc, make([]byte, 0, readBufSize), &scratch{})
	if wait {
		reply = answerSlow(wire, testLocal, testSrc, nil, s.h)
	}
	return reply, asked
}

// The fast path really takes the common queries (else the "wire" runs of
// the handler tests would prove nothing about it), with and without EDNS,
// and leaves the rest to miekg/dns.
func TestFastPathTakesCommonQueries(t *testing.T) {
	h := newTestHandler(testSnapshot())
	for _, tc := range cases {
		for _, edns := range []bool{false, true} {
			wire, _ := caseQuery(tc, edns).Pack()
			_, res := h.answerFast(wire, nil, testSrc.Addr(), &scratch{})
			common := (tc.Qtype == dns.TypeA || tc.Qtype == dns.TypeAAAA) && tc.Rcode == dns.RcodeSuccess &&
				!slices.Contains([]string{"db.local.", "ns.db.local.", "main.db.local.", "orders.db.local."}, tc.Qname) &&
				!strings.HasPrefix(tc.Qname, "_postgresql._tcp.") && // an SRV name's address is NODATA, from the slow path
				!strings.HasPrefix(tc.Qname, "_tcp.") && !strings.HasPrefix(tc.Qname, "host.") // so is an empty non-terminal's
			if want := map[bool]fastResult{true: fastDone, false: fastNo}[common]; res != want {
				t.Errorf("%s %s (EDNS %v): fast path result %d, want %d", tc.Qname, dns.TypeToString[tc.Qtype], edns, res, want)
			}
		}
	}
	// An OPT with an option (a cookie, a client subnet) is left to miekg/dns.
	req := new(dns.Msg)
	req.SetQuestion("primary.db.local.", dns.TypeA)
	req.SetEdns0(1232, false)
	req.IsEdns0().Option = append(req.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"})
	wire, _ := req.Pack()
	if _, res := h.answerFast(wire, nil, testSrc.Addr(), &scratch{}); res != fastNo {
		t.Errorf("a query with a cookie: fast path result %d", res)
	}
}

// The fast path allocates nothing: not for an answer, a NODATA, an EDNS
// query, nor through the rate limiter.
func TestFastPathAllocatesNothing(t *testing.T) {
	h := newTestHandler(testSnapshot())
	counted := 0
	h.onAns = func(Asked, int) { counted++ }
	limited := &udpServer{h: h, limiter: NewRateLimiter(RateLimits{PerSecond: 1_000_000_000})}
	sc := &scratch{}
	out := make([]byte, 0, readBufSize)
	for _, name := range []string{"primary.db.local.", "REPLICA.db.local.", "lag-50ms.replica.db.local.", "bytes-1mb.replica.db.local.",
		"lsn-0-3000060.replica.db.local.", "lag-10ms.any.db.local.", "replica.orders.db.local."} {
		for _, edns := range []bool{false, true} {
			req := new(dns.Msg)
			req.SetQuestion(name, dns.TypeA)
			if edns {
				req.SetEdns0(4096, true)
			}
			wire, _ := req.Pack()
			_, _ = limited.answer(wire, testLocal, testSrc, out, sc) // first sight of the source: its bucket
			if n := testing.AllocsPerRun(200, func() {
				if _, res := h.answerFast(wire, out[:0], testSrc.Addr(), sc); res != fastDone {
					t.Fatalf("%s: not on the fast path", name)
				}
			}); n != 0 {
				t.Errorf("%s (EDNS %v): %.1f allocations per query on the fast path", name, edns, n)
			}
			if n := testing.AllocsPerRun(200, func() {
				_, _ = limited.answer(wire, testLocal, testSrc, out[:0], sc)
			}); n != 0 {
				t.Errorf("%s (EDNS %v): %.1f allocations per datagram with the rate limit", name, edns, n)
			}
		}
	}
	if counted == 0 {
		t.Fatal("nothing counted")
	}
}

// BenchmarkFastPath is BenchmarkHandler's queries on the UDP server's
// path, datagram in, datagram out.
func BenchmarkFastPath(b *testing.B) {
	h := newTestHandler(testSnapshot())
	s := &udpServer{h: h}
	for _, name := range []string{"primary.db.local.", "replica.db.local.", "lag-50ms.replica.db.local.", "nope.db.local."} {
		req := new(dns.Msg)
		req.SetQuestion(name, dns.TypeA)
		wire, _ := req.Pack()
		out := make([]byte, 0, readBufSize)
		sc := &scratch{}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = s.answer(wire, testLocal, testSrc, out[:0], sc)
			}
		})
	}
}

// Replica answers on the fast path put the replicas in the client's
// location (by its source address and dns.locations) first, without
// allocating.
func TestFastPathLocalFirst(t *testing.T) {
	snap := testSnapshot()
	snap.Networks = zone.NewNetworks([]zone.Network{{Prefix: netip.MustParsePrefix("127.0.0.0/24"), Location: "east"}})
	snap.Clusters[0].Hosts[1].Location = "west" // 127.0.0.12
	snap.Clusters[0].Hosts[2].Location = "east" // 127.0.0.13
	h := newTestHandler(snap)
	req := new(dns.Msg)
	req.SetQuestion("replica.db.local.", dns.TypeA)
	wire, _ := req.Pack()
	sc := &scratch{}
	out := make([]byte, 0, readBufSize)
	for range 4 {
		reply, res := h.answerFast(wire, out[:0], testSrc.Addr(), sc)
		m := new(dns.Msg)
		if res != fastDone || m.Unpack(reply) != nil || len(m.Answer) != 2 {
			t.Fatalf("result %d, reply %v", res, m)
		}
		if first := m.Answer[0].(*dns.A).A.String(); first != "127.0.0.13" {
			t.Fatalf("first answer %s, want the replica in the client's location", first)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = h.answerFast(wire, out[:0], testSrc.Addr(), sc) }); n != 0 {
		t.Errorf("%.1f allocations per query with locations", n)
	}
}
