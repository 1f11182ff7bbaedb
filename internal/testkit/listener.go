package testkit

import (
	"net"
	"testing"
)

// SilentListener accepts TCP connections on addr and never says a word:
// a host that hangs (a probe's connect succeeds, its query never gets an
// answer). It and every connection it accepted close when the test ends.
func SilentListener(t testing.TB, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln
}
