package httpapi

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/pgdns/pgdns/zone"
)

// POST /v1/admin/forget-fork takes the admin token as forget-timeline
// does, names what is missing in a 400, an unknown cluster or host in a
// 404, a host without a proof or still in the run proven in a 409, and
// says what it did.
func TestForgetForkEndpoint(t *testing.T) {
	const token = "s3cret-admin-token"
	f := &forgetter{}
	var logs strings.Builder
	a := New(Config{Zone: "db.local", Admin: f,
		AdminToken: func() ([]byte, error) { return []byte(token), nil }},
		zone.NewTable(), slog.New(slog.NewTextHandler(&logs, nil)))
	auth := []string{"Authorization", "Bearer " + token}
	for _, c := range []struct {
		what, method, path string
		header             []string
		code               int
		body               string
	}{
		{"no token", http.MethodPost, "/v1/admin/forget-fork?cluster=main&host=10.0.0.2:5432", nil, 401, "a valid bearer token is required"},
		{"wrong token", http.MethodPost, "/v1/admin/forget-fork?cluster=main&host=10.0.0.2:5432", []string{"Authorization", "Bearer nope"}, 401, "a valid bearer token is required"},
		{"GET", http.MethodGet, "/v1/admin/forget-fork?cluster=main&host=10.0.0.2:5432", auth, 405, "use POST"},
		{"nothing given", http.MethodPost, "/v1/admin/forget-fork", auth, 400, "give cluster=NAME and host=HOST:PORT (as the config lists it)"},
		{"no host", http.MethodPost, "/v1/admin/forget-fork?cluster=main", auth, 400, `"give host=HOST:PORT (as the config lists it)"`},
		{"no cluster", http.MethodPost, "/v1/admin/forget-fork?host=10.0.0.2:5432", auth, 400, `"give cluster=NAME"`},
		{"unknown cluster", http.MethodPost, "/v1/admin/forget-fork?cluster=nope&host=10.0.0.2:5432", auth, 404, "no such cluster: nope"},
		{"unknown host", http.MethodPost, "/v1/admin/forget-fork?cluster=main&host=10.0.0.9:5432", auth, 404, "no such host in cluster main: 10.0.0.9:5432"},
		{"no proof", http.MethodPost, "/v1/admin/forget-fork?cluster=main&host=10.0.0.3:5432", auth, 409, "10.0.0.3:5432: the host is not proven on another branch: nothing to forget"},
		{"the run proven", http.MethodPost, "/v1/admin/forget-fork?cluster=main&host=10.0.0.4:5432", auth, 409,
			"10.0.0.4:5432: nothing forgotten: its server run started at 2026-12-01T21:00:00Z is the one proven on another branch (another branch of timeline 1: …); rebuild it (re-clone it or pg_rewind it, then start it), then ask again"},
		{"done", http.MethodPost, "/v1/admin/forget-fork?cluster=main&host=10.0.0.2:5432", auth, 200, `"proven_run":"2026-12-01T21:00:00Z","server_started":"2026-12-01T21:01:00Z"`},
	} {
		f.calls = nil
		w := do(t, a, c.method, c.path, c.header...)
		body, _ := io.ReadAll(w.Body)
		if w.Code != c.code || !strings.Contains(string(body), c.body) {
			t.Errorf("%s: %d %s, want %d with %q", c.what, w.Code, body, c.code, c.body)
		}
		if (len(f.calls) != 0) != (c.code == 200) && c.what != "the run proven" {
			t.Errorf("%s: %d, and the prober was asked %v", c.what, w.Code, f.calls)
		}
	}
	for _, want := range []string{`msg="admin: request refused: missing or wrong bearer token" path=/v1/admin/forget-fork`,
		`msg="admin: fork proof forgotten by an operator" cluster=main host=10.0.0.2:5432 server_started=2026-12-01T21:01:00Z proven_run=2026-12-01T21:00:00Z`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no log line %s:\n%s", want, logs.String())
		}
	}
}
