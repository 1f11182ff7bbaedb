package dnsserver

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Limits.
const (
	DefaultMaxTCPConns          = 512
	DefaultMaxTCPConnsPerSource = 32
	DefaultTCPIdle              = 8 * time.Second
	DefaultMaxTCPConnAge        = time.Minute
	DefaultMaxTCPQueries        = 1000
)

// TCP connections from one IPv4 address, or one IPv6 /56 (a site: every
// host has a /64 of its own), count as one source.
const tcpSourceIPv4Bits, tcpSourceIPv6Bits = 32, 56

// Accept errors that miekg/dns retries at once are retried here after a
// pause that doubles from acceptMinDelay to acceptMaxDelay, as net/http's
// server does, so that a full descriptor table does not spin a core.
const (
	acceptMinDelay = 5 * time.Millisecond
	acceptMaxDelay = time.Second
)

// A connection closed by the server while its client may still be
// sending (the query cap, the connection's age) is closed for writing
// first, so that the replies already written arrive, then read and
// thrown away until the client closes, for at most this long or this
// much: closing a socket with unread input sends RST, and the client
// loses the replies still in flight.
const (
	drainTime  = time.Second
	drainBytes = 64 << 10
)

// aLongTimeAgo is a read deadline that unblocks a Read at once.
var aLongTimeAgo = time.Unix(1, 0)

// TCPStats counts what the TCP listener did with connections.
type TCPStats struct {
	Open     int    // connections held now
	Accepted uint64 // connections served
	Evicted  uint64 // idle connections closed to make room for a new one
	Refused  uint64 // new connections closed at once: no idle one to evict
}

// tcpListener caps TCP connections, in all and per source, and makes
// room for a new connection by closing the connection that has been idle
// longest (of its source when the source is at its cap, of all when all
// slots are taken) rather than refusing the new one: held-open idle
// connections cannot keep a client out. Only when none is idle is the
// new connection closed at once, so that the client learns immediately
// and can retry. It also pauses between failing Accepts (acceptMinDelay).
type tcpListener struct {
	net.Listener
	max, perSource int
	maxAge         time.Duration
	wait           func(d time.Duration, closed <-chan struct{}) // sleeps d or until closed

	mu      sync.Mutex
	conns   map[*tcpConn]struct{}
	sources map[uint64]int

	closed    chan struct{}
	closeOnce sync.Once

	accepted, evicted, refused atomic.Uint64
}

func newTCPListener(l net.Listener, limits Limits) *tcpListener {
	return &tcpListener{
		Listener: l, max: limits.MaxTCPConns, perSource: limits.MaxTCPConnsPerSource, maxAge: limits.MaxTCPConnAge,
		wait:  sleepUnlessClosed,
		conns: map[*tcpConn]struct{}{}, sources: map[uint64]int{}, closed: make(chan struct{}),
	}
}

func sleepUnlessClosed(d time.Duration, closed <-chan struct{}) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-closed:
	}
}

// Accept implements net.Listener.
func (l *tcpListener) Accept() (net.Conn, error) {
	var delay time.Duration
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			// What miekg/dns's serveTCP retries at once (EMFILE, ENFILE,
			// ECONNABORTED...): Temporary is its test, so it is this one's.
			var ne net.Error
			if errors.As(err, &ne) && ne.Temporary() { //nolint:staticcheck // miekg/dns decides by Temporary
				delay = min(max(2*delay, acceptMinDelay), acceptMaxDelay)
				l.wait(delay, l.closed)
				continue // once closed, Accept fails for good
			}
			return nil, err
		}
		delay = 0
		if tc := l.admit(c); tc != nil {
			l.accepted.Add(1)
			return tc, nil
		}
		l.refused.Add(1)
		c.Close()
	}
}

