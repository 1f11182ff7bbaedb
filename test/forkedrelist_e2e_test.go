package test

// A replica proven on another branch than the primary's (rule 1, "another
// branch of timeline 1") stays aside whatever address either server is
// listed under: the proof is of the primary's server and of the replica's
// server run, not of the spelling of their entries (review 6, G7).

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

func TestForkedReplicaStaysAsideWhenThePrimaryIsRelisted(t *testing.T) {
	t.Parallel()
	b := pgtest.Addrs(t)
	alt1, alt2 := b.IP(20), b.IP(21) // second addresses of n1's and n2's servers
	pg := pgtest.New(t, pgtest.Options{IPs: b.IPs(3), Listen: func(ip string) []string {
		switch ip {
		case b.IP(1):
			return []string{alt1}
		case b.IP(2):
			return []string{alt2}
		}
		return nil
	}})
	e := attach(t, pg, envOptions{})
	n1, n2, n3 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	ctx := context.Background()
	forkedByARestore(t, e)

	reload := func(hosts ...string) {
		t.Helper()
		next := *e.cfg
		next.Clusters = slices.Clone(e.cfg.Clusters)
		next.Clusters[0].Hosts = hosts
		if err := e.app.Reload(&next); err != nil {
			t.Fatal(err)
		}
	}
	// The primary's server, listed under its other address.
	reload(alt1+":5432", n2.Addr(), n3.Addr())
	e.waitFor(t, "primary.db.local.", []string{alt1})
	e.holds(t, "replica.db.local.", time.Second, exactly(), "n2 and n3, still another branch of timeline 1 (they have a write the primary lost), after the primary was relisted")

	// A forked replica's server, listed under its other address.
	reload(alt1+":5432", alt2+":5432", n3.Addr())
	e.waitFor(t, "any.db.local.", []string{alt1})
	e.holds(t, "replica.db.local.", time.Second, exactly(), "n2 (now listed as its second address) and n3, still another branch, after n2 was relisted")

	// A forked replica left out of one config and listed again by the next.
	reload(alt1+":5432", alt2+":5432")
	if !testkit.Poll(10*time.Second, 50*time.Millisecond, func() bool { _, listed := e.hostStates(t)[n3.Addr()]; return !listed }) {
		t.Fatal("n3 still listed after a reload without it")
	}
	reload(alt1+":5432", alt2+":5432", n3.Addr())
	e.waitHost(t, n3.Addr(), "probed again", func(h hostState) bool { return h.Timeline != nil })
	e.holds(t, "replica.db.local.", time.Second, exactly(), "n3, listed again, still another branch")

	// And the primary's server restarted under the address it is listed
	// under now: its WAL, and the replicas' fork from it, are the same.
	if err := n1.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	if err := n1.Start(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", []string{alt1})
	e.holds(t, "replica.db.local.", time.Second, exactly(), "n2 and n3, still another branch, after the primary restarted under its second address")
}
