package dnsserver

import (
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// startLSNServer serves h on a loopback address of the test's own with
// at most maxWaits lsn- lookups waiting, counting those answered at once
// because every slot was taken.
func startLSNServer(t *testing.T, h *Handler, maxWaits int, full *atomic.Int64) string {
	t.Helper()
	srv, err := Start(pgtest.Addrs(t).Addr(1, 0), h, Limits{MaxLSNWaits: maxWaits, OnLSNWaitFull: func() { full.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(t.Context()) })
	return srv.Addr()
}

// waitingHandler is a handler whose lsn- lookups no replica satisfies
// wait wait, or until release: the re-probe they ask for ends only then.
func waitingHandler(t *testing.T, wait time.Duration) (h *Handler, release func()) {
	h = newTestHandler(testSnapshot())
	refreshed := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(refreshed) }) }
	t.Cleanup(release)
	h.lsnWait = wait
	h.refresh = func(string) <-chan struct{} { return refreshed }
	return h, release
}

// udpClient is one UDP socket to addr sending queries with ids of their
// own and reading replies.
type udpClient struct {
	t    *testing.T
	conn net.Conn
}

func newUDPClient(t *testing.T, addr string) *udpClient {
	conn, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &udpClient{t: t, conn: conn}
}

func (c *udpClient) send(id uint16, name string, qtype uint16) {
	req := new(dns.Msg)
	req.SetQuestion(name, qtype)
	req.Id = id
	b, _ := req.Pack()
	if _, err := c.conn.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

// read returns the next reply, or nil when none comes before deadline.
func (c *udpClient) read(deadline time.Time) *dns.Msg {
	_ = c.conn.SetReadDeadline(deadline)
	b := make([]byte, 1500)
	n, err := c.conn.Read(b)
	if err != nil {
		return nil
	}
	m := new(dns.Msg)
	if err := m.Unpack(b[:n]); err != nil {
		c.t.Fatalf("reply does not unpack: %v", err)
	}
	return m
}

// Issue 29.5: a flood of lsn- lookups that may wait (no replica has the
// LSN, the re-probe never ends) holds at most MaxLSNWaits goroutines;
// every other lookup of the flood is answered at once, as lsn_wait 0
// answers it (NOERROR, no address, the SOA), and counted. The flood takes
// both UDP paths: A on the fast path, TXT on the slow one. The waiting
// lookups end when their re-probe does (release), not by lsn_wait (a
// minute): with a 3 s lsn_wait the whole flood had to be answered within
// 2.5 s, or the first waits ended, freed their slots and took in more
// lookups than counted (up to 0.9 s of it at load 28; TestUDPShutdownWaits-
// ForWaitingQuery waits out an lsn_wait).
func TestLSNWaitsAreBounded(t *testing.T) {
	const (
		maxWaits = 16
		flood    = 400
		wait     = time.Minute
	)
	var full atomic.Int64
	h, release := waitingHandler(t, wait)
	addr := startLSNServer(t, h, maxWaits, &full)
	c := newUDPClient(t, addr)
	before := runtime.NumGoroutine()

	// Sent 40 at a time, the next ones once the last are answered, so
	// that no datagram is lost to a full socket buffer. Everything but
	// the waiting lookups comes back while they wait (the machine may be
	// loaded: a generous bound, not a timing figure).
	start := time.Now()
	atOnce := 0
	for sent := 0; sent < flood; {
		for range 40 {
			qtype := dns.TypeA
			if sent%4 == 3 {
				qtype = dns.TypeTXT
			}
			c.send(uint16(sent), "lsn-0-3000061.replica.db.local.", qtype)
			sent++
		}
		for atOnce < sent-min(sent, maxWaits) {
			m := c.read(start.Add(wait / 2))
			if m == nil {
				t.Fatalf("%d of %d lookups answered before the wait ends, want all but the %d waiting", atOnce, sent, maxWaits)
			}
			if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 || len(m.Ns) != 1 {
				t.Fatalf("a lookup answered at once: %v, want NOERROR, no address, the SOA (as lsn_wait 0)", m)
			}
			atOnce++
		}
	}
	goroutines := runtime.NumGoroutine() - before
	if goroutines > maxWaits+4 {
		t.Errorf("%d more goroutines while the flood waits, want at most %d (MaxLSNWaits) and a few", goroutines, maxWaits)
	}
	if n := full.Load(); n != flood-maxWaits {
		t.Errorf("OnLSNWaitFull counted %d, want %d", n, flood-maxWaits)
	}
	if m := c.read(time.Now().Add(200 * time.Millisecond)); m != nil {
		t.Fatalf("a reply before the waits ended, beyond the %d answered at once: %v", atOnce, m)
	}
	release()
	waited := 0
	for waited < maxWaits {
		m := c.read(time.Now().Add(30 * time.Second))
		if m == nil {
			break
		}
		waited++
	}
	if waited != maxWaits {
		t.Errorf("%d waiting lookups answered when their re-probe ended, want %d", waited, maxWaits)
	}
}

// Issue 29.5: whether a lookup may wait is decided from its parsed name,
// not from the bytes "lsn-" in the datagram: a name outside the zone
// (REFUSED), outside the grammar (NXDOMAIN), for the primary, of a type
// or class never answered from hosts, or one the snapshot already
// satisfies, never takes a waiting slot. The one slot is held by a lookup
// that waits, so that any other lookup sent off the reader would be
// counted full.
func TestLSNBytesAloneNeverWait(t *testing.T) {
	var full atomic.Int64
	h, _ := waitingHandler(t, 20*time.Second)
	addr := startLSNServer(t, h, 1, &full)
	c := newUDPClient(t, addr)
	c.send(1000, "lsn-0-3000061.replica.db.local.", dns.TypeA) // waits, holding the one slot
	cases := []struct {
		name  string
		rcode int
	}{
		{"lsn-0-3000061.replica.example.com.", dns.RcodeRefused},
		{"lsn-0-3000061.db.example.", dns.RcodeRefused},
		{"lsn-0-3000061.nosuchrole.db.local.", dns.RcodeNameError},
		{"lsn-zz-3000061.replica.db.local.", dns.RcodeNameError},
		{"lsn-0-3000061.replica.nosuchcluster.db.local.", dns.RcodeNameError},
		{"lsn-0-1.lsn-0-2.replica.db.local.", dns.RcodeNameError},
		{"lsn-0-3000061.primary.db.local.", dns.RcodeSuccess},
		{"lsn-0-3000060.replica.db.local.", dns.RcodeSuccess}, // the replicas have it
	}
	id := uint16(0)
	for _, tc := range cases {
		for _, qtype := range []uint16{dns.TypeA, dns.TypeTXT, dns.TypeSRV} {
			id++
			c.send(id, tc.name, qtype)
			m := c.read(time.Now().Add(5 * time.Second))
			if m == nil || m.Id != id {
				t.Fatalf("%s %s: no reply (got %v)", tc.name, dns.TypeToString[qtype], m)
			}
			if m.Rcode != tc.rcode {
				t.Errorf("%s %s: %s, want %s", tc.name, dns.TypeToString[qtype], dns.RcodeToString[m.Rcode], dns.RcodeToString[tc.rcode])
			}
		}
	}
	for _, qtype := range []uint16{dns.TypeAXFR, dns.TypeIXFR} {
		id++
		c.send(id, "lsn-0-3000061.replica.db.local.", qtype)
		if m := c.read(time.Now().Add(5 * time.Second)); m == nil || m.Rcode != dns.RcodeRefused {
			t.Errorf("%s: %v, want REFUSED", dns.TypeToString[qtype], m)
		}
	}
	if n := full.Load(); n != 0 {
		t.Errorf("%d lookups found the waiting slots full: they were sent off the reader, want none", n)
	}
}
