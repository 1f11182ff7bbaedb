package test

// Review 6, G2: rule 12 took a new server run at the address of a
// timeline's first writer for "the same server restarted (it keeps its
// WAL and its branch)". A server re-cloned at that address (or restored
// from a backup) and promoted again takes the same timeline number on
// another branch: no fork was seen, and a token of a write on the first
// branch was answered by replicas of the second, which never have it. A
// new run is the same branch only when its WAL provably continues the
// last one's (decisions.md, rule 12).

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// n1 hangs; n2 is promoted (timeline 2, branch A) and takes the client's
// write; n2 dies; its address is rebuilt from n3 (still on timeline 1) and
// promoted: timeline 2 again (branch B), with a new start time at n2's
// address. n3 and n4 follow it past the token without the write.
func TestTokenOfABranchRebuiltAtTheSameAddress(t *testing.T) {
	t.Parallel()
	// full_page_writes on: a base backup may then be taken from a standby
	// (pgtest turns it off for speed).
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(4), Conf: []string{"full_page_writes = on"}})
	e := attach(t, pg, envOptions{})
	n2, n3, n4 := e.pg.Nodes[1], e.pg.Nodes[2], e.pg.Nodes[3]
	onA := branchA(t, e)

	// The same address, another server run: a copy of n3, promoted.
	branchB(t, pg, onA, false)
	e.waitFor(t, "primary.db.local.", []string{n2.IP})
	for _, name := range []string{"lsn-" + onA + "-t2.replica.db.local.", "lsn-" + onA + "-t2.prefer-replica.db.local.",
		"lsn-" + onA + ".replica.db.local."} {
		e.holds(t, name, time.Second, exactly(), "replicas of branch B of timeline 2, which lack the write of the token (made on branch A, by the server n2's address had before)")
	}
	if logs := e.logs.String(); !strings.Contains(logs, `msg="timeline forked`) || !strings.Contains(logs, "in another server run (promoted to it in its own run") {
		t.Errorf("the fork is not logged with its reason:\n%s", logs)
	}
	e.waitFor(t, "replica.db.local.", []string{n3.IP, n4.IP}) // names without a token are not affected
}

// The first writer of timeline 2 restarted, by a crash and by a fast
// shutdown: the same server, its WAL continued past what it flushed, and
// tokens on timeline 2 are still answered by its replica (no fork). This
// passes before the fix for G2 as after it.
func TestTokenOfARestartedFirstWriter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{Nodes: 3})
	n1, n2, n3 := e.pg.Nodes[0], e.pg.Nodes[1], e.pg.Nodes[2]
	e.waitFor(t, "replica.db.local.", []string{n2.IP, n3.IP})
	ctx := context.Background()
	common := e.insertAndTakeLSN(t, n1)
	waitStreaming(t, n2, 1, common)
	waitStreaming(t, n3, 1, common)
	if err := n1.Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	if err := n2.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	n3.Follow(t, n2)
	e.waitFor(t, "primary.db.local.", []string{n2.IP})
	for _, mode := range []string{"immediate", "fast"} {
		// A write, and a transaction left open with WAL of its own that
		// no commit flushes: a crash loses that tail.
		onA := writeAndTakeLSN(t, n2.Conn(t), "INSERT INTO t (v) VALUES ('before a restart')")
		open := n2.Conn(t)
		if _, err := open.Exec(ctx, "BEGIN; INSERT INTO t (v) SELECT 'open' FROM generate_series(1, 50)"); err != nil {
			t.Fatal(err)
		}
		waitStreaming(t, n3, 2, onA)
		e.waitFor(t, "lsn-"+onA+"-t2.replica.db.local.", []string{n3.IP})
		if err := n2.Stop(ctx, mode); err != nil {
			t.Fatal(err)
		}
		e.waitFor(t, "primary.db.local.", nil)
		if err := n2.Start(ctx); err != nil {
			t.Fatal(err)
		}
		e.waitFor(t, "primary.db.local.", []string{n2.IP})
		// Past where the run before was seen inserting (the open
		// transaction's WAL): positions below are in the restart's window.
		onB := writeAndTakeLSN(t, n2.Conn(t), "INSERT INTO t (v) SELECT 'after a "+mode+" restart' FROM generate_series(1, 200)")
		waitStreaming(t, n3, 2, onB)
		// The price of rule 13: a restart cannot be told from a restore or
		// a rebuild, so the token of the write before it is refused by every
		// name (clients fall back to the primary by their DSN), although n3
		// has it; the write after it is proven by position.
		refusedAfterRestart(t, e, onA, "-t2")
		e.waitFor(t, "lsn-"+onB+"-t2.replica.db.local.", []string{n3.IP})
		e.holds(t, "lsn-"+onB+"-t2.replica.db.local.", 300*time.Millisecond, exactly(n3.IP), "n3, which has the write, after n2's "+mode+" restart")
	}
	if logs := e.logs.String(); strings.Contains(logs, "timeline forked") {
		t.Errorf("a restart of the first writer forked the timeline:\n%s", logs)
	}
}
