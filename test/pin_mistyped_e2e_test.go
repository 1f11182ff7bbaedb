package test

import (
	"context"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// TestPinnedIdentityMistypedThenFixed: main pins its system identifier;
// n2 is promoted while n1 runs on unfenced, pgdns proves timeline 2 and
// keeps n1 out; n2 goes down, n3 keeps following n1. A reload pins a
// mistyped identifier (every host foreign: no primary, rightly), and the
// next reload fixes it; then the typo again, and a restart from the state
// file with the pin fixed. pgdns knew n1's timeline superseded before the
// typo: primary must not answer n1 after either fix (review 13, R13b-8:
// the knowledge was dropped at the typo, and n1 answered after the fix).
func TestPinnedIdentityMistypedThenFixed(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(3)})
	n1, n2 := pg.Nodes[0], pg.Nodes[1]
	ctx := context.Background()
	var id string
	n1.Query(t, "SELECT system_identifier::text FROM pg_control_system()", &id)
	dir := t.TempDir()
	head := movableHead(dir)
	pin := func(sysid string) string { return "    system_identifier: " + sysid + "\n" }
	pinned := func(sysid string) string { return head + mainOf(pg) + pin(sysid) }
	e := promotedBesideUnfenced(t, pg, head, pin(id))
	if err := n2.Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", nil)
	e.reloadTo(t, dir, pinned("1234567890123456789"))
	e.holds(t, "primary.db.local.", time.Second, exactly(), "every host foreign to the mistyped identifier")
	e.reloadTo(t, dir, pinned(id))
	e.holds(t, "primary.db.local.", 2*time.Second, exactly(), "n1, superseded by timeline 2 before the mistyped reload")

	// The typo again, then pgdns restarts from its state file with the
	// pin fixed.
	e.reloadTo(t, dir, pinned("1234567890123456789"))
	e.holds(t, "primary.db.local.", time.Second, exactly(), "every host foreign to the mistyped identifier")
	if err := e.app.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	e = startYAML(t, pg, pinned(id))
	e.waitFirstRound(t, "the restarted pgdns")
	e.holds(t, "primary.db.local.", 2*time.Second, exactly(), "n1, superseded by timeline 2, after a restart that fixed the pin")
}
