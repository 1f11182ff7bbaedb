package test

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/app/apptest"
	"github.com/pgdns/pgdns/internal/pgtest"
)

// TestHostCheckCoversPprof (issue 29.9): the Host check stands in front of
// everything the HTTP listener serves, /debug/pprof/ (mounted here, not in
// httpapi) and /metrics included: a rebound name gets 421, the listener's
// own address (what the kubelet and Prometheus send) and localhost pass.
func TestHostCheckCoversPprof(t *testing.T) {
	bl := pgtest.Addrs(t)
	a, _, _ := apptest.Start(t, fmt.Sprintf("dns: {listen: %q}\nhttp: {listen: %q}\nclusters:\n  main:\n    hosts: [%s]\n",
		bl.Addr(1, 0), bl.Addr(2, 0), bl.Addr(3, 5432)))
	client := &http.Client{Timeout: 10 * time.Second}
	status := func(path, host string) int {
		req, _ := http.NewRequest(http.MethodGet, "http://"+a.HTTPAddr()+path, nil)
		req.Host = host
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s (Host %s): %v", path, host, err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/metrics", "/v1/hosts", "/healthz", "/master", "/nothing"} {
		if code := status(path, "evil.example:8080"); code != http.StatusMisdirectedRequest {
			t.Errorf("GET %s with Host evil.example:8080: %d, want 421", path, code)
		}
	}
	for _, host := range []string{a.HTTPAddr(), "localhost:8080"} {
		for _, path := range []string{"/debug/pprof/", "/metrics", "/healthz"} {
			if code := status(path, host); code != http.StatusOK {
				t.Errorf("GET %s with Host %s: %d, want 200", path, host, code)
			}
		}
	}
}
