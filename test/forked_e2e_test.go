package test

// Two branches under one timeline number (issue 22, case 6), against real
// PostgreSQL.

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// waitStreaming waits until replica n's WAL receiver streams timeline tl
// and it has replayed lsn (an lsn- token, "hi-lo").
func waitStreaming(t *testing.T, n *pgtest.Node, tl int, lsn string) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, 50*time.Millisecond, fmt.Sprintf("%s to stream timeline %d past %s", n.Name, tl, lsn), func() (string, bool) {
		var got string
		n.Query(t, fmt.Sprintf(`SELECT coalesce((SELECT received_tli FROM pg_stat_wal_receiver WHERE status = 'streaming'), 0)::text || ' ' ||
		  (pg_last_wal_replay_lsn() >= '%s'::pg_lsn)::text`, strings.Replace(lsn, "-", "/", 1)), &got)
		return got, got == fmt.Sprintf("%d true", tl)
	})
}

// n3 is the primary on timeline 2 (here: timeline 1), n1, n2 and n4 its
// replicas, n1 behind (its WAL receiver off). n3 crashes; n2 is promoted
// (the next timeline), n4 follows it and replays n2's writes; n2 is cut
// off from pgdns (frozen), and n1, which never saw n2's history file,
// is promoted too and picks the same timeline number. n1 is the primary;
// n4 holds n2's writes, not n1's, and was answered for replica, lag-50ms,
// bytes-0b and the timeline token of n1's write. Then n2 dies and n4 is
// re-pointed at n1, as after a failover: PostgreSQL takes the matching
// number, and n4 must stay out.
func TestTwoBranchesOfOneTimeline(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{Nodes: 4})
	n2, n1, n4 := e.pg.Nodes[1], e.pg.Nodes[2], e.pg.Nodes[3]
	e.waitFor(t, "replica.db.local.", []string{n1.IP, n2.IP, n4.IP})
	ctx := context.Background()

	n2sBranch(t, e)

	if err := n2.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := true
	defer func() {
		if frozen {
			_ = n2.Signal(syscall.SIGCONT)
		}
	}()
	e.waitFor(t, "primary.db.local.", nil)
	if err := n1.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	onN1 := e.insertAndTakeLSN(t, n1)
	var tl int
	n1.Query(t, "SELECT timeline_id FROM pg_control_checkpoint()", &tl)
	if tl != 2 {
		t.Fatalf("n1 promoted to timeline %d, want 2 (the number n2 took)", tl)
	}
	e.waitFor(t, "primary.db.local.", []string{n1.IP})
	h := e.waitHost(t, n4.Addr(), "was set aside as another branch", func(h hostState) bool { return h.Aside == "forked" })
	if h.Timeline == nil || *h.Timeline != 2 || !strings.Contains(h.Note, "another branch of timeline 2") {
		t.Errorf("n4: %+v", h)
	}
	names := []string{"replica.db.local.", "lag-50ms.replica.db.local.", "bytes-0b.replica.db.local.",
		"lsn-" + onN1 + "-t2.replica.db.local.", "lsn-" + onN1 + ".replica.db.local.", "any.db.local."}
	for _, name := range names {
		e.holds(t, name, 500*time.Millisecond, without(n4.IP), "n4, which holds n2's writes, not n1's")
	}

	// n2 dies; n1 writes past n4's position, so that positions alone no
	// longer tell; n4 is re-pointed at n1 (PostgreSQL takes the matching
	// number). What n4's position proved holds for its server, however
	// far n1 writes on, and across n4's restart.
	if err := n2.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	frozen = false
	n1.Exec(t, "CREATE TABLE bigger AS SELECT repeat('y', 1000) AS v FROM generate_series(1, 6000)")
	n4.Follow(t, n1)
	for _, name := range names {
		e.holds(t, name, time.Second, without(n4.IP), "n4, re-pointed at n1 with n2's writes")
	}
	if h := e.hostStates(t)[n4.Addr()]; h.Aside != "forked" {
		t.Errorf("n4 re-pointed at n1: %+v", h)
	}
	if err := n4.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	if err := n4.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// Its data is still n2's branch: the proof holds for its server across
	// the restart (review 6, G7b). n4 accepts sessions again (Start waits
	// for it): the holds below span many probes (every 100ms) of its new run.
	for _, name := range names {
		e.holds(t, name, time.Second, without(n4.IP), "n4, restarted with n2's writes")
	}
	if h := e.hostStates(t)[n4.Addr()]; h.Aside != "forked" || !strings.Contains(h.Note, "another branch of timeline 2") {
		t.Errorf("n4 restarted: %+v, want still set aside as another branch", h)
	}
	e.holds(t, "primary.db.local.", time.Second, exactly(n1.IP), "not n1")
}

