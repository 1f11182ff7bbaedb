package test

// Review 9, R9-2: with the documented probe role (pg_monitor, which may not
// call pg_read_file: no timeline history file is read) pgdns knows where an
// old timeline ended only from a switch it watched, a lower bound. A -t1
// token past that bound is not proven in timeline 2's history, and the new
// primary on timeline 2 is no more proof of it than a replica is: no name
// answers it, and TXT and /v1/resolve say what is missing.

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// monitorRole makes login role role with pg_monitor only on n1 and waits
// until every node has it; it returns the probe DSN for it.
func monitorRole(t *testing.T, pg *pgtest.Cluster, role string) string {
	t.Helper()
	pg.Nodes[0].Exec(t, "CREATE ROLE "+role+" LOGIN IN ROLE pg_monitor")
	for _, n := range pg.Nodes[1:] {
		testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "the role on "+n.Name, func() (bool, bool) {
			var ok bool
			err := n.QueryOnce(context.Background(), "SELECT count(*) = 1 FROM pg_roles WHERE rolname = '"+role+"'", &ok)
			return ok, err == nil && ok
		})
	}
	return "user=" + role + " dbname=postgres sslmode=disable"
}

// hasUnprovable reports whether TXT strings txt hold an unprovable= string
// containing want.
func hasUnprovable(txt []string, want string) bool {
	return slices.ContainsFunc(txt, func(s string) bool { return strings.HasPrefix(s, "unprovable=") && strings.Contains(s, want) })
}

// An ordinary lossy failover: n2's WAL receiver is cut off, n1 writes a row
// and pgdns probes n1 past it, n1 crashes, n2 is promoted without the row
// and writes past its position. The row's -t1 token was answered by any
// and prefer-replica with n2 (main 91a3ddf), which lacks it.
func TestMonitorRoleLostWriteTokenIsAnsweredByNoName(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(2)})
	dsn := monitorRole(t, pg, "lost9watch")
	e := attach(t, pg, envOptions{DSN: dsn, LSNWait: "20ms"}) // the default dns.lsn_wait
	n1, n2 := pg.Nodes[0], pg.Nodes[1]
	e.waitFor(t, "replica.db.local.", []string{n2.IP})
	common := e.insertAndTakeLSN(t, n1)
	waitStreaming(t, n2, 1, common)
	// pgdns must see n2 streaming past the common row before the cut:
	// the watched switch's lower bound is n2's last replay position seen
	// while its receiver ran (probe/timelines.go). On a quiet machine the
	// cut came within one probe interval, before pgdns sampled n2 there,
	// and the bound stayed below the common row, which was then refused
	// (rightly, failing closed) instead of answered by n2.
	e.waitFor(t, "lsn-"+common+".replica.db.local.", []string{n2.IP})
	n2.Exec(t, "ALTER SYSTEM SET primary_conninfo = 'host=127.0.0.1 port=1 user=nobody'")
	n2.Exec(t, "SELECT pg_reload_conf()")
	testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "n2's receiver to stop", func() (string, bool) {
		var n int
		n1.Query(t, "SELECT count(*) FROM pg_stat_replication", &n)
		return "", n == 0
	})
	lost := writeAndTakeLSN(t, n1.Conn(t), "INSERT INTO t (v) VALUES ('lost')")
	time.Sleep(time.Second) // pgdns probes n1 past the write
	if err := n1.Stop(context.Background(), "immediate"); err != nil {
		t.Fatal(err)
	}
	if err := n2.Promote(context.Background()); err != nil {
		t.Fatal(err)
	}
	var has int
	n2.Query(t, "SELECT count(*) FROM t WHERE v = 'lost'", &has)
	if has != 0 {
		t.Fatal("n2 has the row: the test proves nothing")
	}
	e.waitFor(t, "primary.db.local.", []string{n2.IP})
	c2 := n2.Conn(t)
	var later string
	testkit.Eventually(t, 20*time.Second, 10*time.Millisecond, "timeline 2 past the lost position", func() (string, bool) {
		later = writeAndTakeLSN(t, c2, "INSERT INTO t (v) VALUES ('on n2')")
		return later, parseLSN(t, later) > parseLSN(t, lost)
	})
	// Timeline 2's own tokens, and timeline 1's before the watched switch,
	// are answered by the primary as before.
	e.waitFor(t, "lsn-"+later+"-t2.any.db.local.", []string{n2.IP})
	e.waitFor(t, "lsn-"+common+"-t1.any.db.local.", []string{n2.IP})
	for _, target := range []string{"any", "prefer-replica", "primary"} {
		name := "lsn-" + lost + "-t1." + target + ".db.local."
		e.holds(t, name, time.Second, exactly(), "n2, promoted without the row")
		txt := e.txt(t, name)
		if !hasUnprovable(txt, "where timeline 1 ended is not known past ") || !hasUnprovable(txt, "pg_read_file") {
			t.Errorf("%s: TXT %q, want an unprovable= string naming the missing history file", name, txt)
		}
	}
	why := resolveReason(t, e, "lsn-"+lost+"-t1.prefer-replica", n2.Addr())
	if !strings.HasPrefix(why, "primary: ") || !strings.Contains(why, " on timeline 1 is not proven in timeline 2's history: ") {
		t.Errorf("/v1/resolve leaves n2 out for %q, want its history unproven", why)
	}
	t.Logf("lsn-%s-t1.prefer-replica: TXT %q; /v1/resolve %s: %q", lost, e.txt(t, "lsn-"+lost+"-t1.prefer-replica.db.local."), n2.Addr(), why)
}

