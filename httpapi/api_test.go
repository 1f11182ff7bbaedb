package httpapi

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/zone"
	"github.com/pgdns/pgdns/zone/zonetest"
)

var t0 = zonetest.T0

// probed is t0 less 100 ms: when every host of testSnapshot was probed.
var probed = t0.Add(-100 * time.Millisecond)

// asAPISees gives h a system identifier that does not fit a JSON number,
// its receive position and (a primary's too) its lag known.
func asAPISees(h *zone.Host) {
	h.SystemID, h.ReceiveLSN = 7000000000000000001, h.ReplayLSN
	h.LagKnown, h.BytesKnown = true, true
}

// testSnapshot: zonetest.Main probed 100 ms before t0, its replica behind
// 1.2 s and 2 MB behind, and a down replica.
func testSnapshot() *zone.Snapshot {
	main := zonetest.Main(probed, 1200*time.Millisecond, 2_000_000)
	down := zonetest.Host("127.0.0.14", true, 0, probed)
	down.Fails, down.LastError = 3, "connect: connection refused"
	main.Hosts = append(main.Hosts, down)
	for i := range main.Hosts {
		asAPISees(&main.Hosts[i])
	}
	return zonetest.Ready(t0, 2*time.Second, main)
}

func newTestAPI(snap *zone.Snapshot) (*API, *zone.Table) {
	table := zone.NewTable()
	table.Store(snap)
	a := New(Config{Zone: "db.local", SyncMaxLag: time.Second, SyncMaxLagBytes: 1_000_000,
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "pgdns_ready 1\n") })},
		table, slog.New(slog.NewTextHandler(io.Discard, nil)))
	a.now = func() time.Time { return t0 }
	return a, table
}

func do(t *testing.T, h http.Handler, method, target string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestEndpoints(t *testing.T) {
	a, _ := newTestAPI(testSnapshot())
	cases := []struct {
		target      string
		accept      string
		code        int
		contentType string
		body        string // substring of the body
	}{
		{"/healthz", "", 200, "application/json", `"status":"ok"`},
		{"/readyz", "", 200, "application/json", `"ready":true`},
		{"/metrics", "", 200, "", "pgdns_ready 1"},
		{"/v1/hosts", "", 200, "application/json", `"addr":"127.0.0.12:5432","ip":"127.0.0.12","role":"replica","alive":true,"lag_ms":3`},
		{"/v1/hosts", "", 200, "application/json", `"system_identifier":"7000000000000000001"`},
		{"/v1/hosts", "", 200, "application/json", `"role":"down","alive":false,"lag_ms":null`},
		{"/v1/hosts", "", 200, "application/json", `"last_error":"connect: connection refused"`},
		{"/v1/resolve?name=lag-50ms.replica", "", 200, "application/json", `"rcode":"NOERROR"`},
		{"/v1/resolve?name=lag-50ms.replica", "", 200, "application/json", `{"addr":"127.0.0.13:5432","reason":"lag 1200ms \u003e 50ms"}`},
		{"/v1/resolve?name=lsn-0-3000060.replica.db.local.", "", 200, "application/json", `"reason":"replay 0/3000000 \u003c 0/3000060"`},
		{"/v1/resolve?name=LAG-2S.Standby", "", 200, "application/json", `"query":"lag-2000ms.replica"`},
		{"/v1/resolve?name=nope", "", 404, "application/json", `"rcode":"NXDOMAIN"`},
		{"/v1/resolve?name=primary.other", "", 404, "application/json", `"rcode":"NXDOMAIN"`},
		{"/v1/resolve?name=dc-nowhere.replica", "", 404, "application/json", `"rcode":"NXDOMAIN"`},
		{"/v1/resolve?name=example.com.", "", 400, "application/json", `"rcode":"REFUSED"`},
		{"/v1/resolve?name=primary.db.local.example.", "", 400, "application/json", `"rcode":"REFUSED"`},
		{"/v1/resolve?name=main", "", 200, "application/json", `"query":"main","rcode":"NOERROR"`},
		{"/v1/resolve?name=main.db.local.", "", 200, "application/json", `"rcode":"NOERROR","answer":[]`},
		{"/v1/resolve", "", 400, "application/json", `"error":"name must be given`},
		{"/v1/resolve?name=" + strings.Repeat("a", 300), "", 400, "application/json", `at most 253`},
		{"/v1/resolve?name=a&name=b", "", 400, "application/json", `more than once`},
		{"/v1/resolve?name=%zz", "", 400, "application/json", `malformed query string`},
		{"/v1/resolve?nmae=primary", "", 400, "application/json", `unknown parameter \"nmae\"`},
		{"/v1/hosts?x=1", "", 400, "application/json", `takes no parameters`},

		{"/master", "", 200, "text/plain", "127.0.0.11"},
		{"/master", "application/json", 200, "application/json", `"host":"127.0.0.11","name":"127-0-0-11-5432.host.main.db.local","port":5432`},
		{"/replica?lag_ms=50", "", 200, "text/plain", "127.0.0.12"},
		{"/replica?lag_bytes=100", "", 200, "text/plain", "127.0.0.12"},
		{"/replica?min_lsn=0/3000060", "", 200, "text/plain", "127.0.0.12"},
		{"/replica?min_lsn=0/3000061", "", 200, "text/plain", "127.0.0.11"}, // falls back to the master
		{"/sync_by_time", "", 200, "text/plain", "127.0.0.12"},
		{"/sync_by_time?lag_ms=5000", "", 200, "text/plain", "127.0.0."},
		{"/sync_by_bytes", "", 200, "text/plain", "127.0.0.12"},
		{"/sync_by_time_and_bytes?lag_ms=0", "", 200, "text/plain", "127.0.0.11"},
		{"/most_sync_by_bytes", "", 200, "text/plain", "127.0.0.12"},
		{"/most_sync_by_bytes?lag_bytes=0&min_lsn=0/3000061", "", 200, "text/plain", "127.0.0.11"},
		{"/hosts", "", 200, "application/json", `{"host":"127.0.0.13","port":5432,"cluster":"main","dc":null,"geo":null,"master":false,"alive":true,"lag_ms":1200,"sync_by_time":false,"lag_bytes":2000000,"sync_by_bytes":false,"lsn":"0/3000000","name":"127-0-0-13-5432.host.main.db.local"}`},
		{"/replica?lag_ms=-1", "", 400, "application/json", `{"error_text":"Invalid lag_ms"}`},
		{"/replica?lag_ms=abc", "application/json", 400, "application/json", `{"error_text":"Invalid lag_ms"}`},
		{"/sync_by_bytes?lag_bytes=1e6", "", 400, "application/json", `{"error_text":"Invalid lag_bytes"}`},
		{"/replica?lag_ms=99999999999999999999999", "", 400, "application/json", `Invalid lag_ms`},
		{"/replica?min_lsn=zz", "", 400, "application/json", `{"error_text":"Invalid min_lsn"}`},
		{"/replica?cluster=nope", "", 400, "application/json", `Invalid cluster`},
		{"/replica?" + strings.Repeat("x", 2000), "", 400, "application/json", `too long`},

		{"/nope", "", 404, "application/json", `"error":"no such endpoint: /nope"`},
		{"/v1/hosts/", "", 404, "application/json", `no such endpoint`},
	}
	for _, tc := range cases {
		t.Run(tc.target, func(t *testing.T) {
			w := do(t, a, "GET", tc.target, "Accept", tc.accept)
			if w.Code != tc.code {
				t.Errorf("status %d, want %d; body %s", w.Code, tc.code, w.Body)
			}
			if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, tc.contentType) {
				t.Errorf("Content-Type %q, want %q", ct, tc.contentType)
			}
			if !strings.Contains(w.Body.String(), tc.body) {
				t.Errorf("body %s does not contain %s", w.Body, tc.body)
			}
			if tc.contentType == "application/json" && !json.Valid(w.Body.Bytes()) {
				t.Errorf("body is not JSON: %s", w.Body)
			}
		})
	}
}

