package test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// TestSupersededPrimaryMovedToAClusterOfItsOwn: n2 is promoted while n1
// runs on unfenced, pgdns proves timeline 2 and keeps n1 out; n2 goes
// down, n3 keeps following n1. A reload moves n1 out of main into a
// cluster of its own, "old". n1 is still the superseded primary of
// timeline 1: primary.old must not answer it (review 13, R13b-9: it did,
// settled anew from n1 alone).
func TestSupersededPrimaryMovedToAClusterOfItsOwn(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(3)})
	n1, n2, n3 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	ctx := context.Background()
	dir := t.TempDir()
	head := movableHead(dir)
	e := promotedBesideUnfenced(t, pg, head)
	if err := n2.Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", nil)

	e.reloadTo(t, dir, head+fmt.Sprintf("  main:\n    hosts: [%s, %s]\n  old:\n    hosts: [%s]\n", n2.Addr(), n3.Addr(), n1.Addr()))
	e.holds(t, "primary.old.db.local.", 2*time.Second, exactly(), "n1, writable on timeline 1, superseded by timeline 2")
	e.holds(t, "primary.main.db.local.", time.Second, exactly(), "no host of main is writable on timeline 2")
}
