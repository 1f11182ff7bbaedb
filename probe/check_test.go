package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

func check(t *testing.T, newChecker NewCheckerFunc, addr string, timeout time.Duration) (Sample, error) {
	t.Helper()
	c, err := newChecker(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return c.Check(ctx)
}

func TestPostgresCheckerReadsPrimaryAndReplica(t *testing.T) {
	t.Parallel()
	ips := pgtest.Addrs(t).IPs(2)
	cl := pgtest.New(t, pgtest.Options{IPs: ips})
	newChecker, err := PostgresCheckers("user=postgres dbname=postgres sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	p, err := check(t, newChecker, cl.Nodes[0].Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if p.InRecovery || p.InsertLSN == 0 || p.ReplayLSN != p.InsertLSN || p.Timeline != 1 || p.SystemID == 0 || p.IP.String() != ips[0] {
		t.Fatalf("primary sample %+v", p)
	}
	var block, segment uint64
	cl.Nodes[0].Query(t, "SELECT current_setting('wal_block_size')::int8, pg_size_bytes(current_setting('wal_segment_size'))", &block, &segment)
	if p.WALBlockSize != block || p.WALSegmentSize != segment || block == 0 {
		t.Fatalf("primary sample: WAL block size %d, segment size %d; the server's are %d, %d", p.WALBlockSize, p.WALSegmentSize, block, segment)
	}
	// A replica reports its exact timeline once its WAL receiver streams,
	// which on a loaded machine may be seconds after it accepts sessions.
	r := testkit.Eventually(t, 30*time.Second, 100*time.Millisecond, "the replica's WAL receiver streaming",
		func() (Sample, bool) {
			r, err := check(t, newChecker, cl.Nodes[1].Addr(), 5*time.Second)
			return r, err == nil && r.Timeline != 0
		})
	if !r.InRecovery || r.InsertLSN != 0 || r.ReplayLSN == 0 || r.Timeline != 1 || r.SystemID != p.SystemID || r.IP.String() != ips[1] {
		t.Fatalf("replica sample %+v (primary %+v)", r, p)
	}
	if r.DrainSetting != "" || r.OfflineSetting != "" {
		t.Fatalf("replica sample: pgdns.drain %q, pgdns.offline %q before any is set", r.DrainSetting, r.OfflineSetting)
	}
	// The custom settings, read by the probe's one query on a session
	// opened before they were set (the watched connection).
	c, err := newChecker(cl.Nodes[1].Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Check(ctx); err != nil {
		t.Fatal(err)
	}
	for _, set := range [][2]string{{"pgdns.drain", "on"}, {"pgdns.offline", "Maybe"}} {
		if err := cl.Nodes[1].SetCustom(ctx, set[0], set[1]); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "the open session seeing pgdns.drain and pgdns.offline",
		func() (Sample, bool) {
			s, err := c.Check(ctx)
			return s, err == nil && s.DrainSetting == "on" && s.OfflineSetting == "Maybe"
		})
	if err := cl.Nodes[1].SetCustom(ctx, "pgdns.drain", ""); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "pgdns.drain reset", func() (Sample, bool) {
		s, err := c.Check(ctx)
		return s, err == nil && s.DrainSetting == "" && s.OfflineSetting == "Maybe"
	})
}

func TestPostgresCheckerURLDSN(t *testing.T) {
	t.Parallel()
	cl := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(1)})
	newChecker, err := PostgresCheckers("postgres://postgres@/postgres?sslmode=disable&connect_timeout=3")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := check(t, newChecker, cl.Nodes[0].Addr(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

// A host that accepts TCP and never speaks fails at the probe's deadline.
func TestPostgresCheckerHungHost(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", pgtest.Addrs(t).Addr(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // hold it open, say nothing
		}
	}()
	newChecker, _ := PostgresCheckers("user=postgres sslmode=disable")
	start := time.Now()
	_, err = check(t, newChecker, ln.Addr().String(), 300*time.Millisecond)
	if err == nil {
		t.Fatal("a silent host passed the probe")
	}
	if waited := time.Since(start); waited > 3*time.Second {
		t.Fatalf("the probe ignored its deadline: %v", waited)
	}
}

func TestPostgresCheckerRefused(t *testing.T) {
	t.Parallel()
	newChecker, _ := PostgresCheckers("user=postgres sslmode=disable")
	_, err := check(t, newChecker, pgtest.Addrs(t).Addr(1, 1), time.Second)
	if err == nil || !strings.Contains(err.Error(), "connect") {
		t.Fatalf("err = %v", err)
	}
}

func TestPostgresCheckersRejectsBadDSN(t *testing.T) {
	if _, err := PostgresCheckers("user=postgres password=hunter2 sslmode=bogus"); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("err = %v", err)
	}
}

