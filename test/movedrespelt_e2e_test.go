package test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// TestSupersededPrimaryMovedRespeltToAClusterOfItsOwn is
// TestSupersededPrimaryMovedToAClusterOfItsOwn with the host respelt as it
// moves: n2 is promoted while n1 runs on unfenced, pgdns proves timeline 2
// and keeps n1 out; n2 goes down, n3 keeps following n1. A reload moves n1
// out of main into a cluster of its own, "old", listed under its second
// address (another network's, a DNS name). n1 is still the superseded
// primary of timeline 1: primary.old must not answer it (review 14b,
// finding 2: it did, main's knowledge reaching only hosts it lists under
// their own addresses).
func TestSupersededPrimaryMovedRespeltToAClusterOfItsOwn(t *testing.T) {
	t.Parallel()
	movedRespelt(t, false)
}

// TestSupersededPrimaryMovedRespeltAcrossARestart is the same move made
// in the config a restarted pgdns reads with its state file.
func TestSupersededPrimaryMovedRespeltAcrossARestart(t *testing.T) {
	t.Parallel()
	movedRespelt(t, true)
}

func movedRespelt(t *testing.T, restart bool) {
	b := pgtest.Addrs(t)
	pg, _ := newDualAddressCluster(t, b)
	n2, n3 := pg.Nodes[1], pg.Nodes[2]
	ctx := context.Background()
	dir := t.TempDir()
	head := movableHead(dir)
	e := promotedBesideUnfenced(t, pg, head)
	if err := n2.Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", nil)

	moved := head + fmt.Sprintf("  main:\n    hosts: [%s, %s]\n  old:\n    hosts: [%s:5432]\n", n2.Addr(), n3.Addr(), b.Fleet(1))
	if restart {
		if err := e.app.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		e = startYAML(t, pg, moved)
		testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "pgdns to answer after its restart", func() (int, bool) {
			rc := e.query(t, "udp", "primary.old.db.local.", dns.TypeA).Rcode
			return rc, rc != dns.RcodeServerFailure
		})
	} else {
		e.reloadTo(t, dir, moved)
	}
	e.holds(t, "primary.old.db.local.", 3*time.Second, exactly(), "n1, writable on timeline 1, superseded by timeline 2")
	e.holds(t, "primary.main.db.local.", time.Second, exactly(), "no host of main is writable on timeline 2")
}
