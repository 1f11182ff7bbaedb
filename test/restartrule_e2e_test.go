package test

// Rule 13 (docs/decisions.md): a new server run of a timeline's writer
// cannot be told from its WAL to be the same server restarted rather than
// one restored from an older copy (review 6, G5), rebuilt and promoted to
// the same timeline while pgdns was away (G2b), or a crash that lost
// asynchronous commits (G10): every lsn- token on the timeline up to the
// higher of the old run's last seen insert position and the new run's
// first is refused by every name; tokens above are the new run's writes.

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/state"
	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/zone"
)

// refusedAfterRestart checks that token (with tl, "-tN" or "") is answered
// by no name, and that TXT says it was written before a restart.
func refusedAfterRestart(t *testing.T, e *env, token, tl string) {
	t.Helper()
	for _, role := range []string{"replica", "prefer-replica", "any"} {
		e.holds(t, "lsn-"+token+tl+"."+role+".db.local.", 300*time.Millisecond, exactly(), "a token written before the writer's restart")
	}
	txt := e.txt(t, "lsn-"+token+tl+".prefer-replica.db.local.")
	if !slices.ContainsFunc(txt, func(s string) bool {
		return strings.HasPrefix(s, "unprovable=") && strings.Contains(s, "written before") &&
			strings.Contains(s, "a restart cannot be told from a restore or a rebuild")
	}) {
		t.Errorf("TXT of lsn-%s%s.prefer-replica: %q, want unprovable= saying the writer restarted", token, tl, txt)
	}
}

// primaryInsertPast waits until pgdns has probed the primary at or past lsn.
func primaryInsertPast(t *testing.T, e *env, lsn string) {
	t.Helper()
	want, err := zone.ParseLSN(strings.Replace(lsn, "-", "/", 1))
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "pgdns to probe the primary past "+lsn, func() (string, bool) {
		c := e.app.Table().Load().Cluster("main")
		if c == nil || c.PrimaryHost() == nil {
			return "no primary", false
		}
		return c.PrimaryHost().InsertLSN.String(), c.PrimaryHost().InsertLSN >= want
	})
}

// G10: with synchronous_commit = off a commit is acknowledged before its
// WAL is flushed; a crash loses it, and the restarted primary writes other
// data at its position. n1's WAL writer is slowed so that the commits are
// still in memory when n1 crashes: an immediate stop (every process quits
// at once, nothing flushed, as in a crash) and a start, crash recovery.
func TestTokenOfAnAsyncCommitLostInACrash(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.json")
	e := newEnv(t, envOptions{Nodes: 2, State: path})
	n1, n2 := e.pg.Nodes[0], e.pg.Nodes[1]
	e.waitFor(t, "replica.db.local.", []string{n2.IP})
	ctx := context.Background()
	common := e.insertAndTakeLSN(t, n1)
	waitStreaming(t, n2, 1, common)
	n1.Exec(t, "ALTER SYSTEM SET wal_writer_delay = '10s'")
	n1.Exec(t, "SELECT pg_reload_conf()")
	// The WAL writer is held stopped, so that no asynchronous commit is
	// written out before the crash: with the delay alone, something else
	// (wal_writer_flush_after, a checkpoint) flushed them all now and then
	// under load, and the test had nothing to test.
	walWriter := stopWALWriter(t, n1)
	conn := n1.Conn(t)
	if _, err := conn.Exec(ctx, "SET synchronous_commit = off"); err != nil {
		t.Fatal(err)
	}
	var tokens []string
	for i := range 5 {
		tokens = append(tokens, writeAndTakeLSN(t, conn, "INSERT INTO t (v) VALUES ($1)", fmt.Sprintf("async %d", i)))
	}
	primaryInsertPast(t, e, tokens[len(tokens)-1])
	// A stopped process ends only by SIGKILL: end the WAL writer so, then
	// the server at once (its postmaster would wait 5 s for it).
	if err := syscall.Kill(walWriter, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := n1.Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	if err := n1.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var kept int
	n1.Query(t, "SELECT count(*) FROM t WHERE v LIKE 'async %'", &kept)
	if kept == len(tokens) {
		t.Fatalf("the crash lost none of the %d asynchronous commits: nothing to test", kept)
	}
	// pgdns sees the new run before it writes: the window then ends
	// below the write (a first probe after it would cover it too, and
	// rightly refuse its token).
	testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "pgdns to see n1's new server run", func() (string, bool) {
		return e.logs.String(), strings.Contains(e.logs.String(), "a new server run of a timeline's writer")
	})
	// The restarted n1 writes past the lost tokens, and n2 replays it.
	after := writeAndTakeLSN(t, n1.Conn(t), "CREATE TABLE b AS SELECT repeat('y', 100) AS v FROM generate_series(1, 1000)")
	waitStreaming(t, n2, 1, after)
	if parseLSN(t, after) <= parseLSN(t, tokens[len(tokens)-1]) {
		t.Fatalf("the restarted n1 at %s is not past the lost tokens (up to %s)", after, tokens[len(tokens)-1])
	}
	e.waitFor(t, "lsn-"+after+"-t1.replica.db.local.", []string{n2.IP})
	for _, token := range tokens[kept:] {
		refusedAfterRestart(t, e, token, "-t1")
		refusedAfterRestart(t, e, token, "")
	}
	// A restart of pgdns keeps the window (the state file's restarted_upto).
	if err := e.app.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	m, _, err := state.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if b := m["main"].Branches[1]; b.Upto < zone.LSN(parseLSN(t, tokens[len(tokens)-1])) || b.Forked != "" {
		t.Fatalf("the state file's branch of timeline 1: %+v, want a restart window past %s and no fork", b, tokens[len(tokens)-1])
	}
	again := launch(t, e.pg, envOptions{State: path})
	again.waitFor(t, "primary.db.local.", []string{n1.IP})
	again.waitFor(t, "lsn-"+after+"-t1.replica.db.local.", []string{n2.IP})
	refusedAfterRestart(t, again, tokens[len(tokens)-1], "-t1")
}
