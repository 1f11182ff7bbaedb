package test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// TestClusterAddedOverAnotherClustersServers: n2 is promoted while n1 runs
// on unfenced, pgdns proves timeline 2 and keeps n1 out of primary; n2
// goes down, n3 keeps following n1 on timeline 1. pgdns restarts from its
// state file with a second cluster configured, "alias", listing the very
// same servers under other addresses (each node listens on two more: a
// second name for one database, its hosts spelt as another team spells
// them); then a reload adds a third, "third", on the other addresses.
// pgdns knows that n1's timeline was superseded: neither name may answer
// n1 (review 13, R13b-1: both answered it as the primary, while
// primary.main answered nothing).
func TestClusterAddedOverAnotherClustersServers(t *testing.T) {
	t.Parallel()
	b := pgtest.Addrs(t)
	alt := func(ip string, k int) string {
		i := strings.LastIndex(ip, ".")
		return ip[:i+1] + strconv.Itoa(k) + ip[i+1:]
	}
	pg := pgtest.New(t, pgtest.Options{IPs: b.IPs(3), Listen: func(ip string) []string { return []string{alt(ip, 1), alt(ip, 2)} }})
	n1, n2, n3 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	ctx := context.Background()
	dir := t.TempDir()
	base := movableHead(dir) + mainOf(pg)
	named := func(name string, k int) string {
		return fmt.Sprintf("  %s:\n    hosts: [%s:5432, %s:5432, %s:5432]\n", name, alt(n1.IP, k), alt(n2.IP, k), alt(n3.IP, k))
	}
	e := startYAML(t, pg, base)
	e.waitFor(t, "primary.main.db.local.", []string{n1.IP})
	e.waitFor(t, "replica.main.db.local.", []string{n2.IP, n3.IP})

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
	e.holds(t, "primary.main.db.local.", time.Second, exactly(), "n1 is superseded by timeline 2")

	// Restarted from the state file, "alias" added to the config.
	if err := e.app.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	e = startYAML(t, pg, base+named("alias", 1))
	e.waitFor(t, "primary.main.db.local.", nil)
	for _, name := range []string{"primary.alias", "replica.alias", "primary.main"} {
		e.holds(t, name+".db.local.", time.Second, exactly(), "n1 and n3, on timeline 1, superseded by timeline 2 before pgdns restarted")
	}

	// A reload, as SIGHUP makes it (the file loaded and validated), adds
	// "third".
	e.reloadTo(t, dir, base+named("alias", 1)+named("third", 2))
	for _, name := range []string{"primary.third", "replica.third", "primary.alias", "primary.main"} {
		e.holds(t, name+".db.local.", time.Second, exactly(), "n1 and n3, on timeline 1, superseded by timeline 2")
	}
}
