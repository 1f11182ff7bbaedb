package probe

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// heldProbe is a probe started by startProbe or probeHeld: its outcome
// comes on done; cancel ends its context; server, when set, says what the
// server's sessions wait for, should the probe not return.
type heldProbe struct {
	done   <-chan error
	cancel context.CancelFunc
	server func() string
}

// startProbe starts a probe of c under a context of its own, which
// wantProbed ends when the probe does not return; the sessions and locks
// of the server of locker (a session that is not the probe's) are shown
// then.
func startProbe(ctx context.Context, c Checker, locker *pgx.Conn) heldProbe {
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c.Check(pctx)
		done <- err
	}()
	return heldProbe{done: done, cancel: cancel, server: func() string { return serverWaits(locker) }}
}

// probeHeld starts a probe of c that waits in its query behind locker's
// lock, returns once the server shows it waiting, and gives the probe's
// outcome on the channel (startProbe).
func probeHeld(t *testing.T, ctx context.Context, c Checker, locker *pgx.Conn) heldProbe {
	t.Helper()
	p := startProbe(ctx, c, locker)
	testkit.Eventually(t, 10*time.Second, 10*time.Millisecond, "the probe to wait for the lock (pgdns sessions waiting)", func() (int, bool) {
		var n int
		if err := locker.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgdns' AND wait_event_type = 'Lock'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n, n == 1
	})
	return p
}

// wantProbed waits for a probe's outcome and fails t unless it
// succeeded. A probe that does not return is stopped (its context ended)
// and waited for before t fails, so that no later case's Check runs beside
// it on the same checker (a data race that hid the hang before); the
// failure shows where the probe's goroutines were and what the server's
// sessions waited for.
func wantProbed(t *testing.T, p heldProbe, what string) {
	t.Helper()
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("%s: the probe failed with %v, while the server serves", what, err)
		}
	case <-time.After(20 * time.Second):
		stacks := probeStacks()
		server := p.server()
		p.cancel()
		select {
		case err := <-p.done:
			t.Fatalf("%s: the probe did not return in 20 s (it returned %v once its context ended); the server's sessions then:\n%s\nits goroutines then:\n%s", what, err, server, stacks)
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the probe did not return in 20 s, nor 10 s after its context ended; the server's sessions then:\n%s\nits goroutines then:\n%s", what, server, stacks)
		}
	}
}

// serverWaits lists the sessions of conn's server (pg_stat_activity: what
// each runs and waits for) and its locks not granted or on pg_authid, on
// conn (an open session: a new one would wait in its startup behind a
// lock on pg_authid), for a failure to show what a probe that does not
// return waits for.
func serverWaits(conn *pgx.Conn) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out strings.Builder
	for _, q := range []string{
		`SELECT pid, backend_type, coalesce(application_name, ''), coalesce(client_addr::text, ''), coalesce(state, ''),
		        coalesce(wait_event_type, '') || ' ' || coalesce(wait_event, ''), left(coalesce(query, ''), 80)
		   FROM pg_stat_activity WHERE pid <> pg_backend_pid()`,
		`SELECT pid, locktype, coalesce(relation::regclass::text, ''), mode, granted::text, '', ''
		   FROM pg_locks WHERE NOT granted OR relation = 'pg_catalog.pg_authid'::regclass`,
	} {
		rows, err := conn.Query(ctx, q)
		if err != nil {
			fmt.Fprintf(&out, "%v\n", err)
			continue
		}
		for rows.Next() {
			var pid int
			var c [6]string
			if err := rows.Scan(&pid, &c[0], &c[1], &c[2], &c[3], &c[4], &c[5]); err != nil {
				fmt.Fprintf(&out, "%v\n", err)
				break
			}
			fmt.Fprintf(&out, "%d %q\n", pid, c)
		}
		rows.Close()
	}
	return out.String()
}

// probeStacks is the stack of every goroutine in the probe package or
// the test proxy, for a failure to show where a probe waits.
func probeStacks() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "probe.(*") || strings.Contains(g, "testkit.(*Proxy)") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// A probe whose own session ends under it without proof that the server
// stopped (review 5, F11 and F6) probes on a new session instead of
// failing definitively: pg_terminate_backend sends the same 57P01 as a
// fast shutdown, and a middlebox's reset or end of the connection is no
// word from the server at all. A fast shutdown under a probe is still
// definitive at once: its new session is refused.
func TestProbeSurvivesItsSessionsEndMidQuery(t *testing.T) {
	t.Parallel()
	cl := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(1)})
	node := cl.Nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	direct := pgCheckerOf(t, "user=postgres dbname=postgres sslmode=disable", node.Addr())
	if _, err := direct.Check(ctx); err != nil {
		t.Fatal(err)
	}
	proxy := testkit.StartProxy(t, pgtestAddr(t), node.Addr(), 0)
	proxied := pgCheckerOf(t, "user=postgres dbname=postgres sslmode=disable", proxy.Addr())
	if _, err := proxied.Check(ctx); err != nil {
		t.Fatal(err)
	}
	locker, err := pgx.Connect(ctx, node.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(context.Background())
	// lock holds the probe's next query on c, whose session is opened
	// first (a new session would wait in its startup).
	// Each takes the case's t: a failure fails the case, not the test
	// from inside the case's goroutine. The probe before the lock is
	// watched as the held ones are: it once did not return (the fast
	// shutdown case's, the first to open a new session, under load 20).
	lock := func(t *testing.T, c Checker) {
		t.Helper()
		wantProbed(t, startProbe(ctx, c, locker), "the probe before the lock")
		holdProbes(t, ctx, locker)
	}
	unlock := func(t *testing.T) {
		t.Helper()
		if _, err := locker.Exec(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
	}

	// A case that fails may leave a probe or the lock behind: the cases
	// after it would run beside them on the same checkers, so none runs.
	if !t.Run("pg_terminate_backend", func(t *testing.T) {
		proxied.Close() // one pgdns session on the server: the direct one
		lock(t, direct)
		held := probeHeld(t, ctx, direct, locker)
		var n int
		if err := locker.QueryRow(ctx, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'pgdns' AND wait_event_type = 'Lock'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Fatalf("terminated %d pgdns sessions, want 1", n)
		}
		unlock(t)
		wantProbed(t, held, "pgdns's session terminated mid-probe")
	}) {
		return
	}
	for _, rst := range []bool{true, false} {
		name := map[bool]string{true: "reset", false: "end of stream"}[rst]
		if !t.Run(name, func(t *testing.T) {
			direct.Close() // one pgdns session on the server: the proxied one
			lock(t, proxied)
			held := probeHeld(t, ctx, proxied, locker)
			proxy.Cut(rst)
			unlock(t)
			wantProbed(t, held, "the proxied connection cut mid-probe ("+name+")")
		}) {
			return
		}
	}
	t.Run("fast shutdown", func(t *testing.T) {
		proxied.Close()
		lock(t, direct)
		held := probeHeld(t, ctx, direct, locker)
		if err := node.Stop(context.Background(), "fast"); err != nil {
			t.Fatal(err)
		}
		wantNotServing(t, held.done, 10*time.Second, "a probe cut by a fast shutdown failed with %v, want a definitive failure", "the probe did not return after the fast shutdown")
	})
}
