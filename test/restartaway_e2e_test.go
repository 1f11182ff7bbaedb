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
	n2 := e.pg.Nodes[1]
	ctx := context.Background()
	onA := branchA(t, e)
	// pgdns is away while the node is rebuilt (restarted for maintenance,
	// or cut off from that address): it comes back with its state file.
	if err := e.app.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	// The same address, another server run: a copy of n3, promoted.
	branchB(t, pg, onA, true)
	e = launch(t, pg, envOptions{State: statePath})
	e.waitFor(t, "primary.db.local.", []string{n2.IP})
	for _, name := range []string{"lsn-" + onA + "-t2.replica.db.local.", "lsn-" + onA + "-t2.prefer-replica.db.local.",
		"lsn-" + onA + ".replica.db.local."} {
		e.holds(t, name, time.Second, exactly(), "replicas of branch B of timeline 2, which lack the write of the token (made on branch A, by the server n2's address had before)")
	}
}
