package dnsserver

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/zone"
)

func startServer(t *testing.T, h *Handler) string {
	t.Helper()
	srv, err := Start("127.0.0.1:0", h, Limits{MaxTCPConns: 64, TCPIdle: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(t.Context()) })
	return srv.Addr()
}

func exchange(t *testing.T, network, addr string, req *dns.Msg) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: network, Timeout: 2 * time.Second}
	m, _, err := c.Exchange(req, addr)
	if err != nil {
		t.Fatalf("%s exchange: %v", network, err)
	}
	return m
}

func TestServerUDPAndTCP(t *testing.T) {
	addr := startServer(t, newTestHandler(testSnapshot()))
	for _, network := range []string{"udp", "tcp"} {
		for _, tc := range cases {
			t.Run(network+"/"+tc.Qname+"/"+dns.TypeToString[tc.Qtype], func(t *testing.T) {
				req := new(dns.Msg)
				req.SetQuestion(tc.Qname, tc.Qtype)
				checkReply(t, tc, exchange(t, network, addr, req))
			})
		}
	}
}

// An answer too large for UDP comes back truncated with TC set, and whole
// over TCP.
func TestServerTruncatesUDP(t *testing.T) {
	addr := startServer(t, newTestHandler(tooManyForUDP()))

	req := new(dns.Msg)
	req.SetQuestion("replica.db.local.", dns.TypeA)
	m := exchange(t, "udp", addr, req)
	if !m.Truncated || len(m.Answer) >= 199 {
		t.Fatalf("UDP: TC %v with %d answers", m.Truncated, len(m.Answer))
	}
	req.SetEdns0(4096, false)
	m = exchange(t, "udp", addr, req)
	m.Compress = true // as it was sent
	if !m.Truncated || m.Len() > maxUDPSize {
		t.Fatalf("UDP with EDNS: TC %v, %d bytes", m.Truncated, m.Len())
	}
	m = exchange(t, "tcp", addr, req)
	if m.Truncated || len(m.Answer) != 199 {
		t.Fatalf("TCP: TC %v with %d answers", m.Truncated, len(m.Answer))
	}
}

// A panic while answering becomes SERVFAIL and the server keeps serving.
func TestServerRecoversFromPanic(t *testing.T) {
	broken := &zone.Snapshot{Ready: true, Clusters: []*zone.Cluster{nil}, Default: "main"}
	h := newTestHandler(broken)
	addr := startServer(t, h)
	req := new(dns.Msg)
	req.SetQuestion("primary.db.local.", dns.TypeA)
	if m := exchange(t, "udp", addr, req); m.Rcode != dns.RcodeServerFailure {
		t.Fatalf("rcode %s, want SERVFAIL", dns.RcodeToString[m.Rcode])
	}
	h.table.Store(testSnapshot())
	if m := exchange(t, "tcp", addr, req); m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 {
		t.Fatalf("after the panic: %v", m)
	}
}

func TestStartReportsAddressInUse(t *testing.T) {
	addr := startServer(t, newTestHandler(testSnapshot()))
	if _, err := Start(addr, newTestHandler(testSnapshot()), Limits{}); err == nil {
		t.Fatal("a second server on the same address started")
	}
}

// FuzzHandler feeds raw wire bytes to the whole handler on both paths:
// whatever unpacks must get an answer that packs, nothing may panic, any
// datagram the UDP server answers must unpack, and where the fast path
// answers, its reply must say what miekg/dns's path says.
func FuzzHandler(f *testing.F) {
	for _, tc := range cases {
		for _, edns := range []bool{false, true} {
			b, err := caseQuery(tc, edns).Pack()
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	for _, subnet := range []string{"10.1.7.0/24", "2001:db8::/56", "0.0.0.0/0"} {
		b, err := ecsQuery(subnet).Pack() // an EDNS Client Subnet option, believed from testSrc
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	h := newTestHandler(testSnapshot())
	h.nsAddrs["ns.db.local."] = []netip.Addr{netip.MustParseAddr("::1")}
	h.subnetFrom = []netip.Prefix{netip.PrefixFrom(testSrc.Addr(), 32)}
	s := &udpServer{h: h}
	f.Fuzz(func(t *testing.T, wire []byte) {
		if reply, _ := answerDatagram(s, wire); reply != nil {
			if err := new(dns.Msg).Unpack(reply); err != nil {
				t.Fatalf("the UDP reply does not unpack: %v", err)
			}
		}
		if fast, res := h.answerFast(wire, nil, testSrc.Addr(), &scratch{}); res == fastDone {
			compareFastWithSlow(t, h, wire, fast)
		}
		req := new(dns.Msg)
		if err := req.Unpack(wire); err != nil {
			return
		}
		m, _ := h.answer(req)
		m.Truncate(udpSize(req))
		if _, err := m.Pack(); err != nil {
			t.Fatalf("answer does not pack: %v\n%v", err, m)
		}
		if len(req.Question) == 1 && m.Id != req.Id {
			t.Fatal("answer id differs")
		}
	})
}

// compareFastWithSlow checks the fast path's reply to wire against the
// reply miekg/dns's path makes: the same header, question (as sent) and
// records (answers as a set: replicas rotate), byte for byte in meaning.
func compareFastWithSlow(t *testing.T, h *Handler, wire, fast []byte) {
	t.Helper()
	slow := answerSlow(wire, testLocal, testSrc, nil, h)
	var f, s dns.Msg
	if err := f.Unpack(fast); err != nil {
		t.Fatalf("the fast reply does not unpack: %v", err)
	}
	if err := s.Unpack(slow); err != nil {
		t.Fatalf("the slow reply does not unpack: %v", err)
	}
	if f.MsgHdr != s.MsgHdr {
		t.Fatalf("headers differ:\nfast %+v\nslow %+v", f.MsgHdr, s.MsgHdr)
	}
	if !slices.Equal(f.Question, s.Question) {
		t.Fatalf("questions differ: fast %v, slow %v", f.Question, s.Question)
	}
	sorted := func(rrs []dns.RR) []string {
		var out []string
		for _, rr := range rrs {
			out = append(out, rr.String())
		}
		slices.Sort(out)
		return out
	}
	for _, sec := range []struct {
		name       string
		fast, slow []dns.RR
	}{{"answer", f.Answer, s.Answer}, {"authority", f.Ns, s.Ns}, {"additional", f.Extra, s.Extra}} {
		if !slices.Equal(sorted(sec.fast), sorted(sec.slow)) {
			t.Fatalf("%s sections differ:\nfast %v\nslow %v", sec.name, sec.fast, sec.slow)
		}
	}
}
