package app

// Tests of what lsn- tokens prove against real PostgreSQL, beyond the
// read-your-writes rule of trust_e2e_test.go.

import (
	"context"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// Issue 22, case 8: a token on a timeline above every one the cluster has
// proven names WAL no host has, the primary included: the token is forged,
// from another cluster, or pgdns is behind a failover and its primary is
// superseded. Every name answers no address; before, prefer-replica and
// any answered the primary.
func TestTokenFromATimelineNobodyHas(t *testing.T) {
	t.Parallel()
	ips := pgtest.Addrs(t).IPs(3)
	r1, r2 := ips[1], ips[2]
	pg := pgtest.New(t, pgtest.Options{IPs: ips})
	e := attach(t, pg, envOptions{})
	// Timeline 2: r1 promoted, r2 following it, the old primary gone.
	if err := pg.Nodes[0].Stop(context.Background(), "fast"); err != nil {
		t.Fatal(err)
	}
	if err := pg.Nodes[1].Promote(context.Background()); err != nil {
		t.Fatal(err)
	}
	pg.Nodes[2].Follow(t, pg.Nodes[1])
	e.waitFor(t, "primary.db.local.", []string{r1})
	e.waitFor(t, "lsn-0-10-t2.replica.db.local.", []string{r2})
	e.waitFor(t, "lsn-0-10-t1.replica.db.local.", []string{r2}) // timeline 1 ended after 0/10

	for _, target := range []string{"replica", "prefer-replica", "any", "primary"} {
		for _, token := range []string{"lsn-0-10-t3", "lsn-0-10-t9"} {
			e.holds(t, token+"."+target+".db.local.", 200*time.Millisecond, exactly(), "no host has a position on timeline "+token[len(token)-1:])
		}
	}
	// The proven timeline still answers as always: the primary passes,
	// prefer-replica falls back to it.
	e.holds(t, "lsn-ffffffff-0-t2.prefer-replica.db.local.", 200*time.Millisecond, exactly(r1), "the primary")
	e.holds(t, "lsn-0-10-t2.any.db.local.", 200*time.Millisecond, exactly(r1, r2), "the primary and the replica")
}
