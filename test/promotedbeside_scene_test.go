package test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// movableHead is clustersHead with the state file in dir: the tests that
// change the clusters a pgdns lists start it with one list and then reload
// (reloadTo, which writes dir/pgdns.yaml) or restart it with another list
// after it.
func movableHead(dir string) string {
	return clustersHead(filepath.Join(dir, "state.json"))
}

// mainOf is the clusters entry of a cluster main listing pg's nodes, to
// follow movableHead or clustersHead; more keys of main may follow it.
func mainOf(pg *pgtest.Cluster) string {
	n1, n2, n3 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	return fmt.Sprintf("  main:\n    hosts: [%s, %s, %s]\n", n1.Addr(), n2.Addr(), n3.Addr())
}

// promotedBesideUnfenced starts pgdns from head with main listing pg's
// three nodes (mainOf, then mainKeys, more keys of main: lines
// "    key: value\n"), writes on n1 and, once n2 has streamed it, promotes
// n2 while n1 runs on unfenced and n3 keeps following n1: pgdns proves
// timeline 2 and answers n2 as main's primary, n1 and n3 superseded.
func promotedBesideUnfenced(t *testing.T, pg *pgtest.Cluster, head string, mainKeys ...string) *env {
	t.Helper()
	n1, n2 := pg.Nodes[0], pg.Nodes[1]
	e := startYAML(t, pg, head+mainOf(pg)+strings.Join(mainKeys, ""))
	e.waitFor(t, "primary.db.local.", []string{n1.IP})
	common := e.insertAndTakeLSN(t, n1)
	waitStreaming(t, n2, 1, common)
	if err := n2.Promote(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", []string{n2.IP})
	return e
}
