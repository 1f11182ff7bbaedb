package test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// Review 6's G5 scene, a primary restored in place from a copy taken
// before a write, in the steps its tests (restoreinplace, forkedrelist,
// forkedrestart) share.

// snapshotInPlace takes the snapshot (snapshotDir), and e waits until it
// answers n as the primary again. It returns the copy's folder.
func snapshotInPlace(t *testing.T, e *env, n *pgtest.Node) string {
	t.Helper()
	snap := snapshotDir(t, n)
	e.waitFor(t, "primary.db.local.", []string{n.IP})
	return snap
}

// snapshotDir takes the snapshot: a copy of n's data directory, taken
// while n is stopped (fast); n is started again. It returns the copy's
// folder.
func snapshotDir(t *testing.T, n *pgtest.Node) string {
	t.Helper()
	ctx := context.Background()
	if err := n.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(t.TempDir(), "snap")
	if out, err := exec.Command("cp", "-a", n.Dir, snap).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return snap
}

// restoreInPlace is the restore: n stopped (immediate), its directory
// replaced by the snapshot, n started: writable on its timeline again,
// before what it wrote since, at the same address.
func restoreInPlace(t *testing.T, n *pgtest.Node, snap string) {
	t.Helper()
	ctx := context.Background()
	if err := n.Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("sh", "-c", "rm -rf '"+n.Dir+"' && cp -a '"+snap+"' '"+n.Dir+"'").CombinedOutput(); err != nil {
		t.Fatalf("restore: %v: %s", err, out)
	}
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
}

// recloneWritingPast makes replica anew from restored (a restored
// primary, on timeline 1), which then writes rows rows into a new table b,
// past lost, the token of a write the restore lost; replica streams it.
func recloneWritingPast(t *testing.T, replica, restored *pgtest.Node, lost string, rows int) {
	t.Helper()
	if err := replica.Reclone(context.Background(), restored); err != nil {
		t.Fatal(err)
	}
	onB := writeAndTakeLSN(t, restored.Conn(t), fmt.Sprintf("CREATE TABLE b AS SELECT repeat('y', 100) AS v FROM generate_series(1, %d)", rows))
	waitStreaming(t, replica, 1, onB)
	if parseLSN(t, onB) <= parseLSN(t, lost) {
		t.Fatalf("the restored branch %s is not past the token %s", onB, lost)
	}
}

// forkedByARestore builds the whole scene on e's three nodes: n1 restored
// in place from a copy taken before a write that n2 and n3 replayed, so
// both are another branch of timeline 1, set aside (held for 0.5 s) while
// the restored n1 writes on.
func forkedByARestore(t *testing.T, e *env) {
	t.Helper()
	n1, n2, n3 := e.pg.Nodes[0], e.pg.Nodes[1], e.pg.Nodes[2]
	e.waitFor(t, "replica.db.local.", []string{n2.IP, n3.IP})
	e.insertAndTakeLSN(t, n1)

	// n1 restored in place from a copy taken before a write (review 6,
	// G5): n2 and n3 have the write, and are another branch of timeline 1.
	snap := snapshotInPlace(t, e, n1)
	lost := writeAndTakeLSN(t, n1.Conn(t), "INSERT INTO t (v) VALUES ('lost to the restore')")
	waitStreaming(t, n2, 1, lost)
	waitStreaming(t, n3, 1, lost)
	restoreInPlace(t, n1, snap)
	e.waitFor(t, "primary.db.local.", []string{n1.IP})
	e.waitFor(t, "replica.db.local.", nil) // both proven on another branch
	writeAndTakeLSN(t, n1.Conn(t), "CREATE TABLE b AS SELECT repeat('y', 100) AS v FROM generate_series(1, 1000)")
	e.holds(t, "replica.db.local.", 500*time.Millisecond, exactly(), "n2 and n3 are another branch of timeline 1")
}
