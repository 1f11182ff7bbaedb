package httpapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// startServer serves h with sc on a loopback address of the test's own
// until the test ends, and returns the address.
func startServer(t *testing.T, h http.Handler, sc ServerConfig) string {
	t.Helper()
	s, err := Start(pgtest.Addrs(t).Addr(1, 0), h, slog.New(slog.NewTextHandler(io.Discard, nil)), sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return s.Addr()
}

// get sends GET path to addr with the Host header host on a connection of
// its own and returns the status code.
func get(t *testing.T, addr, path, host string, header ...string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s (Host %s): %v", path, host, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// Issue 29.9: a page rebinding a name of its own to pgdns's address sends
// that name as Host. It gets 421 on every endpoint, an unknown path too;
// the kubelet's probes and Prometheus's scrapes by pod IP, localhost and
// the names listed keep working.
func TestHostCheck(t *testing.T) {
	a, _ := newTestAPI(testSnapshot())
	addr := startServer(t, a, ServerConfig{AllowedHosts: []string{"pgdns.monitoring.svc", "PGDNS.example."}})
	paths := slices.Sorted(func(yield func(string) bool) {
		for p := range a.routes {
			if !yield(p) {
				return
			}
		}
	})
	paths = append(paths, "/no-such-endpoint")

	// The kubelet: GET on the pod IP and the container port.
	if code := get(t, addr, "/readyz", "10.244.1.7:8080", "User-Agent", "kube-probe/1.31"); code != http.StatusOK {
		t.Errorf("kubelet probe (Host 10.244.1.7:8080): %d, want 200", code)
	}
	if code := get(t, addr, "/healthz", "[fd00:10:244::7]:8080", "User-Agent", "kube-probe/1.31"); code != http.StatusOK {
		t.Errorf("kubelet probe over IPv6 (Host [fd00:10:244::7]:8080): %d, want 200", code)
	}
	// Prometheus, scraping the pod by its IP.
	if code := get(t, addr, "/metrics", "10.244.1.7:8080", "User-Agent", "Prometheus/2.53.0",
		"Accept", "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4"); code != http.StatusOK {
		t.Errorf("Prometheus scrape (Host 10.244.1.7:8080): %d, want 200", code)
	}

	allowed := []string{addr, "127.0.0.1", "[::1]:8080", "::1", "localhost", "localhost:8080", "LocalHost.",
		"pgdns.monitoring.svc", "pgdns.monitoring.svc:8080", "pgdns.example"}
	denied := []string{"evil.example", "evil.example:8080", "localhost.evil.example", "pgdns.monitoring.svc.evil.example",
		"10.244.1.7.nip.io", "127.0.0.1.evil.example:8080", "pgdns"}
	for _, p := range paths {
		for _, h := range allowed {
			if code := get(t, addr, p, h); code == http.StatusMisdirectedRequest {
				t.Errorf("GET %s with Host %q: 421, want it answered", p, h)
			}
		}
		for _, h := range denied {
			if code := get(t, addr, p, h); code != http.StatusMisdirectedRequest {
				t.Errorf("GET %s with Host %q: %d, want 421", p, h, code)
			}
		}
	}
}

// idleConn opens a connection to addr, sends one keep-alive request and
// reads its answer, leaving the connection idle between requests.
func idleConn(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return c
}

// stillOpen counts the connections the server has not closed: a read
// times out on those, and ends (EOF, reset) on the others.
func stillOpen(conns []net.Conn) int {
	n := 0
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		if errors.Is(err, os.ErrDeadlineExceeded) {
			n++
		}
	}
	return n
}

// Issue 29.3: connections idle between requests, connections that never
// sent a byte and connections whose headers never end, beyond
// http.max_conns, neither stay open nor keep a new well-behaved request
// (a kubelet probe) from being answered.
func TestConnCapEvictsIdle(t *testing.T) {
	const maxConns = 8
	a, _ := newTestAPI(testSnapshot())
	var evicted atomic.Int64
	addr := startServer(t, a, ServerConfig{MaxConns: maxConns, OnEvict: func(bool) { evicted.Add(1) }})

	var conns []net.Conn
	for range maxConns + 50 {
		conns = append(conns, idleConn(t, addr))
	}
	for i := range maxConns + 50 {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if i%2 == 1 { // a slow client: its headers never end
			if _, err := fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n", addr); err != nil {
				t.Fatal(err)
			}
		}
		conns = append(conns, c) // else silent: not a byte sent
	}
	if code := get(t, addr, "/readyz", "10.244.1.7:8080"); code != http.StatusOK {
		t.Fatalf("a probe beside %d idle connections: %d, want 200", len(conns), code)
	}
	open := testkit.Eventually(t, 10*time.Second, 20*time.Millisecond, "at most http.max_conns connections open", func() (int, bool) {
		n := stillOpen(conns)
		return n, n <= maxConns
	})
	t.Logf("%d of %d idle connections still open; %d evicted", open, len(conns), evicted.Load())
}

// Past the cap with every connection inside a request, a new connection
// is closed at once instead of waiting: no request in flight is cut off,
// and once they finish new connections are served again.
func TestConnCapRefusesWhenAllBusy(t *testing.T) {
	const maxConns = 4
	release := make(chan struct{})
	entered := make(chan struct{}, maxConns)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			entered <- struct{}{}
			<-release
		}
		w.WriteHeader(http.StatusOK)
	})
	var refused atomic.Int64
	addr := startServer(t, h, ServerConfig{MaxConns: maxConns, OnEvict: func(r bool) {
		if r {
			refused.Add(1)
		}
	}})
	results := make(chan int, maxConns)
	for range maxConns {
		go func() {
			resp, err := (&http.Client{Timeout: 20 * time.Second}).Get("http://" + addr + "/block")
			if err != nil {
				results <- 0
				return
			}
			resp.Body.Close()
			results <- resp.StatusCode
		}()
	}
	for range maxConns {
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
			t.Fatal("the blocking requests never arrived")
		}
	}
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	if _, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a connection past the cap with every slot busy: %v, want it closed at once", err)
	}
	if refused.Load() == 0 {
		t.Error("OnEvict never reported the refused connection")
	}
	close(release)
	for range maxConns {
		if code := <-results; code != http.StatusOK {
			t.Errorf("a request in flight: %d, want 200", code)
		}
	}
	// A client has its reply a moment before net/http marks the
	// connection idle (evictable): until then a new one is still refused.
	testkit.Eventually(t, 10*time.Second, 20*time.Millisecond, "a new connection served after the busy requests", func() (string, bool) {
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := client.Get("http://" + addr + "/healthz")
		if err != nil {
			return err.Error(), false
		}
		resp.Body.Close()
		return resp.Status, resp.StatusCode == http.StatusOK
	})
}
