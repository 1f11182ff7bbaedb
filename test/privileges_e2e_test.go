package test

// A probe role without pg_monitor: pg_stat_replication's and
// pg_stat_wal_receiver's details read as NULL (issue 22, case 4).

import (
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// leastPrivilege is the DSN of a probe role created without pg_monitor.
const leastPrivilege = "user=pgdns dbname=postgres sslmode=disable"

// grantHint ends the note of every replica set aside because its WAL
// receiver's timeline is hidden from the probe role: what to do.
const grantHint = "grant pg_monitor (or pg_read_all_stats) to the probe role"

// waitHiddenAside waits until each of nodes, replicas whose WAL
// receiver's timeline the probe role may not read (no pg_read_all_stats,
// on them and on the primary), is set aside in /v1/hosts, its note saying
// why and what to do: without the primary's statistics nothing proves
// such a replica follows the primary, and its lower bound, at the newest
// timeline or below it, may hide a later timeline (decisions.md rule 1).
// Then replica.db.local. answers none of them.
func waitHiddenAside(t *testing.T, e *env, nodes ...*pgtest.Node) {
	t.Helper()
	for _, n := range nodes {
		e.waitHost(t, n.Addr(), "set aside for its hidden timeline", func(h hostState) bool {
			return h.Aside != "" && strings.HasPrefix(h.Note, "timeline hidden from the probe role") && strings.HasSuffix(h.Note, grantHint)
		})
	}
	for _, n := range nodes {
		if ips := e.ips(t, "replica.db.local."); slices.Contains(ips, n.IP) {
			t.Fatalf("replica.db.local answered %v, %s among them, set aside for its hidden timeline", ips, n.IP)
		}
	}
}

// With replicas: async, a probe role that cannot read sync_state cannot
// prove any standby asynchronous while synchronous_standby_names is set;
// nor, without pg_read_all_stats on the primary, can it prove that any
// standby whose WAL receiver's timeline it cannot read follows the
// primary (decisions.md rule 1): no replica is answered, whatever the
// setting, each saying why and what to do (before review 13a's finding 3
// both were answered with the setting empty; fail closed: a lower bound
// of a timeline may hide a later one). Once the role is granted
// pg_monitor, the asynchronous standby is answered and the synchronous
// one left out. Each host says that its statistics are hidden in
// /v1/hosts and the metrics, and the log says it once per host.
func TestAsyncWithoutPgMonitor(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(3)})
	primary, syncStandby, asyncStandby := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	primary.Exec(t, "CREATE ROLE pgdns LOGIN")
	syncRows := func(want int) {
		t.Helper()
		testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "synchronous standbys", func() (int, bool) {
			var n int
			primary.Query(t, "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'", &n)
			return n, n == want
		})
	}
	setSyncNames := func(names string) {
		primary.Exec(t, "ALTER SYSTEM SET synchronous_standby_names = '"+names+"'")
		primary.Exec(t, "SELECT pg_reload_conf()")
	}
	setSyncNames(`"` + syncStandby.Name + `"`)
	syncRows(1)
	e := attach(t, pg, envOptions{Replicas: "async", DSN: leastPrivilege})

	waitHiddenAside(t, e, syncStandby, asyncStandby)
	e.waitFor(t, "replica.db.local.", nil)
	if passed, ok := testkit.Holds(2*time.Second, 50*time.Millisecond, func() bool {
		return len(e.ips(t, "replica.db.local.")) == 0
	}); !ok {
		t.Fatalf("after %d lookups replica.db.local answered a standby it cannot prove asynchronous: %v", passed, e.ips(t, "replica.db.local."))
	}
	_, hosts := e.get(t, http.DefaultClient, "/v1/hosts", "")
	if n := strings.Count(hosts, `"stats_hidden":true`); n != 3 {
		t.Errorf("/v1/hosts shows %d hosts with hidden statistics, want 3: %s", n, hosts)
	}
	_, metrics := e.get(t, http.DefaultClient, "/metrics", "")
	hidden := 0
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, "pgdns_host_stats_hidden{") && strings.HasSuffix(line, "} 1") {
			hidden++
		}
	}
	if hidden != 3 {
		t.Errorf("the metrics do not show the 3 hosts' hidden statistics:\n%s", metrics)
	}
	if n := strings.Count(e.logs.String(), "cannot read the replication statistics"); n != 3 {
		t.Errorf("the log says %d times that statistics are hidden, want once per host (3):\n%s", n, e.logs.String())
	}

	// No synchronous replication at all: every standby is provably
	// async, but none is proven to follow the primary.
	setSyncNames("")
	syncRows(0)
	if passed, ok := testkit.Holds(2*time.Second, 50*time.Millisecond, func() bool {
		return len(e.ips(t, "replica.db.local.")) == 0
	}); !ok {
		t.Fatalf("after %d lookups replica.db.local answered a standby whose timeline is hidden, with the primary's WAL senders hidden too: %v", passed, e.ips(t, "replica.db.local."))
	}
	if got := e.ips(t, "prefer-replica.db.local."); !slices.Equal(got, []string{primary.IP}) {
		t.Errorf("prefer-replica.db.local = %v, want the primary %s", got, primary.IP)
	}
	waitHiddenAside(t, e, syncStandby, asyncStandby)

	// With pg_monitor the rows are read, and the synchronous one is out.
	primary.Exec(t, "GRANT pg_monitor TO pgdns")
	setSyncNames(`"` + syncStandby.Name + `"`)
	syncRows(1)
	e.waitFor(t, "replica.db.local.", []string{asyncStandby.IP})
	testkit.Eventually(t, 10*time.Second, 50*time.Millisecond, "/v1/hosts without hidden statistics", func() (string, bool) {
		_, hosts := e.get(t, http.DefaultClient, "/v1/hosts", "")
		return hosts, !strings.Contains(hosts, `"stats_hidden":true`)
	})
}

