package test

// The admin endpoint that makes pgdns forget an abandoned timeline (issue
// 22, case 7), against real PostgreSQL.

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// post sends POST path to e's HTTP API with the bearer token (none when
// "") and returns the status and body.
func (e *env) post(t *testing.T, path, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+e.app.HTTPAddr()+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A replica promoted while the old primary keeps running makes timeline
// 2 the newest; then it is gone for good (its server destroyed, say). The
// old primary, writable on timeline 1 with a replica following it, is
// rightly never answered again, and would not be for as long as pgdns
// runs, nor after a restart with its state. An operator who knows that
// timeline 2 is abandoned tells pgdns to forget it, with the admin token;
// without the token, or with a wrong one, nothing changes.
func TestForgetTimeline(t *testing.T) {
	t.Parallel()
	ips := pgtest.Addrs(t).IPs(3)
	pg := pgtest.New(t, pgtest.Options{IPs: ips})
	old, promoted, replica := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	dir := t.TempDir()
	tokenFile, statePath := filepath.Join(dir, "admin-token"), filepath.Join(dir, "state.json")
	if err := os.WriteFile(tokenFile, []byte("s3cret-admin-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := attach(t, pg, envOptions{AdminTokenFile: tokenFile, State: statePath})
	off := attach(t, pg, envOptions{}) // no token configured
	ctx := context.Background()
	if err := promoted.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", []string{promoted.IP})
	off.waitFor(t, "primary.db.local.", []string{promoted.IP})
	waitState(t, statePath, "timeline 2", func(tl uint32) bool { return tl == 2 })
	if err := promoted.Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", nil)
	e.holds(t, "primary.db.local.", time.Second, exactly(), "the superseded primary")

	const forget = "/v1/admin/forget-timeline?cluster=main&timeline=2"
	for _, c := range []struct {
		what, path, token string
		code              int
		body              string
	}{
		{"endpoint off", forget, "s3cret-admin-token", 404, "http.admin_token_file is not set"},
		{"no token", forget, "", 401, "a valid bearer token is required"},
		{"wrong token", forget, "s3cret-admin-tokeX", 401, "a valid bearer token is required"},
		{"a prefix of the token", forget, "s3cret", 401, "a valid bearer token is required"},
		{"no timeline", "/v1/admin/forget-timeline?cluster=main", "s3cret-admin-token", 400, "give cluster=NAME and timeline=N"},
		{"unknown cluster", "/v1/admin/forget-timeline?cluster=nope&timeline=2", "s3cret-admin-token", 404, "no such cluster: nope"},
		{"a timeline never proven", "/v1/admin/forget-timeline?cluster=main&timeline=3", "s3cret-admin-token", 409, "timeline 3, newest 2"},
	} {
		target := e
		if c.what == "endpoint off" {
			target = off
		}
		code, body := target.post(t, c.path, c.token)
		if code != c.code || !strings.Contains(body, c.body) {
			t.Errorf("%s: %d %s, want %d with %q", c.what, code, body, c.code, c.body)
		}
	}
	if code, _ := e.get(t, http.DefaultClient, forget, ""); code != http.StatusMethodNotAllowed {
		t.Errorf("GET %s: %d, want 405", forget, code)
	}
	e.holds(t, "primary.db.local.", time.Second, exactly(), "the superseded primary after refused requests")
	if !strings.Contains(e.logs.String(), "admin: request refused: missing or wrong bearer token") {
		t.Errorf("refused requests are not logged:\n%s", e.logs)
	}

	code, body := e.post(t, forget, "s3cret-admin-token")
	if code != 200 || !strings.Contains(body, `"newest_timeline_after":1`) || !strings.Contains(body, `"newest_timeline_before":2`) {
		t.Fatalf("forget: %d %s", code, body)
	}
	e.waitFor(t, "primary.db.local.", []string{old.IP})
	e.waitFor(t, "replica.db.local.", []string{replica.IP})
	waitState(t, statePath, "timeline 1 again", func(tl uint32) bool { return tl == 1 })
	if !strings.Contains(e.logs.String(), `msg="admin: timeline forgotten by an operator" cluster=main timeline=2 newest_before=2 newest_after=1`) {
		t.Errorf("forgetting is not logged:\n%s", e.logs)
	}
	off.holds(t, "primary.db.local.", time.Second, exactly(), "the superseded primary on an instance nobody told")
}
