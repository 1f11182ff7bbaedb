package test

import (
	"context"
	"testing"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// Review 6's G2 scene, a server rebuilt at the address of a timeline's
// first writer and promoted to the same number, in the two halves its
// tests (tokenrebuilt, restartaway) share.

// branchA builds the first half on e's four nodes: tokenbranch's
// firstBranch (n1 hangs until the test ends, n2 is promoted to timeline 2,
// branch A, and takes the client's write, whose token it returns); then
// n2 dies, and e answers no primary.
func branchA(t *testing.T, e *env) (onA string) {
	t.Helper()
	n2, _, _, onA := firstBranch(t, e, "on n2, branch A")
	// pgdns probes n2 at onA or past it (a fixed 300 ms was three probes
	// on a quiet machine, maybe none under load).
	e.waitHost(t, n2.Addr(), "probed at or past onA", func(h hostState) bool { return replayedPast(t, h, onA) })
	if err := n2.Stop(context.Background(), "immediate"); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", nil)
	return onA
}

// branchB is the second half: n2's address rebuilt from n3 (still on
// timeline 1) and promoted, timeline 2 again with a new start time at
// n2's address; n3 and n4 follow it past onA without the write. With
// checkpoint, n2 has also taken the checkpoint its promotion asked for
// (PostgreSQL takes it on its own within checkpoint_timeout), so that
// its last checkpoint no longer shows the promotion.
func branchB(t *testing.T, pg *pgtest.Cluster, onA string, checkpoint bool) {
	t.Helper()
	n2, n3, n4 := pg.Nodes[1], pg.Nodes[2], pg.Nodes[3]
	ctx := context.Background()
	if err := n2.Reclone(ctx, n3); err != nil {
		t.Fatal(err)
	}
	if err := n2.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	var tl int
	n2.Query(t, "SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int", &tl)
	if tl != 2 {
		t.Fatalf("the rebuilt n2 promoted to timeline %d, want 2 (the number branch A took)", tl)
	}
	n3.Follow(t, n2)
	n4.Follow(t, n2)
	onB := writeAndTakeLSN(t, n2.Conn(t), "CREATE TABLE b AS SELECT repeat('y', 100) AS v FROM generate_series(1, 1000)")
	if checkpoint {
		n2.Exec(t, "CHECKPOINT") // the checkpoint its promotion asked for, done (it takes up to checkpoint_timeout on its own)
	}
	waitStreaming(t, n3, 2, onB)
	waitStreaming(t, n4, 2, onB)
	if parseLSN(t, onB) <= parseLSN(t, onA) {
		t.Fatalf("branch B %s is not past the token %s", onB, onA)
	}
	var has int
	n4.Query(t, "SELECT count(*) FROM t WHERE v = 'on n2, branch A'", &has)
	if has != 0 {
		t.Fatalf("n4 has the write of branch A (%d rows)", has)
	}
}
