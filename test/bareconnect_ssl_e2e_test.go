package test

// Review 8, R8-4: since 3067406 (R8-1's fix) the bare connect sent an
// SSLRequest, and a server with ssl = on answers 'S': pgdns then made a
// whole TLS handshake on every bare connect (every 4 s a host), the
// server's certificate and a signature each time, 1.4-2 ms of pgdns's CPU
// and 4 ms of the server's. The bare connect of a checker with an open
// session is now a CancelRequest for that session's own backend, which
// the forked backend answers by closing: no TLS, nothing logged. A
// counting TCP proxy in front of an ssl=on replica sees what each bare
// connect made the server send (pgdns's own sessions use sslmode=disable
// here, so every connection that starts with an SSLRequest or a
// CancelRequest is a bare connect). From the reviewer's
// TestR8BareConnectMakesNoTLSHandshake, which counted SSLRequests only.

import (
	"bytes"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// bareConnectCounter is a TCP proxy that notes how many bytes the server
// sent on each connection that began with an SSLRequest or a
// CancelRequest.
type bareConnectCounter struct {
	mu      sync.Mutex
	sizes   []int
	cancels int
}

var (
	sslRequestStart    = []byte{0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f}
	cancelRequestStart = []byte{0, 0, 0, 16, 0x04, 0xd2, 0x16, 0x2e}
)

func startBareConnectCounter(t *testing.T, listen, target string) *bareConnectCounter {
	t.Helper()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	bc := &bareConnectCounter{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go bc.serve(c, target)
		}
	}()
	return bc
}

func (bc *bareConnectCounter) serve(c net.Conn, target string) {
	defer c.Close()
	s, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer s.Close()
	first := make([]byte, 8)
	if _, err := io.ReadFull(c, first); err != nil {
		return
	}
	if _, err := s.Write(first); err != nil {
		return
	}
	done := make(chan int64, 1)
	go func() {
		n, _ := io.Copy(c, s)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- n
	}()
	_, _ = io.Copy(s, c)
	if tc, ok := s.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	n := <-done
	ssl, cancel := bytes.Equal(first, sslRequestStart), bytes.Equal(first, cancelRequestStart)
	if ssl || cancel {
		bc.mu.Lock()
		bc.sizes = append(bc.sizes, int(n))
		if cancel {
			bc.cancels++
		}
		bc.mu.Unlock()
	}
}

func (bc *bareConnectCounter) seen() (sizes []int, cancels int) {
	bc.mu.Lock()
	defer bc.mu.Unlock()
	return append([]int(nil), bc.sizes...), bc.cancels
}

func TestBareConnectOfAnSSLServer(t *testing.T) {
	ips := pgtest.Addrs(t).IPs(3) // .1 the primary, .2 the proxy, .3 the replica
	pg := pgtest.NewTLS(t, pgtest.NewCA(t), pgtest.Options{IPs: []string{ips[0], ips[2]}}, "pg")
	proxy := ips[1] + ":5432"
	bc := startBareConnectCounter(t, proxy, pg.Nodes[1].Addr())
	// probe.interval 20ms and admission_interval 100ms: a bare connect
	// every 400 ms a host (every third one a startup packet instead), each
	// started beside a probe, for as long as the test runs.
	e := attach(t, pg, envOptions{Interval: "20ms", Timeout: "2s", Probe: "  admission_interval: 100ms\n",
		Hosts: []string{pg.Nodes[0].Addr(), proxy}})
	e.waitFor(t, "replica.db.local.", []string{ips[1]})

	t.Run("makes no TLS handshake", func(t *testing.T) {
		testkit.Eventually(t, 30*time.Second, 100*time.Millisecond, "three bare connects through the proxy", func() ([]int, bool) {
			s, _ := bc.seen()
			return s, len(s) >= 3
		})
		// A whole handshake is about 890 bytes here (ServerHello, the
		// ECDSA certificate and its CertificateVerify, Finished, session
		// tickets); a bare 'S' or 'N' is one byte, a cancel's close none.
		s, cancels := bc.seen()
		for _, n := range s {
			if n >= 400 {
				t.Fatalf("a bare connect made the server send %d bytes (a TLS handshake: its certificate and signature, 1.4-2 ms of pgdns's CPU and 4 ms of the server's each, every 4 s a host); all: %v", n, s)
			}
		}
		if cancels == 0 {
			t.Fatalf("no bare connect was a CancelRequest for the session's own backend; bytes the server sent on each: %v", s)
		}
	})

	t.Run("cancels no probe", func(t *testing.T) {
		// Bounded: 40 more bare connects through the proxy (about 20 s at
		// 400 ms, 1,000 probes of the replica), or 90 s.
		s, _ := bc.seen()
		before := len(s)
		testkit.Eventually(t, 90*time.Second, 200*time.Millisecond, "40 more bare connects through the proxy", func() (int, bool) {
			s, _ := bc.seen()
			return len(s) - before, len(s)-before >= 40
		})
		for _, host := range []string{pg.Nodes[0].Addr(), proxy} {
			if n := e.probes(t, host); n < 500 {
				t.Fatalf("%s: %v probes, want hundreds", host, n)
			}
			if n := e.metricSum(t, `pgdns_probe_failures_total{cluster="main",host="`+host+`"}`); n != 0 {
				t.Errorf("%s: %v probes failed beside its bare connects, want none:\n%s", host, n, e.logs.String())
			}
		}
		e.waitFor(t, "replica.db.local.", []string{ips[1]})
		for i, n := range pg.Nodes {
			log := n.Log()
			for _, bad := range []string{"cancel request", "could not accept SSL connection", "incomplete startup packet"} {
				if strings.Contains(log, bad) {
					t.Errorf("node %d logged %q for a bare connect:\n%s", i, bad, log)
				}
			}
			t.Logf("node %d: statements a cancel of ours reached (run again): %d", i, strings.Count(log, "canceling statement due to user request"))
		}
	})
}
