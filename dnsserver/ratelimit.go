package dnsserver

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// Defaults of RateLimits.
const (
	// DefaultMaxNetworks is how many source networks the rate limiter
	// remembers at most unless told otherwise: 131,072 networks in 3 MiB.
	DefaultMaxNetworks = 1 << 17
	// DefaultIPv4Bits and DefaultIPv6Bits are the source networks that
	// share one budget, as BIND's and Knot's response rate limiting
	// group them: a /24 of IPv4, a /56 of IPv6 (a site's allocation:
	// one host may hold a whole /64).
	DefaultIPv4Bits = 24
	DefaultIPv6Bits = 56
)

// RateLimits configure the UDP rate limiter.
type RateLimits struct {
	// PerSecond is how many queries a second each source network may
	// send, with bursts of as many; 0 or less: no limit.
	PerSecond int
	// MaxNetworks bounds how many source networks are remembered (24
	// bytes each), rounded up to a multiple of limiterWays that is a
	// power of two; 0: DefaultMaxNetworks.
	MaxNetworks int
	// IPv4Bits (1..32) and IPv6Bits (1..62) are the prefix lengths of
	// a source network; 0: the defaults, out of range: the nearest end.
	IPv4Bits, IPv6Bits int
}

// limiterWays is how many networks share one set of the limiter's table:
// a new network replaces the one of its set that was seen longest ago, so
// every call reads at most this many entries, however many sources come.
const limiterWays = 8

// RateLimiter counts queries per source network in token buckets (rate
// and burst: RateLimits.PerSecond). Its memory is fixed when it is made:
// a set-associative table of RateLimits.MaxNetworks entries, each set
// under its own lock, so that neither the number of sources nor their
// churn changes what a call costs, and UDP readers seldom wait for one
// another. A network that is forgotten (replaced by a newer one in its
// set) comes back with a full bucket: what an idle network has anyway.
// The set of a network is chosen by a hash with a random seed, so that a
// sender cannot aim fresh sources at the set of another network.
type RateLimiter struct {
	rate   float64 // tokens per nanosecond
	burst  float64
	v4Bits int
	v6Bits int
	seed   maphash.Seed
	sets   []limiterSet
	mask   uint64 // len(sets)-1
	base   time.Time
	now    func() time.Time

	limited atomic.Uint64 // queries refused by Allow (Limited)
}

type limiterSet struct {
	mu   sync.Mutex
	ways [limiterWays]limiterEntry
}

// limiterEntry is one source network's bucket.
type limiterEntry struct {
	key    uint64 // the network (limiterKey); 0: the entry is free
	last   int64  // when tokens was last brought up to date, in ns since base
	tokens float64
}

// NewRateLimiter returns a limiter for l; nil when l sets no limit.
func NewRateLimiter(l RateLimits) *RateLimiter {
	if l.PerSecond <= 0 {
		return nil
	}
	if l.MaxNetworks <= 0 {
		l.MaxNetworks = DefaultMaxNetworks
	}
	sets := 1 << bits.Len(uint((l.MaxNetworks+limiterWays-1)/limiterWays-1))
	r := &RateLimiter{
		rate:   float64(l.PerSecond) / float64(time.Second),
		burst:  float64(l.PerSecond),
		v4Bits: bitsIn(l.IPv4Bits, DefaultIPv4Bits, 32),
		v6Bits: bitsIn(l.IPv6Bits, DefaultIPv6Bits, 62),
		seed:   maphash.MakeSeed(),
		sets:   make([]limiterSet, sets),
		mask:   uint64(sets - 1),
		base:   time.Now(),
		now:    time.Now,
	}
	return r
}

func bitsIn(v, def, most int) int {
	switch {
	case v == 0:
		return def
	case v < 1:
		return 1
	}
	return min(v, most)
}

// Cap is the most source networks r remembers at once.
func (r *RateLimiter) Cap() int { return len(r.sets) * limiterWays }