// Review R7: with a pg_monitor probe role (no history files), n2 and n3
// are both promoted to timeline 2 from different points of timeline 1;
// n4 follows n2, which pgdns then loses (frozen). n3 is the primary; n4,
// behind it on the other branch (rows n3 never had, lacking rows it has),
// was answered by replica, bytes-1mb and prefer-replica: no position is
// ahead and no history file was read. It is in none of n3's WAL senders'
// rows, and is set aside as branch_unproven, which it was not before (or
// forked while its receiver still streams from n2: review 7, H10);
// while n2 was the primary, its row there proved n4 and it was answered.
func TestBranchUnprovenWithoutHistories(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(4)})
	n1, n2, n3, n4 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2], pg.Nodes[3]
	n1.Exec(t, "CREATE ROLE watcher LOGIN IN ROLE pg_monitor")
	e := attach(t, pg, envOptions{DSN: "user=watcher dbname=postgres sslmode=disable"})
	e.waitFor(t, "replica.db.local.", []string{n2.IP, n3.IP, n4.IP})
	ctx := context.Background()

	common := e.insertAndTakeLSN(t, n1)
	for _, n := range []*pgtest.Node{n2, n3, n4} {
		waitStreaming(t, n, 1, common)
	}
	for _, n := range []*pgtest.Node{n4, n2} {
		if err := n.Stop(ctx, "fast"); err != nil {
			t.Fatal(err)
		}
	}
	late := writeAndTakeLSN(t, n1.Conn(t), "CREATE TABLE late AS SELECT repeat('x', 100) AS v FROM generate_series(1, 1000)")
	waitStreaming(t, n3, 1, late)
	if err := n1.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}

	// Branch a: n2 promoted, n4 following it.
	if err := n2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n2.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n4.Start(ctx); err != nil {
		t.Fatal(err)
	}
	n4.Follow(t, n2)
	onA := writeAndTakeLSN(t, n2.Conn(t), "CREATE TABLE tl2a AS SELECT 1 AS v FROM generate_series(1, 5)")
	waitStreaming(t, n4, 2, onA)
	e.waitFor(t, "primary.db.local.", []string{n2.IP})
	e.waitFor(t, "replica.db.local.", []string{n4.IP}) // n2's WAL sender row proves it

	// pgdns loses n2; branch b: n3 promoted, never having seen n2's history.
	if err := n2.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = n2.Signal(syscall.SIGCONT) }()
	e.waitFor(t, "primary.db.local.", nil)
	if err := n3.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	n3.Exec(t, "CREATE TABLE tl2b AS SELECT repeat('y', 100) AS v FROM generate_series(1, 3000)")
	n3.Exec(t, "CHECKPOINT")
	var tl int
	n3.Query(t, "SELECT timeline_id FROM pg_control_checkpoint()", &tl)
	if tl != 2 {
		t.Fatalf("n3 promoted to timeline %d, want 2 (the number n2 took)", tl)
	}
	e.waitFor(t, "primary.db.local.", []string{n3.IP})

	// n4's WAL receiver still streams from n2 (frozen: until
	// wal_receiver_timeout), which pgdns last saw writable on timeline 2:
	// proven on n2's branch (forked, review 7 H10's end of a split brain);
	// once the receiver is gone, branch_unproven.
	h := e.waitHost(t, n4.Addr(), "was set aside, its branch unproven or forked", func(h hostState) bool {
		return h.Aside == "branch_unproven" || h.Aside == "forked"
	})
	if !strings.Contains(h.Note, "its WAL sender is not the primary: on timeline 2 its branch is unproven") &&
		!strings.Contains(h.Note, "its WAL receiver streams from "+n2.Addr()+", last seen writable on timeline 2 too") {
		t.Errorf("n4: %+v", h)
	}
	for _, name := range []string{"replica.db.local.", "bytes-1mb.replica.db.local.", "prefer-replica.db.local.", "any.db.local."} {
		e.holds(t, name, 500*time.Millisecond, without(n4.IP), "n4, on n2's branch of timeline 2")
	}
	_, body := e.get(t, http.DefaultClient, "/v1/resolve?name=replica.db.local.", "")
	if !strings.Contains(body, "its branch is unproven") && !strings.Contains(body, "another branch of timeline 2") {
		t.Errorf("/v1/resolve does not say why n4 is set aside: %s", body)
	}
}
