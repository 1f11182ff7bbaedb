package test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// A watcher resuming with its index across a pgdns restart (review 2, R3)
// gets every event of the new run, the new run's primary_appeared first
// among them: the indexes of a later run are above every index of an
// earlier one. Before, both runs numbered from 1, and the old index (2
// here) skipped the new run's first two events, its primary_appeared
// included, with no "missed".
func TestEventsResumeAcrossARestart(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(2)})
	p := pg.Nodes[0]
	first := attach(t, pg, envOptions{})
	_, old := first.follow(t, 0, "primary_appeared", p.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := first.app.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	second := attach(t, pg, envOptions{}) // the restart
	// Let the new run log its start (identity, primary) before the
	// watcher comes back.
	second.follow(t, 0, "primary_appeared", p.Addr())
	code, page, err := second.watch(ctx, fmt.Sprintf("index=%d&wait=2s", old))
	if err != nil || code != http.StatusOK {
		t.Fatalf("resuming at %d: %d %v", old, code, err)
	}
	if page.Index <= old {
		t.Errorf("the new run's newest index %d is not above the old run's %d", page.Index, old)
	}
	if find(page.Events, "primary_appeared", p.Addr()) == nil || find(page.Events, "identity_settled", "") == nil {
		t.Fatalf("resuming at the old run's %d: %s; want the new run's identity_settled and primary_appeared", old, eventLines(page.Events))
	}
	if page.Events[0].Index <= old {
		t.Errorf("the new run's first event has index %d, not above the old run's %d", page.Events[0].Index, old)
	}
}
