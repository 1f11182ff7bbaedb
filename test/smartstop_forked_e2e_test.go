package test

// A replica proven on another branch than the primary's (rule 1,
// "forked") while the primary stops in smart mode with a client session
// open: pgdns keeps probing the stopping primary (set aside as stopping,
// probe/lingering.go), so no primary is answered, and the replica must
// stay aside as it does while that primary is down.

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// n1 is the primary on timeline 1, n2, n3 and n4 its replicas; pgdns
// lists n1, n2 and n3 (n4 is a standby it does not probe: a DR site's).
// n3's WAL receiver is stopped, n1 writes on and crashes; n4 is promoted
// (timeline 2) and n2 follows it and replays its writes; then n3, which
// never saw n4's history file, is promoted too and takes timeline 2 from
// an earlier point. pgdns saw one writer of timeline 2, n3, the primary:
// n2, on n4's branch, is set aside as forked (its history file, and its
// position). n1 is re-cloned from n3, its replica. Then n3 is stopped in
// smart mode while a client's session stays open: pgdns sets it aside as
// stopping and answers no primary. n2 still holds n4's writes and lacks
// n3's: no name may answer it while n3 stops. Before, replica,
// prefer-replica and any answered it the moment n3 was seen stopping, and
// so did lsn- tokens of n3's writes, which it lacks: the rule that keeps a
// replica proven against a primary that went down aside looked only at
// servers that were down, and the stopping n3 is live. n1 is answered
// throughout.
func TestForkedReplicaStaysAsideWhileThePrimaryStopsSmartly(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(4)})
	n1, n2, n3, n4 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2], pg.Nodes[3]
	e := attach(t, pg, envOptions{Hosts: []string{n1.Addr(), n2.Addr(), n3.Addr()}})
	e.waitFor(t, "replica.db.local.", []string{n2.IP, n3.IP})
	ctx := context.Background()
	waitStreaming(t, n3, 1, e.insertAndTakeLSN(t, n1))

	n3.Exec(t, "ALTER SYSTEM SET primary_conninfo = ''")
	n3.Exec(t, "SELECT pg_reload_conf()")
	testkit.Eventually(t, 30*time.Second, 50*time.Millisecond, "n3's WAL receiver to stop", func() (int, bool) {
		var n int
		n3.Query(t, "SELECT count(*) FROM pg_stat_wal_receiver", &n)
		return n, n == 0
	})
	last := e.insertAndTakeLSN(t, n1) // n2 and n4 have it, n3 does not
	waitStreaming(t, n2, 1, last)
	waitStreaming(t, n4, 1, last)
	if err := n1.Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	if err := n4.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	n2.Follow(t, n4)
	onN4 := writeAndTakeLSN(t, n4.Conn(t), "CREATE TABLE big AS SELECT repeat('x', 1000) AS v FROM generate_series(1, 3000)")
	waitStreaming(t, n2, 2, onN4)

	if err := n3.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	n3.Exec(t, "CHECKPOINT") // the promotion's checkpoint may be spread: timeline_id is the last one's
	var tl int
	n3.Query(t, "SELECT timeline_id FROM pg_control_checkpoint()", &tl)
	if tl != 2 {
		t.Fatalf("n3 promoted to timeline %d, want 2 (the number n4 took)", tl)
	}
	e.waitFor(t, "primary.db.local.", []string{n3.IP})
	e.waitHost(t, n2.Addr(), "set aside as another branch", func(h hostState) bool { return h.Aside == "forked" })

	// n1 anew from n3: its replica, on n3's branch.
	if err := n1.Reclone(ctx, n3); err != nil {
		t.Fatal(err)
	}
	c3 := n3.Conn(t)
	mine := writeAndTakeLSN(t, c3, "INSERT INTO t (v) VALUES ('on n3')")
	if err := c3.Close(ctx); err != nil { // the client below is the only one the smart stop waits for
		t.Fatal(err)
	}
	waitStreaming(t, n1, 2, mine)
	e.waitFor(t, "replica.db.local.", []string{n1.IP})
	// n4 writes on past n3's write (the copy moved n3 to a new WAL
	// segment), and n2 replays it: its position is past the token's,
	// which it lacks.
	c4 := n4.Conn(t)
	for uint64(positionOf(t, n4, "pg_current_wal_insert_lsn()")) <= parseLSN(t, mine)+64<<10 {
		if _, err := c4.Exec(ctx, "INSERT INTO big SELECT repeat('z', 1000) FROM generate_series(1, 2000)"); err != nil {
			t.Fatal(err)
		}
	}
	waitStreaming(t, n2, 2, writeAndTakeLSN(t, c4, "INSERT INTO big VALUES ('on n4')"))
	var has int
	n2.Query(t, "SELECT count(*) FROM t WHERE v = 'on n3'", &has)
	if has != 0 {
		t.Fatalf("n2 has n3's write (%d rows): not another branch", has)
	}

	client := n3.Conn(t) // the session the smart stop waits for
	stopped := make(chan error, 1)
	go func() { stopped <- n3.Stop(ctx, "smart") }()
	e.waitFor(t, "primary.db.local.", nil)
	e.waitHost(t, n3.Addr(), "set aside as stopping", func(h hostState) bool { return h.Aside == "stopping" })
	names := []string{"replica.db.local.", "prefer-replica.db.local.", "any.db.local.", "lag-10s.replica.db.local."}
	for _, role := range []string{"replica", "prefer-replica", "any"} {
		names = append(names, "lsn-"+mine+"."+role+".db.local.", "lsn-"+mine+"-t2."+role+".db.local.")
	}
	for _, name := range names { // each name checked, so that a failure lists every one that answers n2
		var got []string
		if n, held := testkit.Holds(time.Second, 50*time.Millisecond, func() bool {
			got = e.ips(t, name)
			return !slices.Contains(got, n2.IP)
		}); !held {
			t.Errorf("after %d lookups %s answered %v: n2, which holds n4's writes and lacks n3's, while n3 stops (evidence %q)",
				n, name, got, e.txt(t, name))
		}
	}
	if h := e.hostStates(t)[n2.Addr()]; h.Aside != "forked" {
		t.Errorf("n2 while n3 stops: aside %q (%s), want forked", h.Aside, h.Note)
	}
	// n1, n3's own replica, is answered while n3 stops: only n2 is kept
	// out.
	e.waitFor(t, "replica.db.local.", []string{n1.IP})
	if h := e.hostStates(t)[n3.Addr()]; h.Aside != "stopping" {
		t.Fatalf("n3 no longer stopping at the end of the checks: %+v", h)
	}
	select {
	case err := <-stopped:
		t.Fatalf("the smart stop of n3 ended (%v) with the client's session open", err)
	default:
	}

	if err := client.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("smart stop of n3 once its client left: %v", err)
	}
	for _, name := range []string{"replica.db.local.", "any.db.local."} {
		e.holds(t, name, 500*time.Millisecond, without(n2.IP), "n2, while n3 is down")
	}
}
