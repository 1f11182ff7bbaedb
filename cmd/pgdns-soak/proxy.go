package main

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// delayProxy forwards TCP from pgdns to one node's probe address and
// holds back what pgdns sends (queries, never the results) by the delay
// set at the moment each chunk arrived: a one-sided delay, as a slow
// request path, CPU throttling or a congested link in one direction give.
// A probe's round trip then ends long after the server read its values,
// and the midpoint of the round trip is no longer when they were read.
// (testkit.DelayProxy does the same for tests, with a fixed delay; the
// soak runs outside tests and changes the delay as it goes.)
type delayProxy struct {
	ln    net.Listener
	to    string
	delay atomic.Int64 // nanoseconds
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]bool
}

func startProxy(listen, to string) (*delayProxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	p := &delayProxy{ln: ln, to: to, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

func (p *delayProxy) setDelay(d time.Duration) { p.delay.Store(int64(d)) }

func (p *delayProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.pipe(c)
		}()
	}
}

func (p *delayProxy) track(c net.Conn, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.conns[c] = true
	} else {
		delete(p.conns, c)
	}
}

// chunk is what pgdns sent, and when it may go on.
type chunk struct {
	b   []byte
	due time.Time
}

func (p *delayProxy) pipe(client net.Conn) {
	server, err := net.DialTimeout("tcp", p.to, 2*time.Second)
	if err != nil {
		client.Close()
		return
	}
	p.track(client, true)
	p.track(server, true)
	defer func() {
		p.track(client, false)
		p.track(server, false)
		client.Close()
		server.Close()
	}()
	// Results go back at once.
	go func() {
		_, _ = io.Copy(client, server)
		client.Close()
		server.Close()
	}()
	// Queries wait their delay, in order, in a bounded queue.
	queue := make(chan chunk, 256)
	go func() {
		defer server.Close()
		for c := range queue {
			time.Sleep(time.Until(c.due))
			if _, err := server.Write(c.b); err != nil {
				return
			}
		}
	}()
	defer close(queue)
	buf := make([]byte, 32*1024)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			queue <- chunk{b: append([]byte(nil), buf[:n]...), due: time.Now().Add(time.Duration(p.delay.Load()))}
		}
		if err != nil {
			return
		}
	}
}

// close stops the proxy and every connection through it.
func (p *delayProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
