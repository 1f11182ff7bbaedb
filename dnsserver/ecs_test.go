package dnsserver

import (
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/zone"
	"github.com/pgdns/pgdns/zone/zonetest"
)

// locatedSnapshot has a primary and a replica in east, two replicas in
// west and one unlabelled; clients in 10.1/16 are in east, in 10.2/16 in
// west, and 10.2.9/24 is carved out of west for east.
func locatedSnapshot() *zone.Snapshot {
	in := func(h zone.Host, loc string) zone.Host { h.Location = loc; return h }
	s := zonetest.Ready(t0, 2e9, zonetest.Cluster("main",
		in(host("127.0.0.11", false, 9), "east"),
		in(host("127.0.0.12", true, 9), "east"),
		in(host("127.0.0.13", true, 9), "west"),
		in(host("127.0.0.14", true, 9), "west"),
		host("127.0.0.15", true, 9)))
	s.Networks = zone.NewNetworks([]zone.Network{
		{Prefix: netip.MustParsePrefix("10.1.0.0/16"), Location: "east"},
		{Prefix: netip.MustParsePrefix("10.2.0.0/16"), Location: "west"},
		{Prefix: netip.MustParsePrefix("10.2.9.0/24"), Location: "east"},
	})
	return s
}

// addrsOf returns the addresses of the A records of m, in order.
func addrsOf(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		if a, ok := rr.(*dns.A); ok {
			out = append(out, a.A.String())
		}
	}
	return out
}

func TestAnswerPutsTheClientsLocationFirst(t *testing.T) {
	h := newTestHandler(locatedSnapshot())
	var counted []zone.Locality
	h.onLoc = func(l zone.Locality) { counted = append(counted, l) }
	all := []string{"127.0.0.12", "127.0.0.13", "127.0.0.14", "127.0.0.15"}
	for _, tc := range []struct {
		src   string
		local []string
		want  zone.Locality
	}{
		{"10.1.0.7", []string{"127.0.0.12"}, zone.Local},
		{"10.2.0.7", []string{"127.0.0.13", "127.0.0.14"}, zone.Local},
		{"10.2.9.7", []string{"127.0.0.12"}, zone.Local}, // the /24 is more specific than the /16
		{"10.3.0.7", nil, zone.Unlocated},
	} {
		for range 4 {
			req := new(dns.Msg)
			req.SetQuestion("replica.db.local.", dns.TypeA)
			m, _ := h.answerFrom(req, netip.MustParseAddr(tc.src))
			got := addrsOf(m)
			n := len(tc.local)
			if !sameSet(got, all) || !sameSet(got[:n], tc.local) {
				t.Fatalf("from %s: %v, want %v first, then the rest of %v", tc.src, got, tc.local, all)
			}
		}
		if last := counted[len(counted)-1]; last != tc.want {
			t.Fatalf("from %s counted %v, want %v", tc.src, last, tc.want)
		}
	}
	counted = nil
	for _, name := range []string{"primary.db.local.", "lsn-ffff-0.replica.db.local."} {
		req := new(dns.Msg)
		req.SetQuestion(name, dns.TypeA)
		h.answerFrom(req, netip.MustParseAddr("10.1.0.7"))
	}
	if len(counted) != 0 {
		t.Fatalf("primary and empty answers counted: %v", counted)
	}
}

func TestAnswerDCFilter(t *testing.T) {
	h := newTestHandler(locatedSnapshot())
	for name, want := range map[string][]string{
		"dc-west.replica.db.local.":                {"127.0.0.13", "127.0.0.14"},
		"dc-east.any.db.local.":                    {"127.0.0.11", "127.0.0.12"},
		"dc-east.primary.db.local.":                {"127.0.0.11"},
		"dc-west.primary.db.local.":                nil, // fail closed: the primary is not in west
		"dc-west.lsn-1-0.prefer-replica.db.local.": {"127.0.0.11"},
	} {
		req := new(dns.Msg)
		req.SetQuestion(name, dns.TypeA)
		m, _ := h.answerFrom(req, netip.MustParseAddr("10.1.0.7"))
		if got := addrsOf(m); m.Rcode != dns.RcodeSuccess || !sameSet(got, want) {
			t.Errorf("%s: %s %v, want %v", name, dns.RcodeToString[m.Rcode], got, want)
		}
	}
	req := new(dns.Msg)
	req.SetQuestion("dc-north.replica.db.local.", dns.TypeA)
	if m, _ := h.answerFrom(req, netip.Addr{}); m.Rcode != dns.RcodeNameError || len(m.Ns) != 1 {
		t.Fatalf("unknown location: %v", m)
	}
}

