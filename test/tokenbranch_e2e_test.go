package test

// Review 5, F12: a token of a write on the branch of a timeline that died,
// asked of a replica of the other branch of the same timeline number,
// against real PostgreSQL.

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// n1 is the primary, n2, n3 and n4 its replicas. n1 hangs; n2 is promoted
// (timeline 2) and pgdns answers it as the primary; a client writes there
// and takes its token with the timeline. n2 dies; n3, which never saw n2's
// history file, is promoted and takes timeline 2 as well; n4 follows n3
// and replays past the token's position. n4 never had the client's write:
// no replica name may answer it for that token.
func TestTokenOfTheOtherBranch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{Nodes: 4})
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
	onA := writeAndTakeLSN(t, n2.Conn(t), "INSERT INTO t (v) VALUES ('on n2')") // the client's write, on n2's branch
	if err := n2.Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", nil)

	if err := n3.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	var tl int
	n3.Query(t, "SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int", &tl)
	if tl != 2 {
		t.Fatalf("n3 promoted to timeline %d, want 2 (the number n2 took)", tl)
	}
	n4.Follow(t, n3)
	onB := writeAndTakeLSN(t, n3.Conn(t), "CREATE TABLE b AS SELECT repeat('y', 100) AS v FROM generate_series(1, 1000)")
	waitStreaming(t, n4, 2, onB)
	if parseLSN(t, onB) <= parseLSN(t, onA) {
		t.Fatalf("n3's branch %s is not past the token %s", onB, onA)
	}
	e.waitFor(t, "primary.db.local.", []string{n3.IP})
	e.waitFor(t, "replica.db.local.", []string{n4.IP})
	var has int
	n4.Query(t, "SELECT count(*) FROM t WHERE v = 'on n2'", &has)
	if has != 0 {
		t.Fatalf("n4 has the write made on n2 (%d rows): the branches did not fork", has)
	}

	names := []string{"lsn-" + onA + "-t2.replica.db.local.", "lsn-" + onA + "-t2.prefer-replica.db.local.", "lsn-" + onA + ".replica.db.local."}
	for _, name := range names {
		e.holds(t, name, time.Second, without(n4.IP), "n4, on n3's branch of timeline 2, which lacks the write of the token (made on n2's)")
	}

	// A reload that changes nothing hands what pgdns knows to the new
	// prober: the fork too (review 5, F12b: it was forgotten).
	next := *e.cfg
	if err := e.app.Reload(&next); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		e.holds(t, name, time.Second, without(n4.IP), "n4 after a reload: the fork of timeline 2 must be remembered")
	}
}
