package test

// A copy of a production cluster (same system identifier, promoted: a
// staging or PITR copy) in a cluster of its own, as docs/decisions.md rule
// 1 asks: removing the copy's cluster, by a reload or in the config a
// restarted pgdns reads with its state file, leaves production alone; it
// does not inherit the copy's newest timeline (review 6, G9).

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/config"
	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/state"
	"github.com/pgdns/pgdns/internal/testkit"
)

func TestRemovingACopysClusterLeavesProductionAlone(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(3)})
	n1, n2, n3 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	ctx := context.Background()
	// n3 becomes the copy: re-cloned from n1, promoted (timeline 2).
	if err := n3.Reclone(ctx, n1); err != nil {
		t.Fatal(err)
	}
	if err := n3.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	start := func(clusters string) *env {
		t.Helper()
		return startYAML(t, pg, movableHead(dir)+clusters)
	}
	both := fmt.Sprintf("  main:\n    hosts: [%s, %s]\n  staging:\n    hosts: [%s]\n", n1.Addr(), n2.Addr(), n3.Addr())
	production := func(e *env, what string) {
		t.Helper()
		e.holds(t, "primary.db.local.", time.Second, exactly(n1.IP), "n1, production's primary: nothing in production moved "+what)
		e.holds(t, "replica.db.local.", 500*time.Millisecond, exactly(n2.IP), "n2, production's replica "+what)
	}
	e := start(both)
	e.waitFor(t, "primary.db.local.", []string{n1.IP})
	e.waitFor(t, "replica.db.local.", []string{n2.IP})
	e.waitFor(t, "primary.staging.db.local.", []string{n3.IP})
	testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "the state file to know both clusters", func() (string, bool) {
		m, _, err := state.Load(path)
		if err != nil {
			return err.Error(), false
		}
		return string(state.Encode(m)), m["main"].NewestTimeline == 1 && m["staging"].NewestTimeline == 2
	})

	// The copy is decommissioned: its cluster leaves the config.
	next := *e.cfg
	next.Clusters = slices.DeleteFunc(slices.Clone(e.cfg.Clusters), func(c config.Cluster) bool { return c.Name == "staging" })
	if err := e.app.Reload(&next); err != nil {
		t.Fatal(err)
	}
	production(e, "after a reload without the copy's cluster")
	// The copy's entry stays aside (for a reload that lists the copy
	// again: review 14b, finding 1), and production does not take it.
	testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "the state file to keep the copy's cluster aside", func() (string, bool) {
		m, _, err := state.Load(path)
		if err != nil {
			return err.Error(), false
		}
		return string(state.Encode(m)), m["staging"].NewestTimeline == 2 && m["main"].NewestTimeline == 1
	})
	if err := e.app.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	// Again across a restart: both clusters known to the state file, the
	// config a restarted pgdns reads has production only.
	e = start(both)
	e.waitFor(t, "primary.staging.db.local.", []string{n3.IP})
	if err := e.app.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	e = start(fmt.Sprintf("  main:\n    hosts: [%s, %s]\n", n1.Addr(), n2.Addr()))
	e.waitFor(t, "primary.db.local.", []string{n1.IP})
	production(e, "after a restart without the copy's cluster")
}
