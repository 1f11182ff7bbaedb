package app

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// TestPprofLoopbackOnly: the profiles are served beside the API on a
// loopback listener and nowhere else; the API's own routes are unchanged.
func TestPprofLoopbackOnly(t *testing.T) {
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	for _, tc := range []struct {
		listen string
		pprof  bool
	}{
		{"localhost:8080", true},
		{"[::1]:8080", true},
		{"192.0.2.1:8080", false},
		{"0.0.0.0:8080", false},
		{":8080", false},
		{"[::]:8080", false},
	} {
		h := withPprof(tc.listen, api)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/debug/pprof/", nil))
		if got := rec.Code == http.StatusOK; got != tc.pprof {
			t.Errorf("%s: /debug/pprof/ answered %d, want pprof served: %v", tc.listen, rec.Code, tc.pprof)
		}
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/hosts", nil))
		if rec.Code != http.StatusTeapot {
			t.Errorf("%s: /v1/hosts did not reach the API (%d)", tc.listen, rec.Code)
		}
	}
}

// TestHostCheckCoversPprof (issue 29.9): the Host check stands in front of
// everything the HTTP listener serves, /debug/pprof/ (mounted here, not in
// httpapi) and /metrics included: a rebound name gets 421, the listener's
// own address (what the kubelet and Prometheus send) and localhost pass.
func TestHostCheckCoversPprof(t *testing.T) {
	bl := pgtest.Addrs(t)
	a, _, _ := startApp(t, fmt.Sprintf("dns: {listen: %q}\nhttp: {listen: %q}\nclusters:\n  main:\n    hosts: [%s]\n",
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