// /v1/hosts says why a live host is set aside as a word, beside the note.
func TestHostsShowAside(t *testing.T) {
	s := testSnapshot()
	c := s.Clusters[0]
	c.Hosts[1].InRecovery = false // a second writable host on timeline 1
	c.Decide(t0, 2*time.Second, 3)
	a, _ := newTestAPI(s)
	body := do(t, a, "GET", "/v1/hosts").Body.String()
	for _, want := range []string{`"addr":"127.0.0.11:5432"`, `"addr":"127.0.0.12:5432"`} {
		i := strings.Index(body, want)
		if i < 0 || !strings.Contains(body[i:i+strings.Index(body[i:], "}")], `"aside":"split_brain","note":"split brain: 2 writable hosts`) {
			t.Errorf("%s is not shown set aside for split brain: %s", want, body)
		}
	}
	// The replica on the split timeline is set aside with them (review 7,
	// H10); a host that is down shows no aside, but its error.
	i := strings.Index(body, `"addr":"127.0.0.13:5432"`)
	if i < 0 || !strings.Contains(body[i:i+strings.Index(body[i:], "}")], `"aside":"split_brain","note":"split brain on timeline 1: its branch may be lost`) {
		t.Errorf("the replica on the split timeline is not shown set aside for it: %s", body)
	}
	if strings.Contains(body[strings.Index(body, `"addr":"127.0.0.14:5432"`):], `"aside"`) {
		t.Errorf("a host that is down shows an aside: %s", body)
	}
}

func TestMethodNotAllowed(t *testing.T) {
	a, _ := newTestAPI(testSnapshot())
	for _, method := range []string{"POST", "PUT", "DELETE", "PATCH"} {
		w := do(t, a, method, "/master")
		if w.Code != 405 || w.Header().Get("Allow") != "GET, HEAD" || !json.Valid(w.Body.Bytes()) {
			t.Errorf("%s: %d %q %s", method, w.Code, w.Header().Get("Allow"), w.Body)
		}
	}
	if w := do(t, a, "HEAD", "/healthz"); w.Code != 200 {
		t.Errorf("HEAD: %d", w.Code)
	}
}

