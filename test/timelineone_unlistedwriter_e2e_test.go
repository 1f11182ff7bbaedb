package test

// Timeline 1 has branches too. A standby started without standby.signal
// (an operator's slip, a copy for a test started from a snapshot of a
// standby) ends its recovery on the timeline it was on and is writable
// there: a second writer of timeline 1, which no timeline number tells
// from the primary. A listed replica streaming from such a writer that
// pgdns does not list replays that writer's branch, not the primary's,
// and its replay position passes the primary's positions as the writer
// writes (review 15c: lsn-W.replica and lsn-W-t1.replica answered it for
// the primary's write W, which it lacked, and replica answered it at a
// byte lag measured across the two branches).

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// n1 is the primary on timeline 1, n2, n3 and n4 its replicas; pgdns lists
// n1, n2 and n3. n3 is re-pointed at n4 (cascading), and n4 is restarted
// without standby.signal: writable on timeline 1 beside n1. n1 writes W
// and more; n4 writes until its position is past W but behind n1's, and
// n3 replays n4's writes: its replay position is past W, its data n4's.
func TestReplicaOfAnUnlistedWriterOfTimelineOneStaysAside(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(4)})
	n1, n2, n3, n4 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2], pg.Nodes[3]
	ctx := context.Background()
	common := writeAndTakeLSN(t, n1.Conn(t), "CREATE TABLE t (id serial PRIMARY KEY, v text)")
	for _, n := range []*pgtest.Node{n2, n3, n4} {
		waitStreaming(t, n, 1, common)
	}
	e := attach(t, pg, envOptions{Hosts: []string{n1.Addr(), n2.Addr(), n3.Addr()}})
	e.waitFor(t, "replica.db.local.", []string{n2.IP, n3.IP})

	n3.Follow(t, n4)
	waitSender := func(what string) {
		t.Helper()
		testkit.Eventually(t, 30*time.Second, 50*time.Millisecond, "n3 to stream from n4 "+what, func() (string, bool) {
			var got string
			err := n3.QueryOnce(ctx, "SELECT coalesce((SELECT sender_host || ' ' || status FROM pg_stat_wal_receiver), '')", &got)
			return got, err == nil && got == n4.IP+" streaming"
		})
	}
	waitSender("as its standby")
	if err := n4.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	// n1 moves ahead of where n4 stopped, so that n4's end-of-recovery
	// checkpoint, which n3 replays first, does not put n3 past n1 (a
	// fork proven by position, which a busier n1 does not give).
	c1 := n1.Conn(t)
	writeAndTakeLSN(t, c1, "INSERT INTO t (v) SELECT repeat('z', 1000) FROM generate_series(1, 300)")
	if err := os.Remove(filepath.Join(n4.Dir, "standby.signal")); err != nil {
		t.Fatal(err)
	}
	if err := n4.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var inRecovery bool
	var tl int
	n4.Query(t, "SELECT pg_is_in_recovery(), timeline_id FROM pg_control_checkpoint()", &inRecovery, &tl)
	if inRecovery || tl != 1 {
		t.Fatalf("n4 in recovery %v on timeline %d, want writable on timeline 1", inRecovery, tl)
	}
	waitSender("writable")

	c4 := n4.Conn(t)
	writeAndTakeLSN(t, c1, "CREATE TABLE big1 AS SELECT repeat('x', 1000) AS v FROM generate_series(1, 4000)")
	w := writeAndTakeLSN(t, c1, "INSERT INTO t (v) VALUES ('on n1')")
	ahead := writeAndTakeLSN(t, c1, "CREATE TABLE big2 AS SELECT repeat('x', 1000) AS v FROM generate_series(1, 8000)")
	var at4 string
	for i := 0; ; i++ {
		at4 = writeAndTakeLSN(t, c4, "INSERT INTO t (v) SELECT repeat('y', 1000) FROM generate_series(1, 300)")
		if parseLSN(t, at4) > parseLSN(t, w) {
			break
		}
		if i > 200 {
			t.Fatalf("n4 never passed %s (at %s)", w, at4)
		}
	}
	if parseLSN(t, at4) >= parseLSN(t, ahead) {
		t.Fatalf("n4 at %s passed n1's %s: the test wants n3 behind n1", at4, ahead)
	}
	waitStreaming(t, n3, 1, at4)
	var has int
	n3.Query(t, "SELECT count(*) FROM t WHERE v = 'on n1'", &has)
	if has != 0 {
		t.Fatal("n3 has n1's write: not another branch")
	}
	t.Logf("W=%s n4 at %s n1 at %s", w, at4, ahead)

	names := []string{
		"lsn-" + w + ".replica.db.local.",
		"lsn-" + w + "-t1.replica.db.local.",
		"lsn-" + w + ".prefer-replica.db.local.",
		"replica.db.local.",
		"lag-10s.replica.db.local.",
		"any.db.local.",
	}
	for _, name := range names {
		e.holds(t, name, 2*time.Second, without(n3.IP), "n3 replays n4's branch of timeline 1, not n1's")
	}
	h := e.hostStates(t)[n3.Addr()]
	if h.Aside != "branch_unproven" || !strings.Contains(h.Note, n4.Addr()) {
		t.Errorf("n3: aside %q, note %q: want branch_unproven, the note naming its upstream %s", h.Aside, h.Note, n4.Addr())
	}
	t.Logf("n3: %s: %s", h.Aside, h.Note)
	// n2, n1's own replica, is answered throughout.
	e.waitFor(t, "lsn-"+w+".replica.db.local.", []string{n2.IP})

	// n1 goes down: no primary is answered, lsn- names are judged by
	// replay positions alone, and n3 must stay aside.
	if err := c1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n1.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	e.waitHost(t, n1.Addr(), "down", func(h hostState) bool { return h.Role == "down" })
	for _, name := range names {
		e.holds(t, name, 2*time.Second, without(n3.IP), "n3 replays n4's branch of timeline 1, n1 down")
	}
	h = e.hostStates(t)[n3.Addr()]
	if h.Aside != "branch_unproven" || !strings.Contains(h.Note, n4.Addr()) {
		t.Errorf("n3 with n1 down: aside %q, note %q: want branch_unproven, the note naming its upstream %s", h.Aside, h.Note, n4.Addr())
	}
	t.Logf("n3 with n1 down: %s: %s", h.Aside, h.Note)
	e.waitFor(t, "lsn-"+w+".replica.db.local.", []string{n2.IP})
}
