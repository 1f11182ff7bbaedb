package dnsserver

import (
	"net/netip"
	"testing"

	"github.com/miekg/dns"
)

// ednsReply checks a reply's rcode, that it carries no record, and
// whether it has an OPT (of version 0 when it has).
func ednsReply(t *testing.T, what string, m *dns.Msg, rcode int, withOPT bool) {
	t.Helper()
	if m == nil {
		t.Fatalf("%s: no reply", what)
	}
	if m.Rcode != rcode || len(m.Answer) != 0 || len(m.Ns) != 0 || m.Authoritative {
		t.Fatalf("%s: rcode %s, %d answers, %d authority, AA %v; want %s and nothing else:\n%v",
			what, dns.RcodeToString[m.Rcode], len(m.Answer), len(m.Ns), m.Authoritative, dns.RcodeToString[rcode], m)
	}
	opt := m.IsEdns0()
	if (opt != nil) != withOPT || countOPT(m.Extra) > 1 || len(m.Extra) > countOPT(m.Extra) {
		t.Fatalf("%s: additional section %v, want an OPT %v", what, m.Extra, withOPT)
	}
	if opt != nil && opt.Version() != 0 {
		t.Fatalf("%s: the reply's OPT has version %d", what, opt.Version())
	}
}

// A query with two OPT records is FORMERR, with no OPT in the reply (RFC
// 6891 6.1.1); before the fix it was answered from one of them.
func TestTwoOPTsAreFormErr(t *testing.T) {
	forEachPath(t, func(t *testing.T, answer answerFunc) {
		h := newTestHandler(testSnapshot())
		req := new(dns.Msg)
		req.SetQuestion("primary.db.local.", dns.TypeA)
		req.SetEdns0(1232, false)
		req.Extra = append(req.Extra, req.Extra[0])
		m, asked := answer(h, req)
		ednsReply(t, "two OPTs", m, dns.RcodeFormatError, false)
		if asked != AskedMalformed {
			t.Fatalf("counted as %v", asked)
		}
	})
}

// A Client Subnet option whose SCOPE PREFIX-LENGTH is not 0 is FORMERR
// (RFC 7871 6: it must be 0 in queries), from a forwarder pgdns believes
// or any other source; before the fix it was answered NOERROR.
func TestClientSubnetScopeInAQueryIsFormErr(t *testing.T) {
	forEachPath(t, func(t *testing.T, answer answerFunc) {
		for _, trusted := range []bool{false, true} {
			h := newTestHandler(testSnapshot())
			if trusted {
				h.subnetFrom = []netip.Prefix{netip.PrefixFrom(testSrc.Addr(), 32)}
			}
			for _, subnet := range []string{"10.1.7.0/24", "2001:db8::/56"} {
				req := ecsQuery(subnet)
				req.IsEdns0().Option[0].(*dns.EDNS0_SUBNET).SourceScope = 16
				m, _ := answer(h, req)
				ednsReply(t, subnet+" with scope 16", m, dns.RcodeFormatError, true)
				req.IsEdns0().Option[0].(*dns.EDNS0_SUBNET).SourceScope = 0
				if m, _ := answer(h, req); m.Rcode != dns.RcodeSuccess || len(m.Answer) == 0 {
					t.Fatalf("%s with scope 0 (trusted %v): %v", subnet, trusted, m)
				}
			}
		}
	})
}

// EDNS version 1 is BADVERS (extended rcode 16) with an OPT of version 0
// and nothing else (RFC 6891 6.1.3; CoreDNS and Knot answer the same),
// over UDP and TCP from a real server. This was already so: dig retries
// a BADVERS with version 0 and prints that retry's NOERROR ("BADVERS,
// retrying with EDNS version 0"), which is what issue 22 case 9 saw.
func TestEDNSVersionIsBadVers(t *testing.T) {
	forEachPath(t, func(t *testing.T, answer answerFunc) {
		req := new(dns.Msg)
		req.SetQuestion("primary.db.local.", dns.TypeA)
		req.SetEdns0(1232, true)
		req.IsEdns0().SetVersion(1)
		m, _ := answer(newTestHandler(testSnapshot()), req)
		ednsReply(t, "EDNS version 1", m, dns.RcodeBadVers, true)
		if !m.IsEdns0().Do() {
			t.Fatal("DO not echoed with BADVERS")
		}
	})
	addr := startServer(t, newTestHandler(testSnapshot()))
	for _, network := range []string{"udp", "tcp"} {
		for _, version := range []uint8{1, 255} {
			req := new(dns.Msg)
			req.SetQuestion("replica.db.local.", dns.TypeA)
			req.SetEdns0(1232, false)
			req.IsEdns0().SetVersion(version)
			ednsReply(t, network, exchange(t, network, addr, req), dns.RcodeBadVers, true)
		}
	}
}
