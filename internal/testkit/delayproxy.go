package testkit

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// DelayProxy listens on listen and forwards each connection to target,
// holding every byte the client sends for delay before passing it on,
// while what the server sends comes back at once: a one-sided delay on the
// request path, as a slow network hop, a throttled client or a congested
// proxy make. Each chunk is delayed by delay from the moment it was read,
// in order, so a steady stream keeps its pace. The proxy and its
// connections close when the test ends.
func DelayProxy(t testing.TB, listen, target string, delay time.Duration) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	track := func(c net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		if conns == nil {
			return false // closing
		}
		conns = append(conns, c)
		return true
	}
	conns = []net.Conn{}
	wg.Add(1)
	go func() {
		defer wg.Done()
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
			if !track(client) || !track(server) {
				client.Close()
				server.Close()
				return
			}
			wg.Add(3)
			go func() { // server to client, at once
				defer wg.Done()
				_, _ = io.Copy(client, server)
				client.Close()
				server.Close()
			}()
			chunks, done := make(chan delayed, 256), make(chan struct{})
			go func() { // client to the queue, stamped
				defer wg.Done()
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
				defer wg.Done()
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
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		conns = nil
		mu.Unlock()
		wg.Wait()
	})
	return ln
}

// delayed is a chunk of a client's bytes and when it is due at the server.
type delayed struct {
	at time.Time
	b  []byte
}
