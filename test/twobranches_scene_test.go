package test

import (
	"context"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/testkit"
)

// n2sBranch is the first half of the scene of two branches of one
// timeline, on e's four nodes, n3, n2, n1 and n4 (e.pg.Nodes[0] to [3]):
// n1's WAL receiver is turned off, so that it stays behind; n3, the
// primary, writes (n2 and n4 have it, n1 does not) and crashes; n2 is
// promoted (the next timeline), and n4 follows it and replays n2's
// writes. It returns once pgdns answers n2 as the primary and n4 as its
// replica; the test then loses n2 and promotes n1, which never saw n2's
// history file, to the same timeline number.
func n2sBranch(t *testing.T, e *env) {
	t.Helper()
	n3, n2, n1, n4 := e.pg.Nodes[0], e.pg.Nodes[1], e.pg.Nodes[2], e.pg.Nodes[3]
	ctx := context.Background()
	n1.Exec(t, "ALTER SYSTEM SET primary_conninfo = ''")
	n1.Exec(t, "SELECT pg_reload_conf()")
	testkit.Eventually(t, 30*time.Second, 50*time.Millisecond, "n1's WAL receiver to stop", func() (int, bool) {
		var n int
		n1.Query(t, "SELECT count(*) FROM pg_stat_wal_receiver", &n)
		return n, n == 0
	})
	last := e.insertAndTakeLSN(t, n3) // n2 and n4 have it, n1 does not
	waitStreaming(t, n2, 1, last)
	waitStreaming(t, n4, 1, last)
	if err := n3.Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	if err := n2.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	n4.Follow(t, n2)
	onN2 := writeAndTakeLSN(t, n2.Conn(t), "CREATE TABLE big AS SELECT repeat('x', 1000) AS v FROM generate_series(1, 3000)")
	waitStreaming(t, n4, 2, onN2)
	e.waitFor(t, "primary.db.local.", []string{n2.IP})
	e.waitFor(t, "replica.db.local.", []string{n4.IP})
}
