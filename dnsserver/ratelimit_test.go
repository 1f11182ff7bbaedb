package dnsserver

import (
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// fakeClock is a clock a test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) add(d time.Duration)     { c.t = c.t.Add(d) }
func newFakeClock() *fakeClock               { return &fakeClock{t: time.Unix(1_000_000, 0)} }
func withClock(r *RateLimiter, c *fakeClock) { r.base, r.now = c.now(), c.now }

// freshSource is the i-th of many sources, each in a /24 (and, for odd i,
// a /56) of its own: what a spoofed flood or an IPv6 /32 can send from.
func freshSource(i int) netip.Addr {
	if i%2 == 0 {
		return netip.AddrFrom4([4]byte{byte(i >> 17), byte(i >> 9), byte(i >> 1), 7})
	}
	var a [16]byte
	a[0], a[1], a[2], a[3], a[4], a[5], a[6] = 0x20, 0x01, 0x0d, 0xb8, byte(i>>17), byte(i>>9), byte(i>>1)
	a[15] = 1
	return netip.AddrFrom16(a)
}

// 200,000 fresh sources never take the limiter past its cap, cost no
// allocation, and do not make it forget a source that keeps sending: the
// flood's networks replace each other, not the busy one's. Before the fix
// the buckets map grew to 200,000 (its cap was 100,000: the eviction only
// dropped buckets idle for a second) and each new source allocated.
func TestRateLimiterChurnStaysBounded(t *testing.T) {
	clock := newFakeClock()
	r := NewRateLimiter(RateLimits{PerSecond: 5})
	withClock(r, clock)
	if r.Cap() < DefaultMaxNetworks || r.Cap() > 2*DefaultMaxNetworks {
		t.Fatalf("cap %d, asked for %d", r.Cap(), DefaultMaxNetworks)
	}
	busy := netip.MustParseAddr("192.0.2.1")
	for range 5 {
		if !r.Allow(busy) {
			t.Fatal("the busy source is refused within its burst")
		}
	}
	const sources = 200_000
	i := 0
	allocs := testing.AllocsPerRun(sources/100-1, func() {
		for range 100 {
			r.Allow(freshSource(i))
			i++
		}
		clock.add(time.Microsecond) // 2 ms in all: not a token back for the busy source
		if r.Allow(busy) {
			t.Fatalf("after %d fresh sources, the busy source (over its limit) is allowed again: it was forgotten", i)
		}
		if i%20_000 == 0 {
			if n := r.Len(); n > r.Cap() {
				t.Fatalf("after %d fresh sources the limiter holds %d networks, its cap is %d", i, n, r.Cap())
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per 100 fresh sources", allocs)
	}
	if n := r.Len(); n > r.Cap() || n < r.Cap()*3/4 {
		t.Fatalf("after %d fresh sources the limiter holds %d networks, cap %d", i, n, r.Cap())
	}
}

// A small table stays at its cap exactly, whatever comes.
func TestRateLimiterSmallCap(t *testing.T) {
	r := NewRateLimiter(RateLimits{PerSecond: 1, MaxNetworks: 100})
	if r.Cap() != 128 {
		t.Fatalf("cap %d for 100 networks, want 128 (16 sets of %d)", r.Cap(), limiterWays)
	}
	for i := range 10_000 {
		r.Allow(freshSource(i))
		if i%97 == 0 && r.Len() > r.Cap() {
			t.Fatalf("%d networks held, cap %d", r.Len(), r.Cap())
		}
	}
}

// Every address of a /24 (IPv4) or a /56 (IPv6) draws on one budget: a
// carpet across a /24 gets as many queries through as one address. Before
// the fix each address had its own bucket and all 256 got through.
func TestRateLimiterPerNetwork(t *testing.T) {
	for _, tc := range []struct {
		name          string
		member        func(i int) netip.Addr // 256 addresses of one network
		other         netip.Addr             // in a neighbouring network
		v4bits, v6bit int
		want          int
	}{
		{name: "ipv4 /24", member: func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 1, 2, byte(i)}) },
			other: netip.MustParseAddr("10.1.3.0"), want: 10},
		{name: "ipv4-mapped /24", member: func(i int) netip.Addr { return netip.AddrFrom16(netip.AddrFrom4([4]byte{10, 1, 2, byte(i)}).As16()) },
			other: netip.MustParseAddr("::ffff:10.1.1.255"), want: 10},
		{name: "ipv6 /56", member: func(i int) netip.Addr {
			return netip.MustParseAddr("2001:db8:1:ab00::1").Next().Next() // same /56 whatever i
		}, other: netip.MustParseAddr("2001:db8:1:ac00::1"), want: 10},
		{name: "ipv6 /56 carpet", member: func(i int) netip.Addr {
			a := netip.MustParseAddr("2001:db8:1:ab00::").As16()
			a[7], a[15] = byte(i), byte(i) // another /64 of the /56 each time
			return netip.AddrFrom16(a)
		}, other: netip.MustParseAddr("2001:db8:1:aa00::"), want: 10},
		{name: "ipv4 /32 when asked", member: func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 1, 2, byte(i)}) },
			other: netip.MustParseAddr("10.1.3.0"), v4bits: 32, want: 256},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			r := NewRateLimiter(RateLimits{PerSecond: 10, IPv4Bits: tc.v4bits})
			withClock(r, clock)
			allowed := 0
			for i := range 256 {
				if r.Allow(tc.member(i)) {
					allowed++
				}
			}
			if allowed != tc.want {
				t.Fatalf("%d of 256 queries from one network allowed, want %d", allowed, tc.want)
			}
			if !r.Allow(tc.other) {
				t.Fatal("the neighbouring network shares the budget")
			}
			clock.add(300 * time.Millisecond) // 3 tokens back
			allowed = 0
			for i := range 10 {
				if r.Allow(tc.member(i)) {
					allowed++
				}
			}
			if want := min(3, tc.want); tc.want < 256 && allowed != want {
				t.Fatalf("after 300 ms at 10/s, %d allowed, want %d", allowed, want)
			}
		})
	}
}

