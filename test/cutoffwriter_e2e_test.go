package test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// cutOffWriterScene: n1 stops cleanly, so n2 and n3 have all its WAL; n2
// is promoted to timeline 2 and n4 follows it; then n2 is cut off from
// pgdns (a packet filter, table, on the address pgdns probes; the replicas
// stream over the nodes' other addresses, alt, as over a replication
// network). n3, which kept asking the stopped n1, never saw n2's history
// file: promoted, it takes timeline 2 again from the same point, and the
// two branches have equal history files. pgdns (with a state file) runs
// and answers no primary when the scene is set. With reporting, pgdns
// also serves a cluster "reporting" that lists n4 alone, under its other
// address (a name for read-only clients, listing a replica).
func cutOffWriterScene(t *testing.T, table string, reporting bool) (e *env, state string, alt func(string) string) {
	t.Helper()
	b := pgtest.Addrs(t)
	alt = func(ip string) string {
		i := strings.LastIndex(ip, ".")
		return ip[:i+1] + "1" + ip[i+1:]
	}
	pg := pgtest.New(t, pgtest.Options{IPs: b.IPs(4),
		Listen:   func(ip string) []string { return []string{alt(ip)} },
		Upstream: func(_, upstream string) string { return alt(upstream) }})
	state = filepath.Join(t.TempDir(), "state.json")
	o := envOptions{State: state}
	if reporting {
		o.DefaultCluster, o.Cluster = "main", "  reporting:\n    hosts: ["+alt(b.IP(4))+":5432]\n"
	}
	e = attach(t, pg, o)
	n1, n2, n3, n4 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2], pg.Nodes[3]
	e.waitFor(t, "replica.db.local.", []string{n2.IP, n3.IP, n4.IP})
	ctx := context.Background()
	common := e.insertAndTakeLSN(t, n1)
	for _, n := range []*pgtest.Node{n2, n3, n4} {
		waitStreaming(t, n, 1, common)
	}
	if err := n1.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	end, err := n1.CheckpointLSN(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []*pgtest.Node{n2, n3} {
		testkit.Eventually(t, 30*time.Second, 50*time.Millisecond, n.Name+" to replay n1's shutdown checkpoint", func() (bool, bool) {
			var done bool
			n.Query(t, "SELECT pg_last_wal_replay_lsn() > '"+end+"'::pg_lsn", &done)
			return done, done
		})
	}
	if err := n2.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n4.FollowContext(ctx, n2); err != nil { // over n2's other address
		t.Fatal(err)
	}
	onN2 := writeAndTakeLSN(t, n2.Conn(t), "CREATE TABLE t2 AS SELECT 1 AS v")
	waitStreaming(t, n4, 2, onN2)
	e.waitFor(t, "primary.db.local.", []string{n2.IP})
	e.waitFor(t, "replica.db.local.", []string{n4.IP})
	nftInput(t, table, "ip daddr "+n2.IP+" tcp dport 5432 drop")
	e.waitFor(t, "primary.db.local.", nil)
	return e, state, alt
}

// promoteN3 promotes n3, checks over ip (one of its addresses) that it
// took timeline 2, the number n2 took, and returns a session there.
func promoteN3(t *testing.T, n3 *pgtest.Node, ip string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	if err := n3.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, "host="+ip+" port=5432 user=postgres dbname=postgres sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	var tl int
	if err := conn.QueryRow(ctx, "SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int").Scan(&tl); err != nil {
		t.Fatal(err)
	}
	if tl != 2 {
		t.Fatalf("n3 promoted to timeline %d, want 2", tl)
	}
	return conn
}

// promoteN3Unseen is promoteN3 while pgdns cannot see n3 (nftables table
// table drops what reaches its address on 5432, lifted once it returns):
// n3 writes past n4, over ip, so that no position tells the branches
// apart.
func promoteN3Unseen(t *testing.T, n3 *pgtest.Node, ip, table string) {
	t.Helper()
	lift := nftInput(t, table, "ip daddr "+n3.IP+" tcp dport 5432 drop")
	conn := promoteN3(t, n3, ip)
	if _, err := conn.Exec(context.Background(), "CREATE TABLE big AS SELECT repeat('x', 1000) AS v FROM generate_series(1, 3000)"); err != nil {
		t.Fatal(err)
	}
	lift()
}

// readNames are the names that must never answer n4, the replica of n2's
// branch, once n3 is the primary.
var readNames = []string{"replica.db.local.", "any.db.local.", "prefer-replica.db.local.", "lag-10s.replica.db.local."}

