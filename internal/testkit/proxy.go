package testkit

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy forwards each connection it accepts on its address to a target,
// what the server sends coming back at once and what the client sends
// after a delay (none: at once). Cut ends every connection carried so far
// as a middlebox does; new ones are still accepted. RefuseNew refuses new
// ones and keeps those carried. The proxy and its
// connections close when the test ends.
type Proxy struct {
	ln     net.Listener
	mu     sync.Mutex
	pairs  [][2]net.Conn // client, server: each carried connection
	closed bool
	wg     sync.WaitGroup
}

// StartProxy starts a Proxy on listen forwarding to target, holding
// every byte the client sends for delay before passing it on: a one-sided
// delay on the request path, as a slow network hop, a throttled client or
// a congested proxy make. Each chunk is delayed by delay from the moment
// it was read, in order, so a steady stream keeps its pace.
func StartProxy(t testing.TB, listen, target string, delay time.Duration) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.DialTimeout("tcp", target, 5*time.Second)
			if err != nil {
				client.Close()
				continue
			}
			if !p.track(client, server) {
				client.Close()
				server.Close()
				return
			}
			p.forward(client, server, delay)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, pair := range p.pairs {
			pair[0].Close()
			pair[1].Close()
		}
		p.pairs, p.closed = nil, true
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

// DelayProxy is StartProxy's listener, for a test that needs only the
// delay.
func DelayProxy(t testing.TB, listen, target string, delay time.Duration) net.Listener {
	t.Helper()
	return StartProxy(t, listen, target, delay).ln
}

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut ends every connection carried so far, as a middlebox, a conntrack
// flush or a load balancer's idle timeout does, without a word from the
// server: with a reset (RST) when rst, else with a plain end of the
// stream (FIN). The server's side is closed too.
func (p *Proxy) Cut(rst bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pair := range p.pairs {
		if tc, ok := pair[0].(*net.TCPConn); ok && rst {
			_ = tc.SetLinger(0)
		}
		pair[0].Close()
		pair[1].Close()
	}
	p.pairs = p.pairs[:0]
}

// RefuseNew closes the proxy's listener, so that every new connection to
// its address is refused, and keeps carrying the connections it has: a
// packet filter's REJECT added in front of a server that runs, conntrack
// letting the established flows through.
func (p *Proxy) RefuseNew() { _ = p.ln.Close() }

// track records a connection carried; false once the proxy is closing.
func (p *Proxy) track(client, server net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.pairs = append(p.pairs, [2]net.Conn{client, server})
	return true
}

// forward carries one connection until either side ends it, which ends
// both.
func (p *Proxy) forward(client, server net.Conn, delay time.Duration) {
	p.wg.Add(3)
	go func() { // server to client, at once
		defer p.wg.Done()
		_, _ = io.Copy(client, server)
		client.Close()
		server.Close()
	}()
	chunks, done := make(chan delayed, 256), make(chan struct{})
	go func() { // client to the queue, stamped
		defer p.wg.Done()
		defer close(chunks)
		for {
			buf := make([]byte, 32<<10)
			n, err := client.Read(buf)
			if n > 0 {
				select {
				case chunks <- delayed{at: time.Now().Add(delay), b: buf[:n]}:
				case <-done:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() { // the queue to the server, each chunk when due
		defer p.wg.Done()
		defer close(done)
		defer server.Close()
		defer client.Close()
		for c := range chunks {
			time.Sleep(time.Until(c.at))
			if _, err := server.Write(c.b); err != nil {
				return
			}
		}
	}()
}

// delayed is a chunk of a client's bytes and when it is due at the server.
type delayed struct {
	at time.Time
	b  []byte
}
