package dnsserver

import (
	"net"
	"sync"
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
