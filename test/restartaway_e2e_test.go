package test

// Review 6, G2b (on the G2 fix 30a901b): pgdns away while the node is rebuilt and promoted. G2: rule 12 takes a new server run at the address of a
// timeline's first writer for "the same server restarted (it keeps its WAL
// and its branch)". A server re-cloned at that address (or restored from a
// backup) and promoted again takes the same timeline number on another
// branch: no fork is seen, and a token of a write on the first branch is
// answered by replicas of the second, which never have it.

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// n1 hangs; n2 is promoted (timeline 2, branch A) and takes the client's
// write; n2 dies; its address is rebuilt from n3 (still on timeline 1) and
// promoted: timeline 2 again (branch B), with a new start time at n2's
// address. n3 and n4 follow it past the token without the write.
func TestTokenOfABranchRebuiltWhilePgdnsWasAway(t *testing.T) {
	t.Parallel()
	// full_page_writes on: a base backup may then be taken from a standby
	// (pgtest turns it off for speed).
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(4), Conf: []string{"full_page_writes = on"}})
	statePath := filepath.Join(t.TempDir(), "state.json")
	e := attach(t, pg, envOptions{State: statePath})
	n1, n2, n3, n4 := e.pg.Nodes[0], e.pg.Nodes[1], e.pg.Nodes[2], e.pg.Nodes[3]
	e.waitFor(t, "replica.db.local.", []string{n2.IP, n3.IP, n4.IP})
	ctx := context.Background()
	common := e.insertAndTakeLSN(t, n1)
	for _, n := range []*pgtest.Node{n2, n3, n4} {
		waitStreaming(t, n, 1, common)
	}
	if err := n1.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = n1.Signal(syscall.SIGCONT) }()
	e.waitFor(t, "primary.db.local.", nil)

	if err := n2.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", []string{n2.IP})
	onA := writeAndTakeLSN(t, n2.Conn(t), "INSERT INTO t (v) VALUES ('on n2, branch A')")
	time.Sleep(300 * time.Millisecond) // pgdns probes n2 at onA or past it
	if err := n2.Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", nil)
	// pgdns is away while the node is rebuilt (restarted for maintenance,
	// or cut off from that address): it comes back with its state file.
	if err := e.app.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	// The same address, another server run: a copy of n3, promoted.
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
	n2.Exec(t, "CHECKPOINT") // the checkpoint its promotion asked for, done (it takes up to checkpoint_timeout on its own)
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
	e = launch(t, pg, envOptions{State: statePath})
	e.waitFor(t, "primary.db.local.", []string{n2.IP})
	for _, name := range []string{"lsn-" + onA + "-t2.replica.db.local.", "lsn-" + onA + "-t2.prefer-replica.db.local.",
		"lsn-" + onA + ".replica.db.local."} {
		e.holds(t, name, time.Second, exactly(), "replicas of branch B of timeline 2, which lack the write of the token (made on branch A, by the server n2's address had before)")
	}
}
