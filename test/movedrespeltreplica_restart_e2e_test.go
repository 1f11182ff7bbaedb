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

// TestSupersededReplicaMovedRespeltAcrossARestart is
// TestSupersededReplicaMovedRespeltToAClusterOfItsOwn with the move made
// in the config a restarted pgdns reads with its state file: n3, still
// streaming timeline 1 from the superseded n1, is listed in "old" under
// its second address. replica.old must not answer it (before, the state
// file kept no server runs of replicas, and the restarted pgdns, knowing
// n3 only by the address main listed, answered it).
func TestSupersededReplicaMovedRespeltAcrossARestart(t *testing.T) {
	t.Parallel()
	b := pgtest.Addrs(t)
	pg, _ := newDualAddressCluster(t, b)
	n1, n2 := pg.Nodes[0], pg.Nodes[1]
	ctx := context.Background()
	dir := t.TempDir()
	head := movableHead(dir)
	e := promotedBesideUnfenced(t, pg, head)
	e.waitFor(t, "replica.db.local.", nil)
	if err := e.app.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	e = startYAML(t, pg, head+fmt.Sprintf("  main:\n    hosts: [%s, %s]\n  old:\n    hosts: [%s:5432]\n", n1.Addr(), n2.Addr(), b.Fleet(3)))
	testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "pgdns to answer after its restart", func() (int, bool) {
		rc := e.query(t, "udp", "primary.main.db.local.", dns.TypeA).Rcode
		return rc, rc != dns.RcodeServerFailure
	})
	e.holds(t, "replica.old.db.local.", 3*time.Second, exactly(), "n3, streaming timeline 1 from n1, superseded by timeline 2")
	e.holds(t, "primary.main.db.local.", time.Second, exactly(n2.IP), "n2, timeline 2's writer")
}
