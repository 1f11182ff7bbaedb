package probe

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// heldProbe is a probe started by probeHeld: its outcome comes on done;
// cancel ends its context.
type heldProbe struct {
	done   <-chan error
	cancel context.CancelFunc
}

// probeHeld starts a probe of c that waits in its query behind locker's
// lock, returns once the server shows it waiting, and gives the probe's
// outcome on the channel. The probe runs under a context of its own, which
// wantProbed ends when the probe does not return.
func probeHeld(t *testing.T, ctx context.Context, c Checker, locker *pgx.Conn) heldProbe {
	t.Helper()
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c.Check(pctx)
		done <- err
	}()
	testkit.Eventually(t, 10*time.Second, 10*time.Millisecond, "the probe to wait for the lock (pgdns sessions waiting)", func() (int, bool) {
		var n int
		if err := locker.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgdns' AND wait_event_type = 'Lock'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n, n == 1
	})
	return heldProbe{done: done, cancel: cancel}
}

// wantProbed waits for a held probe's outcome and fails t unless it
// succeeded. A probe that does not return is stopped (its context ended)
// and waited for before t fails, so that no later case's Check runs beside
// it on the same checker (a data race that hid the hang before); the
// failure shows where the probe's goroutines were.
func wantProbed(t *testing.T, p heldProbe, what string) {
	t.Helper()
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("%s: the probe failed with %v, while the server serves", what, err)
		}
	case <-time.After(20 * time.Second):
		stacks := probeStacks()
		p.cancel()
		select {
		case err := <-p.done:
			t.Fatalf("%s: the probe did not return in 20 s (it returned %v once its context ended); its goroutines then:\n%s", what, err, stacks)
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the probe did not return in 20 s, nor 10 s after its context ended; its goroutines then:\n%s", what, stacks)
		}
	}
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
	lock := func(c Checker) {
		t.Helper()
		if _, err := c.Check(ctx); err != nil {
			t.Fatal(err)
		}
		holdProbes(t, ctx, locker)
	}
	unlock := func() {
		t.Helper()
		if _, err := locker.Exec(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
	}

	// A case that fails may leave a probe or the lock behind: the cases
	// after it would run beside them on the same checkers, so none runs.
	if !t.Run("pg_terminate_backend", func(t *testing.T) {
		proxied.Close() // one pgdns session on the server: the direct one
		lock(direct)
		held := probeHeld(t, ctx, direct, locker)
		var n int
		if err := locker.QueryRow(ctx, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'pgdns' AND wait_event_type = 'Lock'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Fatalf("terminated %d pgdns sessions, want 1", n)
		}
		unlock()
		wantProbed(t, held, "pgdns's session terminated mid-probe")
	}) {
		return
	}
	for _, rst := range []bool{true, false} {
		name := map[bool]string{true: "reset", false: "end of stream"}[rst]
		if !t.Run(name, func(t *testing.T) {
			direct.Close() // one pgdns session on the server: the proxied one
			lock(proxied)
			held := probeHeld(t, ctx, proxied, locker)
			proxy.Cut(rst)
			unlock()
			wantProbed(t, held, "the proxied connection cut mid-probe ("+name+")")
		}) {
			return
		}
	}
	t.Run("fast shutdown", func(t *testing.T) {
		proxied.Close()
		lock(direct)
		held := probeHeld(t, ctx, direct, locker)
		if err := node.Stop(context.Background(), "fast"); err != nil {
			t.Fatal(err)
		}
		wantNotServing(t, held.done, 10*time.Second, "a probe cut by a fast shutdown failed with %v, want a definitive failure", "the probe did not return after the fast shutdown")
	})
}
