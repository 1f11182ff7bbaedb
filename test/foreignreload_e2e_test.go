package test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// TestForeignHostsAddedByAReloadNeverOutvoteTheCluster: a reload lists
// another cluster's primary and replica in main by mistake (a pasted
// block). While main's own host is live rule 2 keeps main's identity; once
// it is down (a restart) the two foreign hosts are a majority of the
// configured hosts, but were never seen with main's identity, so they
// never replace it: primary fails closed, and the foreign hosts are never
// answered (review 7, H6). A rebuild at the same addresses is still
// followed (TestIdentity, the rebuilt scene tests).
func TestForeignHostsAddedByAReloadNeverOutvoteTheCluster(t *testing.T) {
	ips := pgtest.Addrs(t).IPs(3)
	ours := pgtest.New(t, pgtest.Options{IPs: ips[:1]})
	foreign := pgtest.New(t, pgtest.Options{IPs: ips[1:]})
	n1, f1, f2 := ours.Nodes[0], foreign.Nodes[0], foreign.Nodes[1]
	e := attach(t, ours, envOptions{})
	next := *e.cfg
	next.Clusters = slices.Clone(e.cfg.Clusters)
	next.Clusters[0].Hosts = []string{n1.Addr(), f1.Addr(), f2.Addr()}
	if err := e.app.Reload(&next); err != nil {
		t.Fatal(err)
	}
	e.holds(t, "primary.db.local.", time.Second, exactly(n1.IP), "n1, ours")
	if err := n1.Stop(context.Background(), "fast"); err != nil {
		t.Fatal(err)
	}
	e.holds(t, "primary.db.local.", 5*time.Second, without(f1.IP), "f1, a foreign cluster's primary listed by mistake")
	e.holds(t, "replica.db.local.", time.Second, without(f2.IP), "f2, a foreign cluster's replica listed by mistake")
}
