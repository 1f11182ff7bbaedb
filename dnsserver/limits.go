package dnsserver

import (
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// limitListener caps concurrent TCP connections. Past the cap a new
// connection is closed at once instead of waiting in the accept queue:
// the client learns immediately and can retry, and held-open idle
// connections cannot starve new ones for longer than the read timeout.
type limitListener struct {
	net.Listener
	slots chan struct{}
}

func newLimitListener(l net.Listener, max int) *limitListener {
	return &limitListener{Listener: l, slots: make(chan struct{}, max)}
}

// Accept implements net.Listener.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
		default:
			c.Close()
		}
	}
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

// Close implements net.Conn and frees the connection's slot once.
func (c *limitConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// rateLimiter allows each source address rate queries per second over UDP,
// with bursts of the same size. Over the limit a query gets an empty,
// truncated answer: a real resolver retries over TCP, which a spoofed
// source cannot, and the answer is too small to amplify anything.
type rateLimiter struct {
	next dns.Handler
	rate float64

	mu      sync.Mutex
	buckets map[netip.Addr]*bucket
	now     func() time.Time
}

type bucket struct {
	tokens float64
	last   time.Time
}

// maxBuckets bounds the limiter's memory; past it, idle sources are
// forgotten.
const maxBuckets = 100_000

// RateLimit wraps h so that each UDP source may send at most perSecond
// queries a second. TCP is not limited: its handshake proves the source.
func RateLimit(h dns.Handler, perSecond int) dns.Handler {
	if perSecond <= 0 {
		return h
	}
	return &rateLimiter{next: h, rate: float64(perSecond), buckets: map[netip.Addr]*bucket{}, now: time.Now}
}

// ServeDNS implements dns.Handler.
func (r *rateLimiter) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	ua, udp := w.RemoteAddr().(*net.UDPAddr)
	if !udp || r.allow(ua.AddrPort().Addr().Unmap()) {
		r.next.ServeDNS(w, req)
		return
	}
	writeTruncated(w, req)
}

// writeTruncated is the answer over the limit: empty, TC set.
func writeTruncated(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Truncated = true
	_ = w.WriteMsg(m)
}

func (r *rateLimiter) allow(src netip.Addr) bool {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.buckets[src]
	if b == nil {
		if len(r.buckets) >= maxBuckets {
			for a, old := range r.buckets {
				if now.Sub(old.last) > time.Second {
					delete(r.buckets, a)
				}
			}
		}
		b = &bucket{tokens: r.rate, last: now}
		r.buckets[src] = b
	}
	b.tokens = min(r.rate, b.tokens+now.Sub(b.last).Seconds()*r.rate)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
