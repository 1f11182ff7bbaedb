package httpapi

import (
	"container/list"
	"net"
	"net/http"
	"sync"
)

// connCap caps a server's open connections without ever blocking Accept.
// Past the cap, a new connection closes the one idle longest: a keep-alive
// connection between requests, or one whose request headers have not all
// arrived (net/http marks a connection active only once they have), so
// that slow headers hold no slot either. Only when every connection is
// inside a handler (each bounded by the server's timeouts) is the new one
// closed instead. So an idle flood costs pgdns at
// most max connections' memory, and a probe of the kubelet, which sends
// its request at once, still gets through (golang.org/x/net/netutil's
// LimitListener would make it wait in the accept queue for a slot).
type connCap struct {
	net.Listener
	max int

	mu   sync.Mutex
	open int
	idle list.List // of *capConn, the longest idle first
	// onEvict, when set, is called for each connection closed by the
	// cap, before the close: an idle one evicted (refused false), or a
	// new one refused.
	onEvict func(refused bool)
}

// capConn is one connection counted by a connCap.
type capConn struct {
	net.Conn
	cap    *connCap
	elem   *list.Element // in cap.idle while idle, else nil
	closed bool          // its slot is free
}

func newConnCap(l net.Listener, max int) *connCap {
	return &connCap{Listener: l, max: max}
}

// Accept implements net.Listener.
func (l *connCap) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		var victim *capConn
		if l.open >= l.max {
			if e := l.idle.Front(); e != nil {
				victim = e.Value.(*capConn)
				l.release(victim)
			}
		}
		// Each close is counted before it is made: a client that sees
		// its connection closed finds the metric saying so already.
		if l.open >= l.max {
			l.mu.Unlock()
			l.evicted(true)
			c.Close()
			continue
		}
		cc := &capConn{Conn: c, cap: l}
		l.open++
		cc.elem = l.idle.PushBack(cc) // no byte read yet: as idle as it gets
		l.mu.Unlock()
		if victim != nil {
			l.evicted(false)
			victim.Conn.Close()
		}
		return cc, nil
	}
}

func (l *connCap) evicted(refused bool) {
	if l.onEvict != nil {
		l.onEvict(refused)
	}
}

// release frees c's slot once. The caller holds l.mu.
func (l *connCap) release(c *capConn) {
	if c.closed {
		return
	}
	c.closed = true
	l.open--
	if c.elem != nil {
		l.idle.Remove(c.elem)
		c.elem = nil
	}
}

// connState is the http.Server's ConnState hook: a connection inside a
// request is never evicted; one between requests goes to the back of the
// idle list.
func (l *connCap) connState(nc net.Conn, state http.ConnState) {
	c, ok := nc.(*capConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.closed {
		return
	}
	switch state {
	case http.StateActive:
		if c.elem != nil {
			l.idle.Remove(c.elem)
			c.elem = nil
		}
	case http.StateIdle:
		if c.elem == nil {
			c.elem = l.idle.PushBack(c)
		}
	case http.StateHijacked, http.StateClosed:
		l.release(c)
	}
}

// Close implements net.Conn and frees the connection's slot.
func (c *capConn) Close() error {
	c.cap.mu.Lock()
	c.cap.release(c)
	c.cap.mu.Unlock()
	return c.Conn.Close()
}