// Close implements net.Listener.
func (l *tcpListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

func (l *tcpListener) closing() bool {
	select {
	case <-l.closed:
		return true
	default:
		return false
	}
}

// stats returns the listener's counts.
func (l *tcpListener) stats() TCPStats {
	l.mu.Lock()
	open := len(l.conns)
	l.mu.Unlock()
	return TCPStats{Open: open, Accepted: l.accepted.Load(), Evicted: l.evicted.Load(), Refused: l.refused.Load()}
}

// sourceKey is the source a connection from a counts as.
func sourceKey(a net.Addr) uint64 {
	var ip netip.Addr
	if ta, ok := a.(*net.TCPAddr); ok {
		ip = ta.AddrPort().Addr()
	}
	return networkKey(ip, tcpSourceIPv4Bits, tcpSourceIPv6Bits)
}

// admit takes c on, making room by evicting an idle connection when its
// source or the listener is full; nil: no room.
func (l *tcpListener) admit(c net.Conn) *tcpConn {
	key := sourceKey(c.RemoteAddr())
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sources[key] >= l.perSource && !l.evictIdlest(func(o *tcpConn) bool { return o.key == key }) {
		return nil
	}
	if len(l.conns) >= l.max && !l.evictIdlest(func(*tcpConn) bool { return true }) {
		return nil
	}
	now := time.Now()
	tc := &tcpConn{Conn: c, l: l, key: key, born: now, idle: true, idleSince: now}
	l.conns[tc] = struct{}{}
	l.sources[key]++
	return tc
}

// evictIdlest evicts the connection among those of which that has been
// idle longest, and reports whether there was one. l.mu is held. The
// scan is over at most max connections, and only when one must go.
func (l *tcpListener) evictIdlest(of func(*tcpConn) bool) bool {
	var victim *tcpConn
	var since time.Time
	for o := range l.conns {
		if !of(o) {
			continue
		}
		o.mu.Lock()
		if o.idle && (victim == nil || o.idleSince.Before(since)) {
			victim, since = o, o.idleSince
		}
		o.mu.Unlock()
	}
	if victim == nil {
		return false
	}
	l.forget(victim)
	victim.evict()
	l.evicted.Add(1)
	return true
}

// forget stops counting c; l.mu is held.
func (l *tcpListener) forget(c *tcpConn) {
	if _, ok := l.conns[c]; !ok {
		return
	}
	delete(l.conns, c)
	if l.sources[c.key]--; l.sources[c.key] <= 0 {
		delete(l.sources, c.key)
	}
}

func (l *tcpListener) release(c *tcpConn) {
	l.mu.Lock()
	l.forget(c)
	l.mu.Unlock()
}

// tcpConn is one TCP connection of a tcpListener. It follows the streams
// of length-prefixed messages that miekg/dns reads from it and writes to
// it, to know when the connection is idle (no query begun that has not
// been answered: between a reply and the next query, or before the
// first), to close it at its age only between queries, and to close it
// without losing replies.
type tcpConn struct {
	net.Conn
	l    *tcpListener
	key  uint64
	born time.Time

	mu        sync.Mutex
	idle      bool      // no query in progress
	idleSince time.Time // when it became idle
	evicted   bool      // forgotten by the listener, its Read unblocked
	peerDone  bool      // the last Read failed (EOF, timeout, reset): nothing unread matters
	in, out   frames    // queries read, replies written
	deadline  time.Time // the read deadline miekg/dns asked for
	clamped   bool      // the deadline set is the connection's age, not deadline

	closeOnce sync.Once
	closeErr  error
}

// frames follows a stream of DNS messages over TCP, each after its
// length in two bytes (RFC 1035 4.2.2).
type frames struct {
	hdrGot   int // bytes of the next length seen; 0 at a boundary
	hdr      [2]byte
	bodyLeft int // bytes of the current message still to come
	done     int // messages complete
}

func (f *frames) boundary() bool { return f.hdrGot == 0 && f.bodyLeft == 0 }

// advance follows the stream over b.
func (f *frames) advance(b []byte) {
	for len(b) > 0 {
		if f.bodyLeft > 0 {
			k := min(f.bodyLeft, len(b))
			f.bodyLeft -= k
			b = b[k:]
			if f.bodyLeft == 0 {
				f.done++
			}
			continue
		}
		f.hdr[f.hdrGot] = b[0]
		b = b[1:]
		if f.hdrGot++; f.hdrGot == 2 {
			f.hdrGot, f.bodyLeft = 0, int(f.hdr[0])<<8|int(f.hdr[1])
			if f.bodyLeft == 0 {
				f.done++
			}
		}
	}
}

func (c *tcpConn) atBoundary() bool { return c.in.boundary() }

// becomeIdle marks the connection idle from now, unless it already is.
func (c *tcpConn) becomeIdle() {
	if !c.idle {
		c.idle, c.idleSince = true, time.Now()
	}
}

func (c *tcpConn) ageEnd() time.Time { return c.born.Add(c.l.maxAge) }

// Read implements net.Conn.
func (c *tcpConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	boundary := c.atBoundary()
	if boundary {
		if c.evicted || !time.Now().Before(c.ageEnd()) {
			// Between queries at its age (or evicted): the server is done
			// with this connection. Close sees the client may still send.
			c.mu.Unlock()
			return 0, io.EOF
		}
		c.becomeIdle() // waiting for a query (the last one may have had no reply)
	}
	c.mu.Unlock()
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.peerDone = err != nil
	if n > 0 {
		c.idle = false
		c.in.advance(p[:n])
		if boundary && c.clamped && !c.evicted {
			// A query has begun: it gets the whole deadline asked for.
			c.clamped = false
			_ = c.Conn.SetReadDeadline(c.deadline)
		}
	}
	return n, err
}

// Write implements net.Conn. A connection writing the last reply it owes
// is idle from then on: it may be evicted before miekg/dns comes back to
// read the next query, and it is idle before its client can have the
// reply (a client sending its next query, or opening its next
// connection, never finds it busy because this goroutine has not run
// since the write). An eviction does not stop the write: the reply
// still goes out, then FIN.
func (c *tcpConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	after := c.out
	after.advance(p)
	if after.boundary() && c.atBoundary() && after.done >= c.in.done {
		c.becomeIdle()
	}
	c.mu.Unlock()
	n, err := c.Conn.Write(p)
	c.mu.Lock()
	c.out.advance(p[:n])
	c.mu.Unlock()
	return n, err
}

// SetReadDeadline implements net.Conn. At a message boundary the deadline
// is no later than the connection's age: a connection waiting for its
// next query is closed when it is too old.
func (c *tcpConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.evicted {
		return nil // keep the past deadline that unblocked its Read
	}
	c.deadline, c.clamped = t, false
	if end := c.ageEnd(); c.atBoundary() && (t.IsZero() || end.Before(t)) {
		t, c.clamped = end, true
	}
	return c.Conn.SetReadDeadline(t)
}

// SetDeadline implements net.Conn.
func (c *tcpConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetWriteDeadline(t)
}

// evict unblocks the connection's Read, so that the server closes it; the
// listener has already forgotten it.
func (c *tcpConn) evict() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.evicted = true
	_ = c.Conn.SetReadDeadline(aLongTimeAgo)
}

// Close implements net.Conn. When the client may still be sending, the
// replies written are let through first (drain); the slot is freed once.
func (c *tcpConn) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		drain := !c.peerDone && !c.evicted
		c.mu.Unlock()
		if drain && !c.l.closing() {
			c.drain()
		}
		c.closeErr = c.Conn.Close()
		c.l.release(c)
	})
	return c.closeErr
}

// drain closes the connection for writing (the client gets every reply
// written, then EOF) and discards what the client still sends until it
// closes its side, for at most drainTime and drainBytes.
func (c *tcpConn) drain() {
	cw, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	if c.Conn.SetReadDeadline(time.Now().Add(drainTime)) != nil {
		return
	}
	_, _ = io.CopyN(io.Discard, c.Conn, drainBytes)
}
