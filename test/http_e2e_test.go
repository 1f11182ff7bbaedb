package test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/testkit"
)

// get fetches path from the HTTP API and returns status and body.
func (e *env) get(t *testing.T, client *http.Client, path string, accept string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+e.app.HTTPAddr()+path, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// eventually polls GET path until check accepts the body.
func (e *env) eventually(t *testing.T, path, accept string, check func(code int, body string) bool) string {
	t.Helper()
	var code int
	var body string
	testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "GET "+path+" to pass (status, body)", func() (string, bool) {
		code, body = e.get(t, http.DefaultClient, path, accept)
		return fmt.Sprintf("%d %s", code, body), check(code, body)
	})
	return body
}

// TestHTTPAgainstRealCluster runs the JSON API and the pg-status endpoints
// against a real primary with two replicas, one of which stops replaying.
func TestHTTPAgainstRealCluster(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	p, r1, r2 := e.ip(0), e.ip(1), e.ip(2)
	primary, paused := e.pg.Nodes[0], e.pg.Nodes[2]
	primary.Exec(t, "CREATE TABLE t (id serial PRIMARY KEY, v text)")
	e.waitFor(t, "lag-500ms.replica.db.local.", []string{r1, r2})

	t.Run("readyz and v1/hosts", func(t *testing.T) {
		if code, body := e.get(t, http.DefaultClient, "/readyz", ""); code != 200 {
			t.Fatalf("readyz %d %s", code, body)
		}
		_, body := e.get(t, http.DefaultClient, "/v1/hosts", "")
		var hosts struct {
			Ready bool `json:"ready"`
			Hosts []struct {
				Addr, Role, SystemID string
				Alive                bool
				Timeline             int
			} `json:"hosts"`
		}
		if err := json.Unmarshal([]byte(body), &hosts); err != nil {
			t.Fatal(err)
		}
		if !hosts.Ready || len(hosts.Hosts) != 3 || hosts.Hosts[0].Role != "primary" || hosts.Hosts[1].Role != "replica" ||
			!hosts.Hosts[2].Alive || hosts.Hosts[2].Timeline != 1 {
			t.Fatalf("v1/hosts: %s", body)
		}
	})

	t.Run("pg-status endpoints on a healthy cluster", func(t *testing.T) {
		if _, body := e.get(t, http.DefaultClient, "/master", ""); body != p {
			t.Errorf("/master = %q", body)
		}
		if _, body := e.get(t, http.DefaultClient, "/master", "application/json"); !strings.Contains(body, `"host":"`+p+`"`) {
			t.Errorf("/master as JSON = %q", body)
		}
		seen := map[string]bool{}
		for range 6 {
			_, body := e.get(t, http.DefaultClient, "/sync_by_time", "")
			seen[body] = true
		}
		if !seen[r1] || !seen[r2] || len(seen) != 2 {
			t.Errorf("/sync_by_time rotated over %v", seen)
		}
	})

	paused.Exec(t, "SELECT pg_wal_replay_pause()")
	conn := primary.Conn(t)
	var lsn string
	if _, err := conn.Exec(context.Background(), "INSERT INTO t (v) SELECT repeat('x', 1000) FROM generate_series(1, 2000)"); err != nil {
		t.Fatal(err)
	}
	// After the commit, as a read-your-writes client takes it.
	if err := conn.QueryRow(context.Background(), "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	steadyWrites(t, conn)

	t.Run("resolve explains every host left out", func(t *testing.T) {
		body := e.eventually(t, "/v1/resolve?name=lag-500ms.replica", "", func(code int, body string) bool {
			return code == 200 && strings.Contains(body, `"addr":"`+r2+`:5432","reason":"lag `)
		})
		if !strings.Contains(body, `"addr":"`+p+`:5432","reason":"primary: not a replica"`) || !strings.Contains(body, `"ip":"`+r1+`"`) {
			t.Errorf("resolve: %s", body)
		}
		body = e.eventually(t, "/v1/resolve?name=lsn-"+lsnLabel(lsn)+".replica", "", func(code int, body string) bool {
			return code == 200 && strings.Contains(body, `"ip":"`+r1+`"`)
		})
		if !strings.Contains(body, `"reason":"replay `) {
			t.Errorf("resolve lsn: %s", body)
		}
	})

	// The requests of pg-status's README, with its answers' shapes.
	t.Run("pg-status compatibility", func(t *testing.T) {
		// Wait until the paused replica is more than 1 s behind, the
		// default threshold of the /sync_by_* endpoints.
		e.eventually(t, "/v1/resolve?name=lag-1000ms.replica", "", func(code int, body string) bool {
			return code == 200 && strings.Contains(body, `"addr":"`+r2+`:5432","reason":"lag `)
		})
		for _, path := range []string{"/replica?lag_ms=500", "/replica?lag_bytes=100000", "/replica?min_lsn=" + lsn,
			"/sync_by_bytes", "/sync_by_time_or_bytes", "/sync_by_time_and_bytes", "/most_sync_by_bytes",
			"/sync_by_time?lag_ms=500", "/most_sync_by_bytes?lag_bytes=100000&min_lsn=" + lsn} {
			// The live replica is answered. For a moment it may not
			// be: when its lag cannot be vouched for yet (its newest
			// replay is past the primary's newest sample on a slow
			// machine), pgdns fails closed to the master, as pg-status
			// does for "no replica fits". The paused replica never is.
			e.eventually(t, path, "", func(code int, body string) bool {
				if code != 200 || (body != r1 && body != p) {
					t.Errorf("%s = %d %q, want %s (or the master %s while r1's lag is unproven)", path, code, body, r1, p)
					return true
				}
				return body == r1
			})
			for range 3 {
				code, body := e.get(t, http.DefaultClient, path, "")
				if code != 200 || (body != r1 && body != p) {
					t.Errorf("%s = %d %q, want %s (or the master %s while r1's lag is unproven)", path, code, body, r1, p)
				}
			}
		}
		if code, body := e.get(t, http.DefaultClient, "/replica?min_lsn=FFFFFFFF/0", ""); code != http.StatusNotFound || body != "" {
			t.Errorf("min_lsn beyond the master's reach: %d %q, want 404 and no host (the master lacks it too)", code, body)
		}
		code, body := e.get(t, http.DefaultClient, "/replica?lag_ms=abc", "application/json")
		if code != 400 || body != "{\"error_text\":\"Invalid lag_ms\"}\n" {
			t.Errorf("bad lag_ms: %d %q", code, body)
		}
		_, body = e.get(t, http.DefaultClient, "/hosts", "")
		var hosts []struct {
			Host       string  `json:"host"`
			Master     bool    `json:"master"`
			Alive      bool    `json:"alive"`
			LagMS      *int64  `json:"lag_ms"`
			SyncByTime bool    `json:"sync_by_time"`
			LSN        *string `json:"lsn"`
		}
		if err := json.Unmarshal([]byte(body), &hosts); err != nil || len(hosts) != 3 {
			t.Fatalf("/hosts: %v %s", err, body)
		}
		if !hosts[0].Master || hosts[1].Master || hosts[1].LSN == nil || hosts[2].SyncByTime {
			t.Errorf("/hosts: %s", body)
		}
	})

	t.Run("keep-alive", func(t *testing.T) {
		client := &http.Client{Transport: &http.Transport{}}
		reused := false
		for range 2 {
			req, _ := http.NewRequest("GET", "http://"+e.app.HTTPAddr()+"/master", nil)
			req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
				GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
			}))
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if !reused {
			t.Error("the second request did not reuse the connection")
		}
	})

	t.Run("metrics", func(t *testing.T) {
		e.query(t, "udp", "primary.db.local.", dns.TypeA)
		e.query(t, "udp", "nope.db.local.", dns.TypeA)
		wants := []string{
			`pgdns_dns_queries_total{rcode="NOERROR",role="primary"}`,
			`pgdns_dns_queries_total{rcode="NXDOMAIN",role="invalid"}`,
			`pgdns_probe_duration_seconds_bucket{cluster="main",le=`,
			`pgdns_host_probes_total{cluster="main",host="` + r1 + `:5432"}`,
			`pgdns_host_up{cluster="main",host="` + p + `:5432"} 1`,
			`pgdns_host_role{cluster="main",host="` + p + `:5432",role="primary"} 1`,
			`pgdns_host_lag_seconds{cluster="main",host="` + r2 + `:5432"}`,
			`pgdns_role_changes_total{cluster="main",from="unknown",to="replica"} `,
			`pgdns_http_requests_total{code="200",route="/master"}`,
			`pgdns_ready 1`,
		}
		// Answers are counted before they are sent; the HTTP counter and
		// the gauges may trail a request or a probe: wait, bounded.
		e.eventually(t, "/metrics", "", func(_ int, body string) bool {
			for _, want := range wants {
				if !strings.Contains(body, want) {
					return false
				}
			}
			// Each probe is counted by the host's own counters
			// (probe.Hooks.HostProbes), made at zero as the host's loop
			// starts.
			return !strings.Contains(body, `pgdns_host_probes_total{cluster="main",host="`+r1+`:5432"} 0`+"\n")
		})
	})
	paused.Exec(t, "SELECT pg_wal_replay_resume()")
}