// TestHiddenTimelineFollowerAnsweredOnlyWithPgMonitor: a replica whose WAL
// receiver's timeline the probe role cannot read has only lower bounds of
// it (its last restartpoint's, its minimum recovery point's): one older
// than the newest timeline is no evidence that it is superseded, one at
// the newest no evidence that it is on it (a promoted upstream pgdns never
// saw may have given it a later one), and with the primary's statistics
// hidden too nothing proves it follows the primary: the WAL sender on its
// slot may be pg_receivewal's or pg_basebackup's
// (TestRenamedWALClientOnTheOrphansSlotProvesNoFollower). So a follower
// re-pointed at a promoted replica is set aside, saying why and what to
// do, before its restartpoint on timeline 2 and after it; granted
// pg_monitor it is answered. Before review 13a it was answered at once, by
// its slot's sender; then (finding 1) from its restartpoint on timeline 2,
// until finding 3 (TestHiddenTimelineUnlistedRelayPromoted) showed a lower
// bound at the newest timeline no proof either. The orphan, on no slot, is
// not answered, whether the superseded primary runs again and streams to
// it or is cut off (its receiver stays connected until
// wal_receiver_timeout), nor after the grant, which it never replays.
func TestHiddenTimelineFollowerAnsweredOnlyWithPgMonitor(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(4)})
	old, promoted, follower, orphan := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2], pg.Nodes[3]
	old.Exec(t, "CREATE ROLE pgdns LOGIN")
	e := attach(t, pg, envOptions{DSN: leastPrivilege})
	e.waitFor(t, "primary.db.local.", []string{old.IP})
	waitHiddenAside(t, e, promoted, follower, orphan)
	ctx := context.Background()

	// A failover: the old primary stops, a replica is promoted and
	// another re-pointed at it; the orphan is left pointing at the old.
	switchover(t, old, promoted)
	e.waitFor(t, "primary.db.local.", []string{promoted.IP})
	// The follower streams from a slot: its primary_slot_name, readable
	// by the probe role, names the primary's row that proves it follows
	// the promoted primary. The orphan, on no slot, is proven nothing.
	promoted.Exec(t, "SELECT pg_create_physical_replication_slot('"+follower.Name+"')")
	follower.Exec(t, "ALTER SYSTEM SET primary_slot_name = '"+follower.Name+"'")
	follower.Follow(t, promoted)
	testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "the follower streaming timeline 2", func() (int, bool) {
		var tl int
		follower.Query(t, "SELECT coalesce((SELECT received_tli FROM pg_stat_wal_receiver WHERE status = 'streaming'), 0)", &tl)
		return tl, tl == 2
	})
	// lowerBound is the follower's timeline as the probe role reads it:
	// its last restartpoint's, or its minimum recovery point's.
	lowerBound := func() int {
		var tl int
		follower.Query(t, "SELECT greatest((pg_control_checkpoint()).timeline_id, (pg_control_recovery()).min_recovery_end_timeline)", &tl)
		return tl
	}
	if tl := lowerBound(); tl != 1 {
		t.Fatalf("the follower's lower bound is on timeline %d: the case needs it still on 1", tl)
	}
	// Set aside, with the reason and the remedy.
	const why = "the primary's WAL senders are hidden too (no pg_read_all_stats), so none proves it follows the primary"
	testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "the follower set aside, saying why", func() (string, bool) {
		_, hosts := e.get(t, http.DefaultClient, "/v1/hosts", "")
		return hosts, strings.Contains(hosts, why) && strings.Contains(hosts, grantHint)
	})
	if passed, ok := testkit.Holds(2*time.Second, 50*time.Millisecond, func() bool {
		return !slices.Contains(e.ips(t, "replica.db.local."), follower.IP)
	}); !ok {
		t.Fatalf("after %d lookups replica.db.local answered the follower, its timeline hidden, re-pointed at a primary whose WAL senders' statistics are hidden", passed)
	}
	_, explained := e.get(t, http.DefaultClient, "/v1/resolve?name=replica.db.local.", "")
	if !strings.Contains(explained, why) {
		t.Errorf("/v1/resolve does not say why the follower is left out: %s", explained)
	}
	_, hosts := e.get(t, http.DefaultClient, "/v1/hosts", "")
	if !strings.Contains(hosts, `"stats_hidden":true`) {
		t.Errorf("/v1/hosts does not show the hidden statistics: %s", hosts)
	}
	// Its restartpoint on timeline 2 (CHECKPOINT on a standby makes one
	// at the last checkpoint record it replayed: the promoted primary's):
	// a lower bound at the newest timeline, which proves nothing either
	// (before review 13a's finding 3 it was answered from then on).
	promoted.Exec(t, "CHECKPOINT")
	testkit.Eventually(t, 20*time.Second, 200*time.Millisecond, "the follower's restartpoint on timeline 2", func() (int, bool) {
		follower.Exec(t, "CHECKPOINT")
		tl := lowerBound()
		return tl, tl == 2
	})
	e.waitHost(t, follower.Addr(), "set aside at the newest timeline, saying why", func(h hostState) bool {
		return strings.HasPrefix(h.Note, "timeline hidden from the probe role, at least 2 (the newest seen") && strings.HasSuffix(h.Note, grantHint)
	})
	if passed, ok := testkit.Holds(2*time.Second, 50*time.Millisecond, func() bool {
		return !slices.Contains(e.ips(t, "replica.db.local."), follower.IP)
	}); !ok {
		t.Fatalf("after %d lookups replica.db.local answered the follower, its timeline hidden, a lower bound at the newest", passed)
	}

	// The old primary comes back writable on timeline 1 and the orphan
	// streams from it again.
	if err := old.Start(ctx); err != nil {
		t.Fatal(err)
	}
	orphan.Follow(t, old)
	testkit.Eventually(t, 30*time.Second, 50*time.Millisecond, "the orphan streaming from the old primary", func() (int, bool) {
		var n int
		old.Query(t, "SELECT count(*) FROM pg_stat_replication WHERE application_name = '"+orphan.Name+"'", &n)
		return n, n == 1
	})
	if passed, ok := testkit.Holds(2*time.Second, 50*time.Millisecond, func() bool {
		return !slices.Contains(e.ips(t, "replica.db.local."), orphan.IP)
	}); !ok {
		t.Fatalf("after %d lookups replica.db.local answered the standby of the superseded primary", passed)
	}

	// The old primary is cut off (frozen): pgdns no longer sees it, while
	// the orphan's receiver stays connected to it until
	// wal_receiver_timeout. No WAL sender of the primary is proven the
	// orphan's, and it is not answered; the follower's is, and it is.
	if err := old.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = old.Signal(syscall.SIGCONT) }()
	testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "the frozen old primary down", func() (string, bool) {
		_, hosts := e.get(t, http.DefaultClient, "/v1/hosts", "")
		return hosts, strings.Contains(hosts, `"addr":"`+old.Addr()+`","ip":"`+old.IP+`","role":"down"`)
	})
	if passed, ok := testkit.Holds(3*time.Second, 50*time.Millisecond, func() bool {
		return !slices.Contains(e.ips(t, "replica.db.local."), orphan.IP)
	}); !ok {
		t.Fatalf("after %d lookups replica.db.local answered the orphan, still connected to the frozen superseded primary", passed)
	}
	// The remedy: pg_monitor, granted on the new primary, replays to the
	// follower (its timeline read exactly, 2) but not to the orphan.
	promoted.Exec(t, "GRANT pg_monitor TO pgdns")
	e.waitFor(t, "replica.db.local.", []string{follower.IP})
	if passed, ok := testkit.Holds(2*time.Second, 50*time.Millisecond, func() bool {
		return !slices.Contains(e.ips(t, "replica.db.local."), orphan.IP)
	}); !ok {
		t.Fatalf("after %d lookups replica.db.local answered the orphan once the new primary granted pg_monitor", passed)
	}
}

