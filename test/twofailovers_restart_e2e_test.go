package test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/testkit"
)

// TestRestartAfterTwoFailoversWhilePgdnsWasDown: pgdns (with a state
// file) sees n1 primary on timeline 1 and n4 cascading from n3, and stops.
// While it is down: n1 stops, n2 is promoted (timeline 2), n3 follows it
// (n4 with it); n3 stops receiving, n2 takes a write L that nobody else
// gets, crashes, and n3 is promoted (timeline 3; n4 follows). pgdns
// restarts knowing timeline 1 only, and no history pgdns has read: n3 is
// the primary, n4 its replica with the writes of timelines 1, 2 (up to the
// fork) and 3, and L's token on timeline 2 is answered by no name.
func TestRestartAfterTwoFailoversWhilePgdnsWasDown(t *testing.T) {
	t.Parallel()
	state := filepath.Join(t.TempDir(), "state.json")
	e := newEnv(t, envOptions{Nodes: 4, State: state})
	n1, n2, n3, n4 := e.pg.Nodes[0], e.pg.Nodes[1], e.pg.Nodes[2], e.pg.Nodes[3]
	n4.Follow(t, n3)
	ctx := context.Background()
	w1 := e.insertAndTakeLSN(t, n1)
	for _, n := range e.pg.Nodes[1:] {
		waitStreaming(t, n, 1, w1)
	}
	e.waitFor(t, "lsn-"+w1+"-t1.replica.db.local.", []string{n2.IP, n3.IP, n4.IP})
	if err := e.app.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	if err := n1.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	if err := n2.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	n3.Follow(t, n2)
	w2 := e.insertAndTakeLSN(t, n2)
	waitStreaming(t, n3, 2, w2)
	waitStreaming(t, n4, 2, w2)
	n3.Exec(t, "ALTER SYSTEM SET primary_conninfo = ''")
	n3.Exec(t, "SELECT pg_reload_conf()")
	testkit.Eventually(t, 30*time.Second, 50*time.Millisecond, "n3's WAL receiver to stop", func() (int, bool) {
		var n int
		n3.Query(t, "SELECT count(*) FROM pg_stat_wal_receiver", &n)
		return n, n == 0
	})
	lost := e.insertAndTakeLSN(t, n2) // only n2 has it
	if err := n2.Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	if err := n3.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	w3 := writeAndTakeLSN(t, n3.Conn(t), "CREATE TABLE t3 AS SELECT repeat('z', 1000) AS v FROM generate_series(1, 300)")
	waitStreaming(t, n4, 3, w3)

	e = launch(t, e.pg, envOptions{State: state})
	e.waitFor(t, "primary.db.local.", []string{n3.IP})
	e.waitFor(t, "replica.db.local.", []string{n4.IP})
	for _, tok := range []string{w1 + "-t1", w2 + "-t2", w3 + "-t3", w3} {
		e.waitFor(t, "lsn-"+tok+".replica.db.local.", []string{n4.IP})
	}
	for _, name := range []string{"lsn-" + lost + "-t2.replica.db.local.", "lsn-" + lost + "-t2.any.db.local.", "lsn-" + lost + "-t2.prefer-replica.db.local."} {
		e.holds(t, name, time.Second, exactly(), "L, a write of timeline 2 past where timeline 3 forked from it")
	}
}
