package test

// A replica whose branch nothing proves (rule 1, branch_unproven: no
// history file readable to a pg_monitor role, no WAL sender row of the
// primary its own) while the primary stops in smart mode with a client
// session open, and then once it is down: no primary is answered, and
// the replica must stay aside. Before, setAsideUnprovenBranch did nothing
// without a primary, and replica answered it the moment the primary was
// seen stopping.

import (
	"context"
	"testing"
	"time"
)

// n1 is the primary on timeline 1, n2, n3 and n4 its replicas; the probe
// role has pg_monitor but may not call pg_read_file. n1 crashes; n2 is
// promoted (timeline 2) and n4, which never saw n2's history file, is
// promoted too and takes timeline 2 as well: a writer pgdns never sees (a
// DR site's). n3 follows n4; n2 writes on, so n3 is behind it. n1 is
// re-cloned from n2, its replica. pgdns, started now, lists n1, n2 and n3:
// n2 is the primary, n1 its replica, n3 branch_unproven (it streams from
// n4, which pgdns does not list). Then n2 stops in smart mode while a
// client's session stays open (stopping), and then is down: n3, which holds
// n4's branch and none of n2's writes, may be answered by no name; n1,
// n2's replica, is answered throughout.
func TestUnprovenBranchStaysAsideWhileThePrimaryStopsAndIsDown(t *testing.T) {
	t.Parallel()
	pg, dsn := twoWritersOfTimelineTwo(t, "unproven07mon")
	n1, n2, n3 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	ctx := context.Background()
	c2 := n2.Conn(t)
	writeAndTakeLSN(t, c2, "CREATE TABLE big AS SELECT repeat('x', 1000) AS v FROM generate_series(1, 3000)")
	mine := writeAndTakeLSN(t, c2, "INSERT INTO t (v) VALUES ('on n2')")
	if err := c2.Close(ctx); err != nil { // the client below is the only one the smart stop waits for
		t.Fatal(err)
	}
	if err := n1.Reclone(ctx, n2); err != nil {
		t.Fatal(err)
	}
	waitStreaming(t, n1, 2, mine)
	var has int
	n3.Query(t, "SELECT count(*) FROM t WHERE v = 'on n2'", &has)
	if has != 0 {
		t.Fatal("n3 has n2's write: not another branch")
	}

	e := launch(t, pg, envOptions{DSN: dsn, Hosts: []string{n1.Addr(), n2.Addr(), n3.Addr()}})
	e.waitFor(t, "primary.db.local.", []string{n2.IP})
	e.waitFor(t, "replica.db.local.", []string{n1.IP})
	e.waitHost(t, n3.Addr(), "set aside as branch_unproven", func(h hostState) bool { return h.Aside == "branch_unproven" })

	names := []string{"replica.db.local.", "prefer-replica.db.local.", "any.db.local.", "lag-10s.replica.db.local."}
	check := func(when string) {
		t.Helper()
		for _, name := range names {
			e.holds(t, name, time.Second, without(n3.IP), "n3, on n4's branch, "+when)
		}
		if h := e.hostStates(t)[n3.Addr()]; h.Aside != "branch_unproven" {
			t.Errorf("n3 %s: aside %q (%s), want branch_unproven", when, h.Aside, h.Note)
		} else {
			t.Logf("n3 %s: %s", when, h.Note)
		}
	}

	client := n2.Conn(t) // the session the smart stop waits for
	stopped := make(chan error, 1)
	go func() { stopped <- n2.Stop(ctx, "smart") }()
	e.waitFor(t, "primary.db.local.", nil)
	e.waitHost(t, n2.Addr(), "set aside as stopping", func(h hostState) bool { return h.Aside == "stopping" })
	check("while n2 stops")
	e.waitFor(t, "replica.db.local.", []string{n1.IP}) // n2's own replica, proven by its WAL sender on n2
	select {
	case err := <-stopped:
		t.Fatalf("the smart stop of n2 ended (%v) with the client's session open", err)
	default:
	}

	if err := client.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("smart stop of n2 once its client left: %v", err)
	}
	e.waitHost(t, n2.Addr(), "down", func(h hostState) bool { return h.Role == "down" })
	check("while n2 is down")
	// n1 streamed timeline 2 from n2 until n2 went down: still n2's
	// replica, answered.
	e.waitFor(t, "replica.db.local.", []string{n1.IP})
}