// ecsQuery asks replica.db.local with an ECS option for subnet.
func ecsQuery(subnet string) *dns.Msg {
	p := netip.MustParsePrefix(subnet)
	req := new(dns.Msg)
	req.SetQuestion("replica.db.local.", dns.TypeA)
	req.SetEdns0(1232, false)
	family := uint16(1)
	if p.Addr().Is6() {
		family = 2
	}
	opt := req.IsEdns0()
	opt.Option = append(opt.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: family,
		SourceNetmask: uint8(p.Bits()), Address: net.IP(p.Addr().AsSlice())})
	return req
}

func replySubnet(m *dns.Msg) *dns.EDNS0_SUBNET {
	if opt := m.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if e, ok := o.(*dns.EDNS0_SUBNET); ok {
				return e
			}
		}
	}
	return nil
}

func TestClientSubnet(t *testing.T) {
	h := newTestHandler(locatedSnapshot())
	h.subnetFrom = []netip.Prefix{netip.MustParsePrefix("10.2.0.53/32")}
	forwarder, other := netip.MustParseAddr("10.2.0.53"), netip.MustParseAddr("10.2.0.54")

	// From the trusted forwarder, the option locates the client: east.
	m, _ := h.answerFrom(ecsQuery("10.1.7.0/24"), forwarder)
	if got := addrsOf(m); got[0] != "127.0.0.12" {
		t.Fatalf("ECS 10.1.7.0/24 via the forwarder: %v", got)
	}
	if e := replySubnet(m); e == nil || e.SourceNetmask != 24 || e.SourceScope != 24 || !e.Address.Equal(net.ParseIP("10.1.7.0")) {
		t.Fatalf("reply ECS %v", e)
	}
	// Host bits past the netmask are not the client's: 10.2.9.0/16 is 10.2/16, west.
	m, _ = h.answerFrom(ecsQuery("10.2.9.0/16"), forwarder)
	if got := addrsOf(m); !slices.Contains([]string{"127.0.0.13", "127.0.0.14"}, got[0]) {
		t.Fatalf("ECS 10.2.9.0/16: %v", got)
	}
	// From any other source the option is ignored, and not echoed: the
	// source itself (west) decides.
	m, _ = h.answerFrom(ecsQuery("10.1.7.0/24"), other)
	if got := addrsOf(m); !slices.Contains([]string{"127.0.0.13", "127.0.0.14"}, got[0]) || replySubnet(m) != nil {
		t.Fatalf("ECS from an untrusted source: %v, %v", got, replySubnet(m))
	}
	// Source prefix 0: the client opted out; the forwarder's own location.
	m, _ = h.answerFrom(ecsQuery("0.0.0.0/0"), forwarder)
	if got := addrsOf(m); !slices.Contains([]string{"127.0.0.13", "127.0.0.14"}, got[0]) || replySubnet(m).SourceScope != 0 {
		t.Fatalf("ECS /0: %v", got)
	}
	// IPv6 subnets work the same; unknown ones leave the client unlocated.
	m, _ = h.answerFrom(ecsQuery("2001:db8::/56"), forwarder)
	if got := addrsOf(m); len(got) != 4 {
		t.Fatalf("ECS 2001:db8::/56: %v", got)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestLocalityOnBothPaths: the UDP fast path, the UDP slow path (an ECS
// query) and the dns.Msg path put the same location first and count it
// the same.
func TestLocalityOnBothPaths(t *testing.T) {
	h := newTestHandler(locatedSnapshot())
	h.subnetFrom = []netip.Prefix{netip.MustParsePrefix("10.2.0.53/32")}
	var counted []zone.Locality
	h.onLoc = func(l zone.Locality) { counted = append(counted, l) }
	s := &udpServer{h: h}
	wire := func(req *dns.Msg, src string) *dns.Msg {
		b, _ := req.Pack()
		reply, wait := s.answer(b, testLocal, netip.MustParseAddrPort(src), make([]byte, 0, readBufSize), &scratch{})
		if wait {
			t.Fatal("a replica query waits")
		}
		m := new(dns.Msg)
		if err := m.Unpack(reply); err != nil {
			t.Fatal(err)
		}
		return m
	}
	plain := new(dns.Msg)
	plain.SetQuestion("replica.db.local.", dns.TypeA)
	for _, m := range []*dns.Msg{
		wire(plain, "10.1.0.7:4000"),
		func() *dns.Msg { m, _ := h.answerFrom(plain, netip.MustParseAddr("10.1.0.7")); return m }(),
		wire(ecsQuery("10.1.7.0/24"), "10.2.0.53:4000"), // the slow path, located by the option
	} {
		if got := addrsOf(m); len(got) != 4 || got[0] != "127.0.0.12" {
			t.Fatalf("answer %v, want 127.0.0.12 (east) first", got)
		}
	}
	if !slices.Equal(counted, []zone.Locality{zone.Local, zone.Local, zone.Local}) {
		t.Fatalf("counted %v", counted)
	}
}

// TestClientSubnetCoarserThanNetworks: an ECS subnet wider than a network
// of dns.locations inside it is located by the network that holds all of
// it, not by whichever network holds its first address, and the reply's
// scope says the answer holds only for the narrower network's length (RFC
// 7871 7.2.1), so that a caching resolver does not hand it to the other
// location's clients of the subnet.
func TestClientSubnetCoarserThanNetworks(t *testing.T) {
	s := locatedSnapshot()
	s.Networks = zone.NewNetworks([]zone.Network{
		{Prefix: netip.MustParsePrefix("10.2.0.0/16"), Location: "west"},
		{Prefix: netip.MustParsePrefix("10.2.0.0/24"), Location: "east"}, // carved out at the /16's first address
		{Prefix: netip.MustParsePrefix("2001:db8:2::/48"), Location: "west"},
	})
	h := newTestHandler(s)
	h.subnetFrom = []netip.Prefix{netip.MustParsePrefix("10.9.0.53/32")}
	forwarder := netip.MustParseAddr("10.9.0.53")
	west := []string{"127.0.0.13", "127.0.0.14"}
	for _, tc := range []struct {
		subnet string
		first  []string // the hosts one of which comes first; nil: unlocated
		scope  uint8
	}{
		{"10.2.0.0/16", west, 24},                   // mostly west, and east in its first /24
		{"10.2.0.0/24", []string{"127.0.0.12"}, 24}, // east exactly
		{"10.2.0.0/26", []string{"127.0.0.12"}, 26}, // inside east
		{"10.2.7.0/24", west, 24},
		{"10.0.0.0/8", nil, 24}, // no network holds all of it; the scope still narrows
		{"2001:db8:2:5::/64", west, 64},
		{"::ffff:10.2.7.0/120", west, 120}, // an IPv6 option carrying an IPv4-mapped subnet
		{"::ffff:10.2.0.0/112", west, 120},
	} {
		for range 3 {
			m, _ := h.answerFrom(ecsQuery(tc.subnet), forwarder)
			got := addrsOf(m)
			if len(got) != 4 || (tc.first != nil && !slices.Contains(tc.first, got[0])) {
				t.Fatalf("ECS %s: %v, want one of %v first", tc.subnet, got, tc.first)
			}
			if e := replySubnet(m); e == nil || e.SourceScope != tc.scope {
				t.Fatalf("ECS %s: reply option %v, want scope %d", tc.subnet, e, tc.scope)
			}
		}
	}
}
