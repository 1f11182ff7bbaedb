package test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// TestForeignHostsAddedByAReloadNeverOutvoteTheCluster: a reload lists
// another cluster's primary and replica in main by mistake (a pasted
// block). While main's own host is live rule 2 keeps main's identity; once
// it is down (a restart) the two foreign hosts are a majority of the
// configured hosts, but were never seen with main's identity, so they
// never replace it: primary fails closed, the foreign hosts' reason says
// why and one WARN line says so (review 7, H6: primary.db.local answered
// the foreign primary). A rebuild at the same addresses is still followed
// (TestIdentity, the rebuilt scene tests).
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
	testkit.Eventually(t, 10*time.Second, 50*time.Millisecond, "/v1/resolve says why f1 is not the primary", func() (string, bool) {
		_, body := e.get(t, http.DefaultClient, "/v1/resolve?name=primary", "")
		return body, strings.Contains(body, "is not the cluster's") && strings.Contains(body, "but none was seen with")
	})
	if n := strings.Count(e.logs.String(), `msg="cluster identity not replaced`); n != 1 {
		t.Errorf("%d WARN lines 'cluster identity not replaced', want 1:\n%s", n, e.logs)
	}
	if strings.Contains(e.logs.String(), `msg="cluster identity replaced`) {
		t.Errorf("main's identity was replaced by the foreign hosts:\n%s", e.logs)
	}
}
