package test

// Review 6, G1d (on the G1c fix 2c5dd4e: the witnessed timeline is not in the state file). Based on G1c (on the G1 fix f3004f5): the witness is not remembered,
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
	"path/filepath"
	"testing"
	"time"
)

func TestWitnessedTimelineSurvivesARestartOfPgdns(t *testing.T) {
	t.Parallel()
	e, n1, _, n3 := supersededScene(t)
	ctx := context.Background()

	statePath := filepath.Join(t.TempDir(), "state.json")
	fresh := launch(t, e.pg, envOptions{State: statePath}) // a pgdns with a state file that never saw timeline 2 proven
	fresh.waitFirstRound(t, "the fresh pgdns")
	fresh.holds(t, "primary.db.local.", time.Second, without(n1.IP),
		"n1 is writable on timeline 1, and n3 (live, in recovery on timeline 2, its history file readable) proves a promotion superseded it")

	// The witness stops; pgdns restarts with its state file.
	if err := n3.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	fresh.holds(t, "primary.db.local.", time.Second, without(n1.IP), "n1, superseded by timeline 2 (n3, which showed it, is down: remembered in memory)")
	if err := fresh.app.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	again := launch(t, e.pg, envOptions{State: statePath})
	again.waitFirstRound(t, "the restarted pgdns")
	again.holds(t, "primary.db.local.", 2*time.Second, without(n1.IP),
		"n1, superseded by timeline 2, which the pgdns before the restart had seen witnessed (its state file should say so)")
}
