package test

// Review 6, G1c (on the G1 fix f3004f5): the witness is not remembered,
// so a restart of it lets the superseded primary back in. Based on G1: a pgdns that starts without knowledge (no state.path, its
// file lost, or a second instance started during the incident) meets an
// unfenced old primary still writable on timeline 1, the promoted primary
// of timeline 2 down, and a replica that followed the promotion (its
// checkpoint and minimum recovery point on timeline 2, its history file
// saying where timeline 1 ended). pgdns itself says the replica is "on
// timeline 2, above the cluster's newest proven timeline 1" and still
// answers the old primary as primary.db.local: every write sent there is
// on a branch that a rewind throws away.

import (
	"context"
	"testing"
	"time"
)

func TestFreshPgdnsKeepsASupersededPrimaryOutWhileItsWitnessRestarts(t *testing.T) {
	t.Parallel()
	e, n1, _, n3 := supersededScene(t)
	ctx := context.Background()

	fresh := launch(t, e.pg, envOptions{}) // no state.path: the default
	fresh.waitFirstRound(t, "the fresh pgdns")
	fresh.holds(t, "primary.db.local.", time.Second, without(n1.IP),
		"n1 is writable on timeline 1, and n3 (live, in recovery on timeline 2, its history file readable) proves a promotion superseded it")

	// A routine restart of the witness: what pgdns saw of it stays true
	// while it is down (n1 is still superseded), so primary must not
	// answer n1 meanwhile.
	restarted := make(chan error, 1)
	go func() {
		if err := n3.Stop(ctx, "fast"); err != nil {
			restarted <- err
			return
		}
		restarted <- n3.Start(ctx)
	}()
	fresh.holds(t, "primary.db.local.", 4*time.Second, without(n1.IP),
		"n1, superseded by timeline 2, while n3 (which showed it) restarts")
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
}
