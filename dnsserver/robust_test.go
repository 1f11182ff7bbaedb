package dnsserver

import (
	"encoding/binary"
	"math/rand/v2"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/testkit"
)

// validQuery checks that the server still answers a normal query.
func validQuery(t *testing.T, network, addr string) {
	t.Helper()
	req := new(dns.Msg)
	req.SetQuestion("primary.db.local.", dns.TypeA)
	m := exchange(t, network, addr, req)
	if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 {
		t.Fatalf("%s: answer after garbage: %v", network, m)
	}
}

// settledGoroutines waits for goroutines to wind down and returns their
// number.
func settledGoroutines(want int) int {
	var n int
	testkit.Poll(5*time.Second, 50*time.Millisecond, func() bool {
		n = runtime.NumGoroutine()
		return n <= want
	})
	return n
}

// TestGarbageOnTheWire sends 50,000 random and mutated datagrams and
// broken TCP frames; the server keeps answering and leaks no goroutine.
func TestGarbageOnTheWire(t *testing.T) {
	addr := startServer(t, newTestHandler(testSnapshot()))
	validQuery(t, "udp", addr)
	validQuery(t, "tcp", addr)
	before := runtime.NumGoroutine()

	rng := rand.New(rand.NewPCG(1, 2))
	seeds := [][]byte{}
	for _, tc := range cases {
		req := new(dns.Msg)
		req.SetQuestion(tc.Qname, tc.Qtype)
		req.SetEdns0(1232, true)
		b, _ := req.Pack()
		seeds = append(seeds, b)
	}
	conn, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const datagrams = 50_000
	for i := range datagrams {
		var b []byte
		if i%2 == 0 { // random bytes of random length
			b = make([]byte, rng.IntN(600))
			for j := range b {
				b[j] = byte(rng.UintN(256))
			}
		} else { // a valid query with a few bytes flipped, or cut short
			seed := seeds[rng.IntN(len(seeds))]
			b = append([]byte(nil), seed[:1+rng.IntN(len(seed))]...)
			for range 1 + rng.IntN(4) {
				b[rng.IntN(len(b))] = byte(rng.UintN(256))
			}
		}
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
		if i%2000 == 0 {
			time.Sleep(time.Millisecond) // let the socket buffer drain
		}
	}

	// TCP: a length prefix with less data than announced, an oversized
	// announcement, garbage, and a frame cut after one byte.
	frames := [][]byte{
		{0x00, 0x40, 1, 2, 3},
		{0xff, 0xff},
		append([]byte{0x00, 0x10}, make([]byte, 16)...),
		{0x00},
	}
	big := make([]byte, 2+65535)
	binary.BigEndian.PutUint16(big, 65535)
	frames = append(frames, big)
	for _, f := range frames {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write(f)
		c.Close()
	}

	// UDP may lose a datagram while the socket's buffer is still full of
	// garbage, as it may on any network: a resolver asks again, and so
	// does this check, each time with a fresh query.
	testkit.Eventually(t, 15*time.Second, 0, "a UDP answer after the garbage (reply, error)", func() (string, bool) {
		req := new(dns.Msg)
		req.SetQuestion("primary.db.local.", dns.TypeA)
		m, _, err := (&dns.Client{Net: "udp", Timeout: time.Second}).Exchange(req, addr)
		if err != nil {
			return err.Error(), false
		}
		return m.String(), m.Rcode == dns.RcodeSuccess && len(m.Answer) == 1
	})
	validQuery(t, "tcp", addr)
	if after := settledGoroutines(before); after > before+2 {
		t.Fatalf("goroutines: %d before the garbage, %d after", before, after)
	}
}

// TestIdleTCPConnections holds hundreds of idle TCP connections open: UDP
// and new TCP queries are still answered (each new connection past the
// caps evicts the connection idle longest), and the server closes every
// idle one, evicted or after its read timeout.
func TestIdleTCPConnections(t *testing.T) {
	h := newTestHandler(testSnapshot())
	srv, err := Start("127.0.0.1:0", h, Limits{MaxTCPConns: 256, TCPIdle: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(t.Context())
	addr := srv.Addr()

	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for range 300 { // more than the cap
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	validQuery(t, "udp", addr)
	// Past the caps a new connection evicts an idle one: TCP serves.
	testkit.Eventually(t, 10*time.Second, 100*time.Millisecond, "TCP to serve again while idle connections are held (error)", func() (error, bool) {
		req := new(dns.Msg)
		req.SetQuestion("primary.db.local.", dns.TypeA)
		m, _, err := (&dns.Client{Net: "tcp", Timeout: time.Second}).Exchange(req, addr)
		return err, err == nil && m.Rcode == dns.RcodeSuccess
	})
	closed := 0
	for _, c := range idle {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err != nil {
			closed++
		}
	}
	if closed != len(idle) {
		t.Fatalf("%d of %d idle connections were closed by the server", closed, len(idle))
	}
}

// TestRateLimit: RateLimit's limiter turns away UDP queries past the
// budget of a 20/s limit (burst 20: 20 answered, 40 of 60 truncated) and
// leaves TCP alone. The limiter's clock stands still, so that no token
// comes back however slowly the machine sends: on the wall clock the 60
// round trips took over 0.5 s under load, more than 10 tokens came back
// and only 27 to 29 of 60 were turned away (as in
// TestRateLimitPerNetworkOverUDP, 920dbef).
func TestRateLimit(t *testing.T) {
	h := RateLimit(newTestHandler(testSnapshot()), 20)
	withClock(h.(*limitedHandler).limiter, newFakeClock()) // before Start: the readers only read it
	srv, err := Start("127.0.0.1:0", h, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(t.Context())
	truncated := 0
	for range 60 {
		req := new(dns.Msg)
		req.SetQuestion("primary.db.local.", dns.TypeA)
		m := exchange(t, "udp", srv.Addr(), req)
		if m.Truncated && len(m.Answer) == 0 {
			truncated++
		}
	}
	if truncated != 40 {
		t.Fatalf("%d of 60 queries over a 20/s limit (burst 20) were turned away, want 40", truncated)
	}
	// TCP is not limited: the handshake proves the source. The UDP
	// budget is spent and no token comes back.
	for range 3 {
		req := new(dns.Msg)
		req.SetQuestion("primary.db.local.", dns.TypeA)
		if m := exchange(t, "tcp", srv.Addr(), req); m.Truncated || len(m.Answer) != 1 {
			t.Fatalf("TCP after the limit: %v", m)
		}
	}
}
