package probe

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// An idle session cut without a word from the server (a middlebox's
// reset or end of the connection, review 5 F6) is no proof the server
// stopped: Watch opens a new session and keeps watching, as it does after
// a 57P01 from pg_terminate_backend; a fast shutdown seen by the idle
// session is still definitive at once, its new session refused.
func TestWatchSurvivesAnIdleSessionCut(t *testing.T) {
	t.Parallel()
	cl := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(1)})
	node := cl.Nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	proxy := testkit.StartProxy(t, pgtestAddr(t), node.Addr(), 0)
	proxied := pgCheckerOf(t, "user=postgres dbname=postgres sslmode=disable", proxy.Addr())
	// watch runs c's Watch for a while, cutting the idle connection with
	// cut once it waits, and returns what Watch returned.
	watch := func(c *pgChecker, cut func()) error {
		t.Helper()
		_, err := watchThrough(t, ctx, c, 3*time.Second, cut)
		return err
	}
	for _, rst := range []bool{true, false} {
		name := map[bool]string{true: "reset", false: "end of stream"}[rst]
		t.Run(name, func(t *testing.T) {
			err := watch(proxied, func() { proxy.Cut(rst) })
			if errors.Is(err, ErrNotServing) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("the idle connection cut (%s): Watch returned %v, want it to keep watching until its context ends", name, err)
			}
			if _, err := proxied.Check(ctx); err != nil {
				t.Fatalf("the probe after the cut (%s) failed: %v", name, err)
			}
		})
	}
	t.Run("fast shutdown", func(t *testing.T) {
		// Direct: through the proxy the refused new session would read
		// as the proxy's own end of the connection, which proves nothing.
		direct := pgCheckerOf(t, "user=postgres dbname=postgres sslmode=disable", node.Addr())
		err := watch(direct, func() {
			if err := node.Stop(context.Background(), "fast"); err != nil {
				t.Fatal(err)
			}
		})
		if !errors.Is(err, ErrNotServing) {
			t.Fatalf("a fast shutdown seen by the idle session: Watch returned %v, want a definitive failure", err)
		}
	})
}

// watchThrough probes with c, runs its Watch for within, does what once
// Watch waits on the idle session, and returns whether Watch returned
// before within ran out, and what it returned.
func watchThrough(t *testing.T, ctx context.Context, c *pgChecker, within time.Duration, what func()) (early bool, err error) {
	t.Helper()
	if _, err := c.Check(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithTimeout(ctx, within)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- c.Watch(wctx) }()
	time.Sleep(100 * time.Millisecond) // Watch waits on the session's reader
	what()
	err = <-done
	return wctx.Err() == nil, err
}
