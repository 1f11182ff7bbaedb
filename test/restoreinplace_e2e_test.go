package test

// Review 6, G5: a primary restored in place from a copy taken before a
// write (a disk snapshot, a backup restored without a new timeline) comes
// back writable on the same timeline at the same address with a new start
// time: the write is gone from every host. pgdns sees the branches (the
// replicas that had the write are "another branch of timeline 1") but
// takes the restored primary for the same server restarted, and answers a
// token of the lost write with a replica cloned from the restored primary.

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/testkit"
)

func TestTokenOfAWriteLostToARestoreInPlace(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{Nodes: 3})
	n1, n2, n3 := e.pg.Nodes[0], e.pg.Nodes[1], e.pg.Nodes[2]
	e.waitFor(t, "replica.db.local.", []string{n2.IP, n3.IP})
	ctx := context.Background()
	e.insertAndTakeLSN(t, n1)
	// n3 stops before the snapshot, so that it never has WAL of n1's run
	// after it: a replica read past the restored n1 is proven on another
	// branch (rule 1, review 7 H2), and stays aside across a re-clone,
	// which pgdns cannot tell from a restart (G7b). The re-clone below is
	// of a replica pgdns never saw on the dead branch.
	if err := n3.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}

	// The snapshot: a copy of n1's data directory, taken while it is stopped.
	snap := snapshotInPlace(t, e, n1)
	lost := writeAndTakeLSN(t, n1.Conn(t), "INSERT INTO t (v) VALUES ('lost to the restore')")
	waitStreaming(t, n2, 1, lost)
	// pgdns probes n1 at or past the token (a fixed 300 ms was three
	// probes on a quiet machine, maybe none under load).
	e.waitHost(t, n1.Addr(), "probed at or past the token", func(h hostState) bool { return replayedPast(t, h, lost) })

	// The restore: n1's directory replaced by the snapshot, n1 started:
	// writable on timeline 1 again, before the write, at the same address.
	restoreInPlace(t, n1, snap)
	var has int
	n1.Query(t, "SELECT count(*) FROM t WHERE v = 'lost to the restore'", &has)
	if has != 0 {
		t.Fatalf("the restored n1 has the write (%d rows)", has)
	}
	// A replica made anew from the restored primary, which writes on past
	// the token's position.
	recloneWritingPast(t, n3, n1, lost, 1000)
	n3.Query(t, "SELECT count(*) FROM t WHERE v = 'lost to the restore'", &has)
	if has != 0 {
		t.Fatalf("n3 has the write (%d rows)", has)
	}
	e.waitFor(t, "primary.db.local.", []string{n1.IP})
	// (n2, stuck where the old run left it, has the write: it may be
	// answered for the token, or set aside as another branch.)
	testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "replica.db.local to answer n3", func() ([]string, bool) {
		got := e.ips(t, "replica.db.local.")
		return got, slices.Contains(got, n3.IP)
	})
	for _, name := range []string{"lsn-" + lost + ".replica.db.local.", "lsn-" + lost + "-t1.replica.db.local."} {
		e.holds(t, name, time.Second, without(n3.IP), "n3, cloned from the restored n1, which lacks the write of the token (lost with the restore)")
	}
}