func TestNotReady(t *testing.T) {
	a, _ := newTestAPI(&zone.Snapshot{})
	for target, code := range map[string]int{
		"/healthz": 200, "/readyz": 503, "/master": 503, "/replica?lag_ms=x": 503, "/hosts": 503,
		"/v1/resolve?name=primary": 503, "/v1/hosts": 200,
	} {
		if w := do(t, a, "GET", target); w.Code != code {
			t.Errorf("%s before the first round: %d, want %d (%s)", target, w.Code, code, w.Body)
		}
	}
	w := do(t, a, "GET", "/master", "Accept", "application/json")
	if w.Body.String() != "{\"error_text\":\"pg_monitor is not ready\"}\n" {
		t.Errorf("pg-status not-ready body %q", w.Body)
	}
}

func TestNoHostAtAll(t *testing.T) {
	s := testSnapshot()
	for i := range s.Clusters[0].Hosts {
		s.Clusters[0].Hosts[i].Fails = 3
	}
	s.Clusters[0].Decide(t0, 2*time.Second, 3)
	a, _ := newTestAPI(s)
	if w := do(t, a, "GET", "/replica"); w.Code != 404 || w.Body.Len() != 0 {
		t.Errorf("plain: %d %q", w.Code, w.Body)
	}
	if w := do(t, a, "GET", "/master", "Accept", "application/json"); w.Code != 404 || w.Body.String() != "{\"host\":null}\n" {
		t.Errorf("json: %d %q", w.Code, w.Body)
	}
}

// pg-status answers the first fitting replica on /sync_by_*; pgdns
// rotates among them on every endpoint.
func TestRoundRobin(t *testing.T) {
	a, _ := newTestAPI(testSnapshot())
	for _, target := range []string{"/replica", "/sync_by_time?lag_ms=5000", "/sync_by_bytes?lag_bytes=3000000",
		"/sync_by_time_or_bytes?lag_ms=0&lag_bytes=3000000", "/sync_by_time_and_bytes?lag_ms=5000&lag_bytes=3000000"} {
		seen := map[string]bool{}
		for range 4 {
			seen[do(t, a, "GET", target).Body.String()] = true
		}
		if len(seen) != 2 || !seen["127.0.0.12"] || !seen["127.0.0.13"] {
			t.Errorf("%s answered %v", target, seen)
		}
	}
	// most_sync_by_bytes is deterministic: the least byte lag.
	for range 3 {
		if got := do(t, a, "GET", "/most_sync_by_bytes?lag_bytes=3000000").Body.String(); got != "127.0.0.12" {
			t.Errorf("most_sync_by_bytes = %q", got)
		}
	}
}

func TestPanicBecomes500(t *testing.T) {
	a, _ := newTestAPI(&zone.Snapshot{Ready: true, Clusters: []*zone.Cluster{nil}, Default: "main"})
	w := do(t, a, "GET", "/master")
	if w.Code != 500 || !json.Valid(w.Body.Bytes()) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}

func TestOnRequestCountsRoutes(t *testing.T) {
	a, _ := newTestAPI(testSnapshot())
	got := map[string]int{}
	a.cfg.OnRequest = func(route string, code int) { got[route+" "+http.StatusText(code)]++ }
	do(t, a, "GET", "/master")
	do(t, a, "GET", "/random/path/1")
	do(t, a, "POST", "/master")
	for _, want := range []string{"/master OK", "unknown Not Found", "/master Method Not Allowed"} {
		if got[want] != 1 {
			t.Errorf("%q counted %d times: %v", want, got[want], got)
		}
	}
}

// Garbage of every kind in paths, parameters and headers gets a clear
// 4xx, never a 500 or a panic.
func TestGarbageNeverFails(t *testing.T) {
	a, _ := newTestAPI(testSnapshot())
	paths := []string{"/master", "/replica", "/sync_by_time", "/most_sync_by_bytes", "/hosts", "/v1/resolve", "/v1/hosts", "/readyz"}
	values := []string{"", "-", "0", "1e9", "%00", "%ff%fe", "0/", "/0", "ffffffff/ffffffff", "100000000/0",
		strings.Repeat("9", 40), "lag-1ms.lag-2ms.replica", "..", "é", "a b", "\u0000"}
	keys := []string{"lag_ms", "lag_bytes", "min_lsn", "name", "cluster", "x", ""}
	n := 0
	for _, p := range paths {
		for _, k := range keys {
			for _, v := range values {
				target := p + "?" + k + "=" + strings.ReplaceAll(v, " ", "%20")
				r := httptest.NewRequest("GET", "/", nil)
				r.URL.Path, r.URL.RawQuery = p, strings.TrimPrefix(target, p+"?")
				r.Header.Set("Accept", "application/json")
				w := httptest.NewRecorder()
				a.ServeHTTP(w, r)
				if w.Code >= 500 {
					t.Errorf("%s: %d %s", target, w.Code, w.Body)
				}
				n++
			}
		}
	}
	t.Logf("%d requests, no 5xx", n)
}