// TestReplicaOfTheCutOffWriterAfterARestart: in cutOffWriterScene, n3 is
// promoted while pgdns runs; n4, streaming n2's branch, is set aside. pgdns
// restarts from its state file while n2 is still cut off: n4 stays out.
func TestReplicaOfTheCutOffWriterAfterARestart(t *testing.T) {
	t.Parallel()
	e, state, alt := cutOffWriterScene(t, "pgdns_test_cutoff1", false)
	n3, n4 := e.pg.Nodes[2], e.pg.Nodes[3]
	promoteN3(t, n3, alt(n3.IP))
	e.waitFor(t, "primary.db.local.", []string{n3.IP})
	e.waitHost(t, n4.Addr(), "set aside as n2's branch", func(h hostState) bool { return h.Aside == "forked" })
	for _, name := range readNames {
		e.holds(t, name, time.Second, without(n4.IP), "n4, which streams n2's branch")
	}
	if err := e.app.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	e = launch(t, e.pg, envOptions{State: state})
	e.waitFor(t, "primary.db.local.", []string{n3.IP})
	for _, name := range readNames {
		e.holds(t, name, 2*time.Second, without(n4.IP), "n4, which streams n2's branch, after pgdns restarted while n2 is cut off")
	}
}

// TestReplicaOfAWriterCutOffBeforeARestart: in cutOffWriterScene, pgdns
// restarts from its state file before n3 is promoted: the new run never
// sees n2, and knows it only as timeline 2's first writer. n3 is promoted
// and writes past n4 while pgdns cannot see it either, so that no position
// tells the branches apart, and the history files agree. n4, streaming
// n2's branch over the replication network, must not be answered as n3's
// replica (review 13, R13b-5: it was, agreeing history files taken for a
// proof of its branch on a timeline pgdns knew forked).
func TestReplicaOfAWriterCutOffBeforeARestart(t *testing.T) {
	t.Parallel()
	e, state, alt := cutOffWriterScene(t, "pgdns_test_cutoff2", false)
	n3, n4 := e.pg.Nodes[2], e.pg.Nodes[3]
	ctx := context.Background()
	if err := e.app.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	e = launch(t, e.pg, envOptions{State: state})
	e.waitFirstRound(t, "the restarted pgdns")
	promoteN3Unseen(t, n3, alt(n3.IP), "pgdns_test_cutoff3")
	e.waitFor(t, "primary.db.local.", []string{n3.IP})
	for _, name := range readNames {
		e.holds(t, name, 2*time.Second, without(n4.IP), "n4, which streams n2's branch (n2 cut off since before pgdns restarted)")
	}
}

// TestReplicaOfTheCutOffWriterWhileThePrimaryIsDown: in cutOffWriterScene,
// n3 is promoted and writes past n4 while pgdns cannot see it, so that no
// position tells the branches apart; n4, whose WAL receiver streams from
// n2 (last seen writable on timeline 2), is set aside while n3 is the
// primary. Then n3 stops: n4 still holds n2's branch, and no name may
// answer it (review 13, R13b-6: replica, any and prefer-replica did).
func TestReplicaOfTheCutOffWriterWhileThePrimaryIsDown(t *testing.T) {
	t.Parallel()
	e, _, alt := cutOffWriterScene(t, "pgdns_test_cutoff4", false)
	n3, n4 := e.pg.Nodes[2], e.pg.Nodes[3]
	ctx := context.Background()
	promoteN3Unseen(t, n3, alt(n3.IP), "pgdns_test_cutoff5")
	e.waitFor(t, "primary.db.local.", []string{n3.IP})
	for _, name := range readNames {
		e.holds(t, name, time.Second, without(n4.IP), "n4, which streams n2's branch")
	}
	if err := n3.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", nil)
	for _, name := range readNames {
		e.holds(t, name, time.Second, without(n4.IP), "n4, which streams n2's branch, while n3 is down")
	}
}

// TestReplicaOnlyClusterOfAForkedReplica: in cutOffWriterScene, with
// "reporting" listing n4 alone, n3 is promoted while pgdns sees it: main
// sees two writers of timeline 2 and sets n4, on n2's branch, aside.
// reporting sees no writer at all: replica.reporting must not answer n4
// either (review 13, R13b-7: it did, for good).
func TestReplicaOnlyClusterOfAForkedReplica(t *testing.T) {
	t.Parallel()
	e, _, alt := cutOffWriterScene(t, "pgdns_test_cutoff6", true)
	n3, n4 := e.pg.Nodes[2], e.pg.Nodes[3]
	promoteN3(t, n3, alt(n3.IP))
	e.waitFor(t, "primary.db.local.", []string{n3.IP})
	e.waitHost(t, n4.Addr(), "set aside as n2's branch", func(h hostState) bool { return h.Aside == "forked" })
	for _, name := range []string{"replica.reporting.db.local.", "any.reporting.db.local.", "prefer-replica.reporting.db.local."} {
		e.holds(t, name, time.Second, exactly(), "n4, which holds n2's branch, under the name that lists it alone")
	}
}