// Issue R2: a replica still following a frozen superseded primary (its
// receiver connected until wal_receiver_timeout), its timeline hidden
// from the probe role, is set aside, and stays so once the new primary
// has a WAL sender that is no listed replica's (pg_receivewal here; a
// streaming backup or a logical walsender alike). Before, a count of
// hidden receivers against the primary's WAL senders answered it as soon
// as pg_receivewal connected, without the new timeline's writes.
func TestHiddenTimelineOtherWALSender(t *testing.T) {
	t.Parallel()
	bin, err := pgtest.BinDir()
	testkit.Require(t, err)
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(3)})
	old, promoted, orphan := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	old.Exec(t, "CREATE ROLE pgdns LOGIN")
	e := attach(t, pg, envOptions{DSN: leastPrivilege})
	e.waitFor(t, "primary.db.local.", []string{old.IP})
	waitHiddenAside(t, e, promoted, orphan)
	frozenAndPromoted(t, e, old, promoted)

	startWALClient(t, exec.CommandContext(context.Background(), filepath.Join(bin, "pg_receivewal"), "-h", promoted.IP, "-p", strconv.Itoa(promoted.Port),
		"-U", "postgres", "-D", t.TempDir(), "-n"))
	testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "pg_receivewal streaming from the new primary", func() (int, bool) {
		var n int
		promoted.Query(t, "SELECT count(*) FROM pg_stat_replication WHERE application_name = 'pg_receivewal'", &n)
		return n, n == 1
	})
	if passed, ok := testkit.Holds(3*time.Second, 50*time.Millisecond, func() bool {
		return !slices.Contains(e.ips(t, "replica.db.local."), orphan.IP)
	}); !ok {
		t.Fatalf("after %d lookups replica.db.local answered the orphan of the frozen superseded primary", passed)
	}
	_, hosts := e.get(t, http.DefaultClient, "/v1/hosts", "")
	if !strings.Contains(hosts, "timeline hidden from the probe role, at least 1, below the newest 2: it may follow another host; the primary's WAL senders are hidden too") {
		t.Errorf("/v1/hosts does not say why the orphan is set aside: %s", hosts)
	}
}