// The prefix lengths are kept in range.
func TestRateLimiterBits(t *testing.T) {
	r := NewRateLimiter(RateLimits{PerSecond: 1, IPv4Bits: 40, IPv6Bits: -3})
	if r.v4Bits != 32 || r.v6Bits != 1 {
		t.Fatalf("bits %d/%d", r.v4Bits, r.v6Bits)
	}
	if NewRateLimiter(RateLimits{}) != nil {
		t.Fatal("a limiter without a limit")
	}
	r = NewRateLimiter(RateLimits{PerSecond: 1, IPv6Bits: 64})
	if k := r.key(netip.MustParseAddr("ffff:ffff:ffff:ffff::")); k == r.key(netip.MustParseAddr("255.255.255.255")) || k == 0 {
		t.Fatalf("key %x", k)
	}
}

// BenchmarkRateLimiter drives the limiter with one known source and with
// 200,000 sources of their own networks, a new one each call (the
// limiter's table full, every call replacing a network), on one reader
// and on all of them: the cost per call stays that of a known source.
func BenchmarkRateLimiter(b *testing.B) {
	const sources = 200_000
	srcs := make([]netip.Addr, sources)
	for i := range srcs {
		srcs[i] = freshSource(i)
	}
	b.Run("known", func(b *testing.B) {
		r := NewRateLimiter(RateLimits{PerSecond: 1_000_000})
		src := srcs[0]
		b.ReportAllocs()
		for b.Loop() {
			r.Allow(src)
		}
	})
	b.Run("200k-sources", func(b *testing.B) {
		r := NewRateLimiter(RateLimits{PerSecond: 5})
		for _, s := range srcs {
			r.Allow(s)
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			r.Allow(srcs[i%sources])
			i++
		}
		b.ReportMetric(float64(r.Len()), "networks")
	})
	b.Run("200k-sources-parallel", func(b *testing.B) {
		r := NewRateLimiter(RateLimits{PerSecond: 5})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := int(time.Now().UnixNano() % sources)
			for pb.Next() {
				r.Allow(srcs[i%sources])
				i += 7
			}
		})
	})
}

// Over real UDP, the addresses of one /24 share a budget and another /24
// has its own: 60 queries from 20 addresses of 127.0.0.0/24 at a 20/s
// limit get 20 answers (the burst) and 40 turned away, the next from
// 127.0.1.5 is answered. The limiter's clock stands still, so that no
// token comes back however slowly the machine sends: on the wall clock,
// 60 round trips took over 0.5 s under load and more than 10 tokens came
// back (27 to 29 of 60 turned away, 3 of 360 runs on one loaded core).
func TestRateLimitPerNetworkOverUDP(t *testing.T) {
	rl := NewRateLimiter(RateLimits{PerSecond: 20})
	withClock(rl, newFakeClock()) // before Start: the readers only read it
	srv, err := Start("127.0.0.1:0", rl.Wrap(newTestHandler(testSnapshot())), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(t.Context())
	server, err := net.ResolveUDPAddr("udp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	ask := func(from string) *dns.Msg {
		t.Helper()
		c, err := net.DialUDP("udp", &net.UDPAddr{IP: net.ParseIP(from)}, server)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		m := new(dns.Msg)
		m.SetQuestion("primary.db.local.", dns.TypeA)
		wire, _ := m.Pack()
		if _, err := c.Write(wire); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 1232)
		n, err := c.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		reply := new(dns.Msg)
		if err := reply.Unpack(buf[:n]); err != nil {
			t.Fatal(err)
		}
		return reply
	}
	truncated := 0
	for i := range 60 {
		if m := ask(fmt.Sprintf("127.0.0.%d", 1+i%20)); m.Truncated && len(m.Answer) == 0 {
			truncated++
		}
	}
	if truncated != 40 {
		t.Fatalf("%d of 60 queries from one /24 over a 20/s limit (burst 20) were turned away, want 40", truncated)
	}
	if m := ask("127.0.1.5"); m.Truncated || len(m.Answer) != 1 {
		t.Fatalf("another /24 shares the budget: %v", m)
	}
	if n := rl.Len(); n != 2 {
		t.Fatalf("the limiter holds %d networks, want 2", n)
	}
}