// The probe needs no more than pg_monitor, as docs/operating.md ("The probe role") says.
func TestPostgresCheckerAsMonitorRole(t *testing.T) {
	t.Parallel()
	cl := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(2)})
	cl.Nodes[0].Exec(t, "CREATE ROLE watcher LOGIN IN ROLE pg_monitor")
	newChecker, err := PostgresCheckers("user=watcher dbname=postgres sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range cl.Nodes {
		var err error
		testkit.Poll(10*time.Second, 50*time.Millisecond, func() bool {
			_, err = check(t, newChecker, n.Addr(), 5*time.Second)
			// "does not exist": the role has not reached the replica yet.
			return err == nil || !strings.Contains(err.Error(), "does not exist")
		})
		if err != nil {
			t.Fatalf("%s as pg_monitor: %v", n.Name, err)
		}
	}
}

// A connection lost between probes without a word (closed under the
// prober, say) leaves no host unwatched: Watch opens another at once, so a
// crash right after is still seen when it happens, not at the next probe.
func TestWatchReopensALostConnection(t *testing.T) {
	t.Parallel()
	node, c, _ := probedNode(t, 5*time.Second)
	pc := c.(*pgChecker)
	var lost int
	node.Query(t, "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgdns'", &lost)
	_ = pc.sess.conn.Close() // lost, and nobody said so
	done := make(chan error, 1)
	wctx, stop := context.WithTimeout(context.Background(), 20*time.Second)
	defer stop()
	go func() { done <- c.(Watcher).Watch(wctx) }()
	// Watch's new session shows in pg_stat_activity under pgdns's name,
	// another backend than the lost one (which lingers until its server
	// process reads the EOF: counting sessions saw it under load, and the
	// server was stopped while Watch was still opening, a failure the
	// next probe sees, not Watch), done with its opening pipeline (idle
	// after sourcesSQL): a server stopped before that fails the open.
	testkit.Eventually(t, 20*time.Second, 10*time.Millisecond, "Watch to open a new session after the last one was lost (pgdns sessions: pid, state)", func() (string, bool) {
		var rows string
		node.Query(t, fmt.Sprintf("SELECT coalesce(string_agg(pid || ' ' || coalesce(state, '') || CASE WHEN query = $q$%s$q$ THEN ' opened' ELSE '' END, ', '), '') "+
			"FROM pg_stat_activity WHERE application_name = 'pgdns' AND pid <> %d", sourcesSQL, lost), &rows)
		return rows, strings.HasSuffix(rows, " idle opened") && !strings.Contains(rows, ", ")
	})
	if err := node.Stop(context.Background(), "immediate"); err != nil {
		t.Fatal(err)
	}
	wantNotServing(t, done, 5*time.Second, "Watch returned %v, want a definitive failure", "a crash after a lost connection was not seen by Watch")
}

// A server that crashes while a probe's query runs closes the connection
// under pgx, which reports it as "conn closed" rather than the EOF it
// read; the probe must still fail definitively, so the host leaves the
// answers at once rather than after max_fails probes. The probe is held
// in its query by a lock on a view it reads, then the server is stopped
// with -m immediate.
func TestCheckSeesACrashDuringItsQuery(t *testing.T) {
	t.Parallel()
	node, c, ctx := probedNode(t, 20*time.Second)
	locker := lockProbedView(t, ctx, node)
	done := make(chan error, 1)
	go func() {
		_, err := c.Check(ctx)
		done <- err
	}()
	// Wait until the probe's backend waits for the lock. The lock on the
	// view extends to the catalogs it reads, so new sessions would wait
	// too: the locker looks itself.
	testkit.Eventually(t, 10*time.Second, 10*time.Millisecond, "the probe to wait for the lock (pgdns sessions waiting)", func() (int, bool) {
		var n int
		if err := locker.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgdns' AND wait_event_type = 'Lock'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n, n == 1
	})
	if err := node.Stop(context.Background(), "immediate"); err != nil {
		t.Fatal(err)
	}
	wantNotServing(t, done, 10*time.Second, "a probe cut by a crash failed with %v, want a definitive failure", "the probe did not return after the crash")
}

// A probe that fails ambiguously (it timed out) leaves the host in the
// answers until max_fails, so the host stays watched: Watch opens a new
// connection, and a crash then is seen when it happens, not at the next
// probe.
func TestWatchAfterAnAmbiguousFailure(t *testing.T) {
	t.Parallel()
	node, c, ctx := probedNode(t, 20*time.Second)
	// Hold the next probe in its query past its deadline.
	locker := lockProbedView(t, ctx, node)
	pctx, pcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := c.Check(pctx)
	pcancel()
	if err == nil || errors.Is(err, ErrNotServing) {
		t.Fatalf("a probe past its deadline failed with %v, want an ambiguous failure", err)
	}
	if _, err := locker.Exec(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}

	done := make(chan error, 1)
	wctx, stop := context.WithTimeout(context.Background(), 20*time.Second)
	defer stop()
	go func() { done <- c.(Watcher).Watch(wctx) }()
	testkit.Eventually(t, 10*time.Second, 10*time.Millisecond, "Watch to open a connection after an ambiguous failure (idle pgdns sessions)", func() (int, bool) {
		var n int
		node.Query(t, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgdns' AND state = 'idle'", &n)
		return n, n == 1
	})
	if err := node.Stop(context.Background(), "immediate"); err != nil {
		t.Fatal(err)
	}
	wantNotServing(t, done, 10*time.Second, "Watch returned %v, want a definitive failure", "a crash after an ambiguous failure was not seen by Watch")
}
