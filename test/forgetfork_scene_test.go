package test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// The forget-fork tests' scene (review 6, G7b; review 7, H11), in the
// steps they share.

// forkedWithAdminToken starts three nodes and pgdns in front of them with
// admin endpoints behind token, and restores n1 in place from a base
// backup taken before a write that n2 and n3 replayed and pgdns probed n1
// past: both replicas are another branch of timeline 1, set aside, while
// the restored n1 writes on (table b).
func forkedWithAdminToken(t *testing.T, token string) *env {
	t.Helper()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(3)})
	n1, n2, n3 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	tokenFile := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := attach(t, pg, envOptions{AdminTokenFile: tokenFile})
	e.waitFor(t, "replica.db.local.", []string{n2.IP, n3.IP})
	ctx := context.Background()
	e.insertAndTakeLSN(t, n1)

	// n1 restored in place from a base backup taken before a write that
	// n2 and n3 replayed: both are another branch of timeline 1.
	backup, err := n1.BaseBackup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lost := writeAndTakeLSN(t, n1.Conn(t), "INSERT INTO t (v) VALUES ('lost to the restore')")
	waitStreaming(t, n2, 1, lost)
	waitStreaming(t, n3, 1, lost)
	// pgdns probes n1 at or past the write (a fixed 300 ms was three
	// probes on a quiet machine, maybe none under load).
	e.waitHost(t, n1.Addr(), "probed at or past the write", func(h hostState) bool { return replayedPast(t, h, lost) })
	if err := n1.RestoreInPlace(ctx, backup); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", []string{n1.IP})
	e.waitFor(t, "replica.db.local.", nil) // both proven on another branch
	writeAndTakeLSN(t, n1.Conn(t), "CREATE TABLE b AS SELECT repeat('y', 100) AS v FROM generate_series(1, 1000)")
	return e
}

// restartUnrebuilt restarts replica n in place (stop fast, start): a new
// server run whose data directory is still the dead branch's, which it
// checks (n has the write the restore lost). It returns the run's start.
func restartUnrebuilt(t *testing.T, n *pgtest.Node) time.Time {
	t.Helper()
	ctx := context.Background()
	if err := n.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var has int
	n.Query(t, "SELECT count(*) FROM t WHERE v = 'lost to the restore'", &has)
	if has != 1 {
		t.Fatalf("%s restarted, not rebuilt, has %d rows of the lost write, want 1 (still the dead branch)", n.Name, has)
	}
	var run time.Time
	n.Query(t, "SELECT pg_postmaster_start_time()", &run)
	return run
}
