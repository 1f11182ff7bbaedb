package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/app"
	"github.com/pgdns/pgdns/internal/app/apptest"
	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// TestEventsFollowAcrossARestart: `pgdns events -follow` goes on through a
// restart of pgdns on the same address, and prints the new run's events
// from its first, even when the new run's index has reached the one the
// follower had (before the fix it asked the new run for events after #2,
// and its own #1 and #2, the start, were never printed).
func TestEventsFollowAcrossARestart(t *testing.T) {
	t.Parallel()
	b := pgtest.Addrs(t)
	pg := pgtest.New(t, pgtest.Options{IPs: b.IPs(2)})
	primary := pg.Nodes[0]
	yaml := eventsConfig(b.Addr(3, 5353), b.Addr(3, 8080), pg)
	first, _, _ := apptest.Start(t, yaml)
	appeared := " primary_appeared cluster=main host=" + primary.Addr() + " to=" + primary.Addr() + "\n"
	testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "the first run's start among its events", func() (string, bool) {
		_, out, errOut := runMain(t, context.Background(), "events", "-http", first.HTTPAddr())
		return out + errOut, strings.Contains(out, appeared)
	})

	f := startFollow(t, first, first.HTTPAddr())
	stopCtx, stopCancel := context.WithTimeout(context.Background(), app.ShutdownTimeout)
	defer stopCancel()
	if err := first.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	second, cfg, _ := apptest.Start(t, yaml)
	// One event more than the first run had by the time the follower is
	// back: its index is then past the follower's, not below it.
	testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "the second run's start among its events", func() (uint64, bool) {
		n := second.Events().Newest()
		return n, n >= 2
	})
	next := *cfg
	if err := second.Reload(&next); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, 10*time.Millisecond, "the second run's start and reload followed", func() (string, bool) {
		out := f.stdout.String()
		return out + f.stderr.String(), strings.Count(out, appeared) == 2 && strings.Contains(out, " reload_applied ") &&
			strings.Contains(f.stderr.String(), "pgdns restarted")
	})
	t.Logf("pgdns events -follow:\n%s%s", f.stdout.String(), f.stderr.String())
	f.stop(t)
}
