package test

import (
	"fmt"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// TestSupersededReplicaMovedRespeltToAClusterOfItsOwn: n2 is promoted
// while n1 runs on unfenced, and n3 keeps following n1; pgdns proves
// timeline 2 and keeps n1 and n3 out. A reload moves n3 out of main into a
// cluster of its own, "old", under its second address. n3 still streams
// timeline 1 from the superseded n1: replica.old must not answer it
// (review 14b, finding 3: it did, main's knowledge reaching only hosts it
// lists under their own addresses, or the servers it remembers as a
// timeline's writers).
func TestSupersededReplicaMovedRespeltToAClusterOfItsOwn(t *testing.T) {
	t.Parallel()
	b := pgtest.Addrs(t)
	pg, _ := newDualAddressCluster(t, b)
	n1, n2 := pg.Nodes[0], pg.Nodes[1]
	dir := t.TempDir()
	head := movableHead(dir)
	e := promotedBesideUnfenced(t, pg, head)
	e.waitFor(t, "replica.db.local.", nil)
	e.reloadTo(t, dir, head+fmt.Sprintf("  main:\n    hosts: [%s, %s]\n  old:\n    hosts: [%s:5432]\n", n1.Addr(), n2.Addr(), b.Fleet(3)))
	e.holds(t, "replica.old.db.local.", 3*time.Second, exactly(), "n3, streaming timeline 1 from n1, superseded by timeline 2")
}