// n2 is promoted with pg_promote() while n1 keeps running and taking
// writes, and n3 keeps following n1. A token of n1's write after the
// promotion, with -t1, was answered by any and prefer-replica with n2
// (main 91a3ddf): timeline 2 branched off before it.
func TestMonitorRoleOldWritersTokenAfterAPromotion(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(3)})
	oldWritersTokenAfterAPromotion(t, pg, monitorRole(t, pg, "lost9mon"), false)
}

// The same with a probe role without pg_monitor (docs/operating.md allows
// it): pgdns watches no switch and reads no history file, so it knows
// nothing of where timeline 1 ended. The token of n1's write without a
// timeline was answered by any and prefer-replica with n2 too (main
// 91a3ddf: nothing withdrawn without an end known).
func TestPlainRoleOldWritersTokenAfterAPromotion(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(3)})
	pg.Nodes[0].Exec(t, "CREATE ROLE lost9plain LOGIN")
	for _, n := range pg.Nodes[1:] {
		testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "the role on "+n.Name, func() (bool, bool) {
			var ok bool
			err := n.QueryOnce(context.Background(), "SELECT count(*) = 1 FROM pg_roles WHERE rolname = 'lost9plain'", &ok)
			return ok, err == nil && ok
		})
	}
	oldWritersTokenAfterAPromotion(t, pg, "user=lost9plain dbname=postgres sslmode=disable", true)
}

func oldWritersTokenAfterAPromotion(t *testing.T, pg *pgtest.Cluster, dsn string, plain bool) {
	e := attach(t, pg, envOptions{DSN: dsn})
	n1, n2, n3 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	if plain {
		// Without pg_read_all_stats no replica is proven to follow the
		// primary (decisions.md rule 1): both are set aside from the start.
		e.waitFor(t, "primary.db.local.", []string{n1.IP})
		waitHiddenAside(t, e, n2, n3)
	} else {
		e.waitFor(t, "replica.db.local.", []string{n2.IP, n3.IP})
	}
	common := e.insertAndTakeLSN(t, n1)
	waitStreaming(t, n3, 1, common)
	waitStreaming(t, n2, 1, common)
	n2.Exec(t, "SELECT pg_promote()")
	old := n1.Conn(t)
	var lost string
	for range 10 {
		lost = writeAndTakeLSN(t, old, "INSERT INTO t (v) VALUES ('on n1 after the promotion')")
	}
	waitStreaming(t, n3, 1, lost)
	e.waitFor(t, "primary.db.local.", []string{n2.IP})
	var has int
	n2.Query(t, "SELECT count(*) FROM t WHERE v = 'on n1 after the promotion'", &has)
	if has != 0 {
		t.Fatal("n2 has n1's writes after the promotion: the test proves nothing")
	}
	c2 := n2.Conn(t)
	testkit.Eventually(t, 20*time.Second, 10*time.Millisecond, "timeline 2 past n1's write", func() (string, bool) {
		now := writeAndTakeLSN(t, c2, "INSERT INTO t (v) VALUES ('on n2')")
		return now, parseLSN(t, now) > parseLSN(t, lost)
	})
	time.Sleep(time.Second) // pgdns probes n1 past its writes
	for _, name := range []string{"lsn-" + lost + "-t1.any.db.local.", "lsn-" + lost + "-t1.prefer-replica.db.local.",
		"lsn-" + lost + "-t1.replica.db.local.", "lsn-" + lost + ".any.db.local.", "lsn-" + lost + ".prefer-replica.db.local.",
		"lsn-" + lost + ".replica.db.local."} {
		e.holds(t, name, time.Second, exactly(), "a host without n1's write after the promotion")
		if txt := e.txt(t, name); !hasUnprovable(txt, "timeline 1") {
			t.Errorf("%s: TXT %q, want an unprovable= string", name, txt)
		}
	}
	for _, name := range []string{"replica.db.local.", "any.db.local.", "prefer-replica.db.local.", "lag-10s.replica.db.local."} {
		if ips := strings.Join(e.ips(t, name), ","); strings.Contains(ips, n3.IP) || strings.Contains(ips, n1.IP) {
			t.Errorf("%s answered %s: n3 follows n1, which timeline 2 superseded", name, ips)
		}
	}
	for _, name := range []string{"lsn-" + lost + "-t1.any.db.local.", "lsn-" + lost + ".any.db.local."} {
		t.Logf("%s: TXT %q", name, e.txt(t, name))
	}
}

