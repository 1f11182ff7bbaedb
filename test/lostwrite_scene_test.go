package test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// failoverLosingAWrite is the scene of a write lost in a failover: sql is
// committed on old (the primary) while its WAL senders are stopped, so that
// no replica receives it, and its token taken; seen, when not nil, runs
// next with the token (a test that needs pgdns to have probed old past it
// waits there); then old is killed, promoted is promoted (timeline 2 forks
// off before the token), follower is re-pointed at it, and timeline 2
// writes into table ryw until its position is past the lost one, without
// the write. It returns the lost write's token ("hi-lo"); the test creates
// table ryw before.
func failoverLosingAWrite(t *testing.T, old, promoted, follower *pgtest.Node, sql string, seen func(lost string)) string {
	t.Helper()
	if err := old.SignalWalsenders(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	lost := writeAndTakeLSN(t, old.Conn(t), sql)
	if seen != nil {
		seen(lost)
	}
	killAndPromote(t, old, promoted)
	follower.Follow(t, promoted)
	// Timeline 2 writes past the lost position, without the row.
	testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "timeline 2 past the lost position", func() (bool, bool) {
		promoted.Exec(t, "INSERT INTO ryw SELECT repeat('y', 1000) FROM generate_series(1, 200)")
		var past bool
		promoted.Query(t, "SELECT pg_current_wal_lsn() > '"+strings.Replace(lost, "-", "/", 1)+"'::pg_lsn", &past)
		return past, past
	})
	return lost
}

// lostWriteSeen is failoverLosingAWrite of 50 rows 'LOST' into table
// ryw, pgdns having probed old past the lost write's token before the
// kill; then promoted writes on timeline 2 and follower streams it,
// without the lost rows. It returns the lost write's token and the later
// write's.
func (e *env) lostWriteSeen(t *testing.T, old, promoted, follower *pgtest.Node) (lost, later string) {
	t.Helper()
	lost = failoverLosingAWrite(t, old, promoted, follower, "INSERT INTO ryw SELECT 'LOST' FROM generate_series(1, 50)", func(lost string) {
		e.waitProbedPast(t, old, lost, "pgdns to probe the old primary past the token")
	})
	later = e.insertAndTakeLSN(t, promoted)
	waitStreaming(t, follower, 2, later)
	var rows int
	follower.Query(t, "SELECT count(*) FROM ryw WHERE v = 'LOST'", &rows)
	if rows != 0 {
		t.Fatalf("the follower has the lost rows (%d)", rows)
	}
	return lost, later
}

// killAndPromote is the failover of the scenes that lose a write: it
// kills old, its postmaster and then its WAL senders (a held one ends only
// so), waits for it to be gone, and promotes promoted.
func killAndPromote(t *testing.T, old, promoted *pgtest.Node) {
	t.Helper()
	ctx := context.Background()
	if err := old.KillPostmaster(); err != nil {
		t.Fatal(err)
	}
	if err := old.SignalWalsenders(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	gone, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := old.WaitGone(gone); err != nil {
		t.Fatal(err)
	}
	if err := promoted.Promote(ctx); err != nil {
		t.Fatal(err)
	}
}
