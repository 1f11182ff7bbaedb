package test

// A cascade across two failovers (review 12b): a replica cascading from a
// replica follows its upstream's promotion onto timeline 3, a write of
// timeline 2 that the promoted upstream never received is answered by no
// name (with and without -t2), the tokens of timelines 1 and 2 before the
// switches are, a new cascade on timeline 3 is, and the primary of
// timeline 2, started again, is superseded.

import (
	"context"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/testkit"
)

// expectAnswer asks name until it answers want (fails after 20 s), then
// logs the answer and its TXT.
func expectAnswer(t *testing.T, e *env, name string, want ...string) {
	t.Helper()
	e.waitFor(t, name, want)
	t.Logf("%s -> %v TXT %q", name, want, e.txt(t, name))
}

// neverAnswers checks that name answers none of ips for d, and logs what
// it answered and why.
func neverAnswers(t *testing.T, e *env, name string, d time.Duration, ips ...string) {
	t.Helper()
	for _, ip := range ips {
		e.holds(t, name, d, without(ip), "an address that lacks the write or is on a superseded timeline: "+ip)
	}
	t.Logf("%s never answered %v: answer %v TXT %q", name, ips, e.ips(t, name), e.txt(t, name))
}

// TestCascadeFollowsTwoFailovers: n1 primary, n2..n4 replicas. n1 stops
// (fast), n2 is promoted (timeline 2), n3 follows n2 and n4 cascades from
// n3. n3 is cut off, n2 writes W, n2 dies (immediate), n3 is promoted
// (timeline 3): n4 follows it through the cascade. n1 is re-cloned and
// streams from n4 (a cascade from a replica on timeline 3), and n2 is
// started again (writable on timeline 2).
func TestCascadeFollowsTwoFailovers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{Nodes: 4})
	n1, n2, n3, n4 := e.pg.Nodes[0], e.pg.Nodes[1], e.pg.Nodes[2], e.pg.Nodes[3]
	ctx := context.Background()
	e.waitFor(t, "replica.db.local.", []string{n2.IP, n3.IP, n4.IP})
	t1 := e.insertAndTakeLSN(t, n1)
	expectAnswer(t, e, "lsn-"+t1+"-t1.replica.db.local.", n2.IP, n3.IP, n4.IP)
	waitStreaming(t, n2, 1, t1)
	waitStreaming(t, n3, 1, t1)
	waitStreaming(t, n4, 1, t1)

	switchover(t, n1, n2)
	n3.Follow(t, n2)
	n4.Follow(t, n3)
	e.waitFor(t, "primary.db.local.", []string{n2.IP})
	conn2 := n2.Conn(t)
	t2 := writeAndTakeLSN(t, conn2, "INSERT INTO t (v) VALUES ('on timeline 2')")
	waitStreaming(t, n3, 2, t2)
	waitStreaming(t, n4, 2, t2)
	for _, name := range []string{"replica", "lag-1s.replica", "lsn-" + t2 + "-t2.replica", "lsn-" + t2 + ".replica", "lsn-" + t1 + "-t1.replica", "lsn-" + t1 + ".replica"} {
		expectAnswer(t, e, name+".db.local.", n3.IP, n4.IP)
	}
	expectAnswer(t, e, "sync.replica.db.local.")
	t.Logf("timeline 2: resolve replica %s", resolveBody(t, e, "replica"))

	// n3 is cut off from n2; n2 writes W, which n3 and n4 never get.
	n3.Exec(t, "ALTER SYSTEM SET primary_conninfo = 'host="+e.block.IP(99)+" port=5432 user=postgres connect_timeout=1'")
	n3.Exec(t, "SELECT pg_reload_conf()")
	// Its receiver from n2 has ended (the new one cannot connect), not
	// only been asked to: W is written after.
	testkit.Eventually(t, 30*time.Second, 20*time.Millisecond, "n3's receiver from n2 ended", func() (int, bool) {
		var fromN2 int
		n3.Query(t, "SELECT count(*)::int FROM pg_stat_wal_receiver WHERE position(' host="+n2.IP+" ' in ' ' || conninfo || ' ') > 0", &fromN2)
		return fromN2, fromN2 == 0
	})
	w := writeAndTakeLSN(t, conn2, "INSERT INTO t (v) SELECT 'lost on timeline 2' FROM generate_series(1, 100)")
	var onN3 int
	n3.Query(t, "SELECT count(*) FROM t WHERE v = 'lost on timeline 2'", &onN3)
	t.Logf("W at %s on timeline 2; rows of W on n3: %d", w, onN3)
	if onN3 != 0 {
		t.Fatalf("n3, cut off, has W: nothing to test")
	}
	e.waitHost(t, n2.Addr(), "probed past W", func(h hostState) bool { return replayedPast(t, h, w) })
	conn2.Close(ctx)
	if err := n2.Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	if err := n3.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", []string{n3.IP})
	t3 := writeAndTakeLSN(t, n3.Conn(t), "INSERT INTO t (v) SELECT 'on timeline 3' FROM generate_series(1, 300)")
	waitStreaming(t, n4, 3, t3)
	var n4has int
	n4.Query(t, "SELECT count(*) FROM t WHERE v = 'lost on timeline 2'", &n4has)
	t.Logf("timeline 3 at %s; n4 has %d rows of W", t3, n4has)
	if n4has != 0 {
		t.Fatalf("n4 has W: nothing to test")
	}
	expectAnswer(t, e, "replica.db.local.", n4.IP)
	expectAnswer(t, e, "lsn-"+t3+"-t3.replica.db.local.", n4.IP)
	expectAnswer(t, e, "lsn-"+t2+"-t2.replica.db.local.", n4.IP)
	expectAnswer(t, e, "lsn-"+t1+"-t1.replica.db.local.", n4.IP)
	for _, name := range []string{"lsn-" + w + "-t2.replica", "lsn-" + w + "-t2.any", "lsn-" + w + "-t2.prefer-replica", "lsn-" + w + ".any", "lsn-" + w + ".prefer-replica"} {
		neverAnswers(t, e, name+".db.local.", 2*time.Second, n3.IP, n4.IP)
	}
	t.Logf("W: resolve %s", resolveBody(t, e, "lsn-"+w+"-t2.any"))

	// n1 re-cloned from n4: a cascade from a replica on timeline 3.
	// (pgtest's full_page_writes = off forbids a backup from a standby:
	// clone from n3, then stream from n4.)
	if err := n1.Reclone(ctx, n3); err != nil {
		t.Fatal(err)
	}
	n1.Follow(t, n4)
	waitStreaming(t, n1, 3, t3)
	expectAnswer(t, e, "replica.db.local.", n1.IP, n4.IP)
	expectAnswer(t, e, "lag-1s.replica.db.local.", n1.IP, n4.IP)
	expectAnswer(t, e, "lsn-"+t1+"-t1.replica.db.local.", n1.IP, n4.IP)
	expectAnswer(t, e, "lsn-"+t2+"-t2.replica.db.local.", n1.IP, n4.IP)
	neverAnswers(t, e, "lsn-"+w+"-t2.any.db.local.", 2*time.Second, n1.IP, n3.IP, n4.IP)
	t.Logf("n1 cascading: resolve replica %s", resolveBody(t, e, "replica"))

	// n2 back, writable on timeline 2: superseded.
	if err := n2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	h := e.waitHost(t, n2.Addr(), "set aside", func(h hostState) bool { return h.Aside == "superseded" })
	t.Logf("n2 back: aside %q note %q", h.Aside, h.Note)
	e.holds(t, "primary.db.local.", 2*time.Second, exactly(n3.IP), "not the timeline 3 primary")
	neverAnswers(t, e, "any.db.local.", time.Second, n2.IP)
	neverAnswers(t, e, "lsn-"+w+"-t2.any.db.local.", time.Second, n2.IP)
}
