package test

// A primary fenced with default_transaction_read_only = on (review 5, F3):
// libpq's target_session_attrs=read-write refuses it, so primary must not
// send writers there; reads go on. One cluster for every case.

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

func TestReadOnlyPrimaryIsNotPrimary(t *testing.T) {
	t.Parallel()
	psql := testkit.RequireTool(t, "psql")
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(2)})
	p, r := pg.Nodes[0], pg.Nodes[1]
	p.Exec(t, "CREATE ROLE pgdns LOGIN IN ROLE pg_monitor")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "the probe role on "+r.Name, func() (bool, bool) {
		var ok bool
		err := r.QueryOnce(ctx, "SELECT count(*) = 1 FROM pg_roles WHERE rolname = 'pgdns'", &ok)
		return ok, err == nil && ok
	})
	e := attach(t, pg, envOptions{DSN: "user=pgdns dbname=postgres sslmode=disable", Nodes: 2})
	e.waitFor(t, "replica.db.local.", []string{r.IP})

	// libpq's own verdict on the primary, the one pgdns must agree with.
	readWrite := func() error {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, psql, "hostaddr="+p.IP+" port=5432 user=postgres dbname=postgres sslmode=disable target_session_attrs=read-write connect_timeout=5",
			"-XAtqc", "SELECT 1")
		cmd.Env = append(os.Environ(), "PGOPTIONS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	fence := func(v string) {
		t.Helper()
		if v == "" {
			p.Exec(t, "ALTER SYSTEM RESET default_transaction_read_only")
		} else {
			p.Exec(t, "ALTER SYSTEM SET default_transaction_read_only = "+v)
		}
		p.Exec(t, "SELECT pg_reload_conf()")
	}
	resolveWhy := func(e *env, name string) string {
		t.Helper()
		_, body := e.get(t, http.DefaultClient, "/v1/resolve?name="+url.QueryEscape(name), "")
		i := strings.Index(body, `{"addr":"`+p.Addr()+`","reason":"`)
		if i < 0 {
			return "not excluded: " + body
		}
		return body[i:]
	}
	wantWhy := func(e *env, name, want string) {
		t.Helper()
		var why string
		if !testkit.Poll(10*time.Second, 50*time.Millisecond, func() bool {
			why = resolveWhy(e, name)
			return strings.Contains(why, want)
		}) {
			t.Errorf("/v1/resolve?name=%s for %s: %s, want %q", name, p.Addr(), why, want)
		}
	}
	if err := readWrite(); err != nil {
		t.Fatalf("libpq read-write refuses the primary before any fence: %v", err)
	}

	t.Run("ALTER SYSTEM SET default_transaction_read_only = on", func(t *testing.T) {
		fence("on")
		defer fence("")
		testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "libpq read-write refusing the fenced primary", func() (bool, bool) {
			err := readWrite()
			return err != nil, err != nil
		})
		// Before the fix: primary.db.local kept answering the primary.
		e.waitFor(t, "primary.db.local.", []string{})
		e.waitFor(t, "any.db.local.", []string{p.IP, r.IP})       // reads go on
		e.waitFor(t, "lag-10s.replica.db.local.", []string{r.IP}) // lags still measured against it
		wantWhy(e, "primary", "primary: refuses writes (read_only): default_transaction_read_only is on")
		if txt := e.txt(t, "any.db.local."); !slices.ContainsFunc(txt, func(s string) bool {
			return strings.HasPrefix(s, "host="+p.Addr()+" role=primary") && strings.Contains(s, "read_only=true")
		}) {
			t.Errorf("TXT any.db.local = %q, want the primary with read_only=true", txt)
		}
		if _, body := e.get(t, http.DefaultClient, "/master", ""); strings.Contains(body, p.IP) {
			t.Errorf("pg-status /master = %q, want no host", body)
		}
		fence("")
		e.waitFor(t, "primary.db.local.", []string{p.IP})
		if err := readWrite(); err != nil {
			t.Errorf("libpq read-write refuses the unfenced primary: %v", err)
		}
	})

	t.Run("a read-only probe role is pgdns's own, not the applications'", func(t *testing.T) {
		// A usual hardening of a monitoring role (review 5 F16): pgdns's
		// sessions are read-only, the applications' are not. Before the
		// fix primary.db.local answered nothing.
		p.Exec(t, "ALTER ROLE pgdns SET default_transaction_read_only = on")
		defer p.Exec(t, "ALTER ROLE pgdns RESET default_transaction_read_only")
		// A new pgdns: its sessions start with the role setting.
		e2 := launch(t, pg, envOptions{DSN: "user=pgdns dbname=postgres sslmode=disable"})
		e2.waitFor(t, "primary.db.local.", []string{p.IP})
		if err := readWrite(); err != nil {
			t.Fatalf("libpq read-write refuses the primary: %v", err)
		}
		if passed, ok := testkit.Holds(time.Second, 50*time.Millisecond, func() bool {
			return slices.Equal(e2.ips(t, "primary.db.local."), []string{p.IP})
		}); !ok {
			t.Fatalf("after %d lookups primary.db.local stopped answering the writable primary", passed)
		}
		_, body := e2.get(t, http.DefaultClient, "/v1/hosts", "")
		if !strings.Contains(body, `default_transaction_read_only=on\" is set by ALTER ROLE ... SET for pgdns's session`) ||
			!strings.Contains(body, "cannot be seen") || strings.Contains(body, `"read_only":true`) {
			t.Errorf("/v1/hosts does not say that pgdns's own setting hides a fence, or counts the primary read-only: %s", body)
		}
	})
}
