package test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// TestClusterRemovedAndReaddedKeepsItsSupersededPrimaryOut: n2 is
// promoted while n1 runs on unfenced, pgdns proves timeline 2 and keeps n1
// out; n2 goes down, n3 keeps following n1. A reload removes main from the
// config (another cluster, side, stays), the next lists it again. n1 is
// still the superseded primary of timeline 2's cluster: primary.main must
// not answer it. Before the fix the first reload dropped what pgdns knew
// of main (an orphan no configured cluster could take: side has an
// identity, another), and the second settled main anew from n1 and n3;
// so did a restart of pgdns with main listed again, its state file
// having dropped main at the reload that removed it.
func TestClusterRemovedAndReaddedKeepsItsSupersededPrimaryOut(t *testing.T) {
	t.Parallel()
	b := pgtest.Addrs(t)
	pg := pgtest.New(t, pgtest.Options{IPs: b.IPs(3)})
	side := pgtest.New(t, pgtest.Options{IPs: []string{b.IP(21)}})
	n1, n2, n3 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	ctx := context.Background()
	dir := t.TempDir()
	head := "state:\n  path: " + filepath.Join(dir, "state.json") + "\n" + `
dns:
  listen: 127.0.0.1:0
  lsn_wait: 0s
  default_cluster: side
http:
  listen: 127.0.0.1:0
probe:
  interval: 100ms
  timeout: 1s
  dsn: "user=postgres dbname=postgres sslmode=disable"
clusters:
  side:
    hosts: [` + side.Nodes[0].Addr() + `]
`
	mainHosts := fmt.Sprintf("  main:\n    hosts: [%s, %s, %s]\n", n1.Addr(), n2.Addr(), n3.Addr())
	e := startYAML(t, pg, head+mainHosts)
	e.waitFor(t, "primary.main.db.local.", []string{n1.IP})
	e.waitFor(t, "primary.side.db.local.", []string{side.Nodes[0].IP})
	common := e.insertAndTakeLSN(t, n1)
	waitStreaming(t, n2, 1, common)
	if err := n2.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.main.db.local.", []string{n2.IP})
	if err := n2.Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.main.db.local.", nil)

	e.reloadTo(t, dir, head)
	time.Sleep(time.Second) // a few publishes without main
	e.reloadTo(t, dir, head+mainHosts)
	e.holds(t, "primary.main.db.local.", 3*time.Second, exactly(), "n1, writable on timeline 1, superseded by timeline 2")
	e.holds(t, "replica.main.db.local.", time.Second, exactly(), "n3 streams from n1, superseded")

	// Again across a restart: main removed by a reload, pgdns stopped,
	// and started with main listed again.
	e.reloadTo(t, dir, head)
	time.Sleep(time.Second)
	if err := e.app.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	e = startYAML(t, pg, head+mainHosts)
	e.waitFor(t, "primary.side.db.local.", []string{side.Nodes[0].IP})
	e.holds(t, "primary.main.db.local.", 3*time.Second, exactly(), "n1, writable on timeline 1, superseded by timeline 2 (after a restart)")
}