// Review 9, R9-3: a clean switchover pgdns did not see (it was not
// running: here it starts after it, as after a restart) leaves a
// pg_monitor role nothing that bounds where timeline 1 ended, so a -t1
// token written long before the switch is answered by no name, the new
// primary included, with the grant that would tell in TXT; the grant,
// given while pgdns runs, gets it answered without a restart (a session
// found denied asks again every 10 s). docs/decisions.md, rule 9: what a
// pg_monitor role cannot prove.
func TestMonitorRoleTokenBeforeAnUnwatchedSwitchover(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(3)})
	const role = "unwatched9mon"
	dsn := monitorRole(t, pg, role)
	n1, n2, n3 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	conn := n1.Conn(t)
	if _, err := conn.Exec(context.Background(), "CREATE TABLE IF NOT EXISTS t (id serial PRIMARY KEY, v text)"); err != nil {
		t.Fatal(err)
	}
	early := writeAndTakeLSN(t, conn, "INSERT INTO t (v) VALUES ('before the switchover')")
	waitStreaming(t, n2, 1, early)
	waitStreaming(t, n3, 1, early)
	conn.Close(context.Background())
	if err := n1.Stop(context.Background(), "fast"); err != nil { // clean: n1 sends all its WAL first
		t.Fatal(err)
	}
	if err := n2.Promote(context.Background()); err != nil {
		t.Fatal(err)
	}
	var has int
	n2.Query(t, "SELECT count(*) FROM t WHERE v = 'before the switchover'", &has)
	if has != 1 {
		t.Fatal("n2 lacks the row written before the switchover: the test proves nothing")
	}
	n3.Follow(t, n2)
	waitStreaming(t, n3, 2, early)
	e := launch(t, pg, envOptions{DSN: dsn})
	e.waitFor(t, "primary.db.local.", []string{n2.IP})
	for _, target := range []string{"primary", "any"} {
		name := "lsn-" + early + "-t1." + target + ".db.local."
		e.holds(t, name, time.Second, exactly(), "n2 has the row, but a pg_monitor role cannot prove it without a watched switch")
		txt := e.txt(t, name)
		if !hasUnprovable(txt, "where timeline 1 ended is not known (no switch watched; no history file read: grant EXECUTE on pg_read_file to the probe role)") {
			t.Errorf("%s: TXT %q, want the unwatched switch and the grant named", name, txt)
		}
		t.Logf("%s: TXT %q", name, txt)
	}
	n2.Exec(t, "GRANT EXECUTE ON FUNCTION pg_read_file(text, bigint, bigint, boolean) TO "+role)
	e.waitWithin(t, 60*time.Second, "lsn-"+early+"-t1.primary.db.local.", []string{n2.IP})
	e.waitFor(t, "lsn-"+early+"-t1.any.db.local.", []string{n2.IP, n3.IP}) // n3 replayed it too
}
