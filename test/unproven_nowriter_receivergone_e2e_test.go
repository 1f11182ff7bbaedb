package test

// With no writer of the newest timeline seen since pgdns started (its
// state file names one, down since), a replica whose WAL receiver streams
// from a host the cluster does not list is set aside (rule 1): the
// unlisted host may be a writer pgdns never saw. It must stay aside once
// its receiver stops, as that unlisted upstream goes down: nothing tells
// more of its branch then. Before, it was answered the moment its
// receiver was gone.

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// n1 is the primary on timeline 1, n2, n3 and n4 its replicas; the probe
// role has pg_monitor but may not call pg_read_file. n1 crashes; n2 is
// promoted (timeline 2) and n4, which never saw n2's history file, is
// promoted too and takes timeline 2 as well: a writer pgdns never sees (a
// DR site's). n3 follows n4; n2 writes on. pgdns, with a state file, lists
// n1, n2 and n3 and learns n2 as timeline 2's writer. It stops, n2 stops,
// and pgdns starts again from the file: no writer of timeline 2 is seen,
// n3 streams from n4, unlisted: set aside. Then n4 goes down: n3, which
// holds n4's branch and none of n2's writes, must still be answered by no
// name.
func TestNoWriterSeenReplicaOfAnUnlistedHostStaysAsideOnceItsReceiverIsGone(t *testing.T) {
	t.Parallel()
	pg, dsn := twoWritersOfTimelineTwo(t, "nowriter21mon")
	n1, n2, n3, n4 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2], pg.Nodes[3]
	ctx := context.Background()
	writeAndTakeLSN(t, n2.Conn(t), "INSERT INTO t (v) VALUES ('on n2')")

	o := envOptions{DSN: dsn, Hosts: []string{n1.Addr(), n2.Addr(), n3.Addr()}, State: filepath.Join(t.TempDir(), "state.json")}
	e := launch(t, pg, o)
	e.waitFor(t, "primary.db.local.", []string{n2.IP})
	if err := e.app.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n2.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}

	e = launch(t, pg, o)
	e.waitHost(t, n3.Addr(), "set aside: it streams from n4, unlisted, and no writer of timeline 2 was seen", func(h hostState) bool {
		return h.Aside == "branch_unproven" && strings.Contains(h.Note, "which the cluster does not list")
	})
	names := []string{"replica.db.local.", "prefer-replica.db.local.", "any.db.local."}
	for _, name := range names {
		e.holds(t, name, time.Second, without(n3.IP), "n3, on n4's branch, streaming from n4")
	}

	if err := n4.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		e.holds(t, name, 3*time.Second, without(n3.IP), "n3, on n4's branch, its receiver gone with n4")
	}
	h := e.hostStates(t)[n3.Addr()]
	if h.Aside != "branch_unproven" {
		t.Errorf("n3 once n4 is down: aside %q (%s), want branch_unproven", h.Aside, h.Note)
	}
	t.Logf("n3 once n4 is down: %s", h.Note)
}