// Len is how many source networks r remembers now. It reads the whole
// table: for tests and benchmarks, not for the query path.
func (r *RateLimiter) Len() int {
	n := 0
	for i := range r.sets {
		s := &r.sets[i]
		s.mu.Lock()
		for _, e := range s.ways {
			if e.key != 0 {
				n++
			}
		}
		s.mu.Unlock()
	}
	return n
}

// key is the source network of src.
func (r *RateLimiter) key(src netip.Addr) uint64 { return networkKey(src, r.v4Bits, r.v6Bits) }

// networkKey is the network of src: its first v4Bits (1..32) or v6Bits
// (1..62) bits, and the family in the low bits (which the prefix leaves
// zero), so that no network's key is 0 and an IPv4 network never shares
// an IPv6 one's. An IPv4-mapped address is IPv4.
func networkKey(src netip.Addr, v4Bits, v6Bits int) uint64 {
	src = src.Unmap()
	if src.Is4() {
		a := src.As4()
		v := uint64(binary.BigEndian.Uint32(a[:]))
		return (v>>(32-v4Bits))<<(64-v4Bits) | 1
	}
	a := src.As16()
	v := binary.BigEndian.Uint64(a[:8])
	return (v>>(64-v6Bits))<<(64-v6Bits) | 2
}

// Allow reports whether a query from src is within its network's budget,
// and takes one token from it when it is.
func (r *RateLimiter) Allow(src netip.Addr) bool {
	key := r.key(src)
	s := &r.sets[maphash.Comparable(r.seed, key)&r.mask]
	now := int64(r.now().Sub(r.base))
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entry(key, now, r.burst)
	if elapsed := now - e.last; elapsed > 0 {
		e.tokens = min(r.burst, e.tokens+float64(elapsed)*r.rate)
		e.last = now
	}
	if e.tokens < 1 {
		r.limited.Add(1)
		return false
	}
	e.tokens--
	return true
}

// Limited is how many queries Allow has refused since r was made: each
// got the empty truncated answer. 0 for a nil r (no limit).
func (r *RateLimiter) Limited() uint64 {
	if r == nil {
		return 0
	}
	return r.limited.Load()
}

// entry returns the entry of key in s: the one it has, or else the free
// or longest unseen one, given to key with a full bucket.
func (s *limiterSet) entry(key uint64, now int64, burst float64) *limiterEntry {
	victim := &s.ways[0]
	for i := range s.ways {
		e := &s.ways[i]
		if e.key == key {
			return e
		}
		if victim.key != 0 && (e.key == 0 || e.last < victim.last) {
			victim = e
		}
	}
	*victim = limiterEntry{key: key, last: now, tokens: burst}
	return victim
}

// limitedHandler is a Handler behind a RateLimiter.
type limitedHandler struct {
	next    dns.Handler
	limiter *RateLimiter
}

// RateLimit wraps h so that each UDP source network may send at most
// perSecond queries a second: RateLimitWith with the default networks
// and memory. Over the limit a query gets an empty, truncated answer: a
// real resolver retries over TCP, which a spoofed source cannot, and the
// answer is too small to amplify anything. TCP is not limited: its
// handshake proves the source.
func RateLimit(h dns.Handler, perSecond int) dns.Handler {
	return RateLimitWith(h, RateLimits{PerSecond: perSecond})
}

// RateLimitWith wraps h in a RateLimiter for l; h itself when l sets no
// limit. Start serves a wrapped *Handler on its fast UDP path.
func RateLimitWith(h dns.Handler, l RateLimits) dns.Handler {
	return NewRateLimiter(l).Wrap(h)
}

// Wrap returns h behind r (h itself when r is nil), for Start; the caller
// keeps r to read Len.
func (r *RateLimiter) Wrap(h dns.Handler) dns.Handler {
	if r == nil {
		return h
	}
	return &limitedHandler{next: h, limiter: r}
}

// ServeDNS implements dns.Handler.
func (l *limitedHandler) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	ua, udp := w.RemoteAddr().(*net.UDPAddr)
	if !udp || l.limiter.Allow(ua.AddrPort().Addr()) {
		l.next.ServeDNS(w, req)
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
