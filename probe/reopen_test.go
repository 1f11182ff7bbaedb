package probe

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// A watched idle session ended by pg_terminate_backend (57P01, which a
// fast shutdown also sends) is told from a shutdown by a new session, and
// only a refusal of that session (connection refused, 57P03: what a
// stopping or crashed server does at once) proves the server gone. A new
// session that fails otherwise, the server's own answer at its login
// (the role may not log in, or has no connection left: a password or
// role being changed) or a connect_timeout (a startup stuck behind a
// catalog lock), proves nothing: Watch hands it to the next probe, not
// taking the host out of the answers, as a probe's own retry does
// (check.go, retry). A crash still takes it out at once.
func TestWatchLeavesAnAmbiguousNewSessionToTheProbe(t *testing.T) {
	t.Parallel()
	cl := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(1)})
	node := cl.Nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	node.Exec(t, "CREATE ROLE prober LOGIN IN ROLE pg_monitor")
	const dsn = "user=prober dbname=postgres sslmode=disable connect_timeout=1"
	terminate := func(t *testing.T, q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) {
		t.Helper()
		var n int
		if err := q.QueryRow(ctx, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'pgdns'").Scan(&n); err != nil || n != 1 {
			t.Fatalf("terminated %d pgdns sessions (%v), want 1", n, err)
		}
	}
	ambiguous := func(t *testing.T, early bool, err error, want string) {
		t.Helper()
		if err == nil || errors.Is(err, ErrNotServing) || !early || !strings.Contains(err.Error(), want) {
			t.Fatalf("Watch returned %v (before its context ended: %v); want a failure that is not definitive, saying %q, at once", err, early, want)
		}
	}
	for _, c := range []struct {
		what, alter, undo, want string
	}{
		{"the role may not log in (28000)", "ALTER ROLE prober NOLOGIN", "ALTER ROLE prober LOGIN", `role "prober" is not permitted to log in`},
		{"no connection left for the role (53300)", "ALTER ROLE prober CONNECTION LIMIT 0", "ALTER ROLE prober CONNECTION LIMIT -1", `too many connections for role "prober"`},
	} {
		t.Run(c.what, func(t *testing.T) {
			pc := pgCheckerOf(t, dsn, node.Addr())
			admin := node.Conn(t)
			early, err := watchThrough(t, ctx, pc, 20*time.Second, func() {
				if _, err := admin.Exec(ctx, c.alter); err != nil {
					t.Fatal(err)
				}
				terminate(t, admin)
			})
			if _, uerr := admin.Exec(ctx, c.undo); uerr != nil {
				t.Fatal(uerr)
			}
			ambiguous(t, early, err, c.want)
			if _, err := pc.Check(ctx); err != nil {
				t.Fatalf("the probe after the login was allowed again: %v", err)
			}
		})
	}
	t.Run("connect_timeout, the new session stuck in its startup", func(t *testing.T) {
		pc := pgCheckerOf(t, dsn, node.Addr())
		// A new session reads pg_authid to log in: one held exclusively
		// keeps it in its startup until the lock goes.
		locker := node.Conn(t)
		tx, err := locker.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		early, err := watchThrough(t, ctx, pc, 20*time.Second, func() {
			if _, err := tx.Exec(ctx, "LOCK TABLE pg_authid IN ACCESS EXCLUSIVE MODE"); err != nil {
				t.Fatal(err)
			}
			terminate(t, tx)
		})
		if rerr := tx.Rollback(ctx); rerr != nil {
			t.Fatal(rerr)
		}
		ambiguous(t, early, err, "connect: context deadline exceeded")
		if _, err := pc.Check(ctx); err != nil {
			t.Fatalf("the probe after the lock went: %v", err)
		}
	})
	t.Run("a crash refuses the new session: definitive at once", func(t *testing.T) {
		pc := pgCheckerOf(t, dsn, node.Addr())
		early, err := watchThrough(t, ctx, pc, 20*time.Second, func() {
			if err := node.KillPostmaster(); err != nil {
				t.Fatal(err)
			}
		})
		if !errors.Is(err, ErrNotServing) || !early {
			t.Fatalf("the postmaster killed: Watch returned %v (before its context ended: %v), want a definitive failure at once", err, early)
		}
	})
}
