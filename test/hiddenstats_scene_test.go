package test

import (
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// frozenAndPromoted is the failover of the scenes of a probe role without
// pg_monitor whose orphan follows a superseded primary: old, the primary,
// is frozen (SIGSTOP, until the test ends), so that the orphan's WAL
// receiver stays connected to it until wal_receiver_timeout; promoted is
// promoted and writes table tl2 on timeline 2. It returns once pgdns
// answers promoted as the primary and replica.db.local. answers nothing.
func frozenAndPromoted(t *testing.T, e *env, old, promoted *pgtest.Node) {
	t.Helper()
	if err := old.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = old.Signal(syscall.SIGCONT) })
	if err := promoted.Promote(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", []string{promoted.IP})
	promoted.Exec(t, "CREATE TABLE tl2 AS SELECT 1 AS v")
	e.waitFor(t, "replica.db.local.", nil)
}

// startWALClient starts cmd, a WAL client (pg_receivewal, pg_recvlogical)
// a test runs beside the standbys, and returns what it writes; it is
// killed when the test ends.
func startWALClient(t *testing.T, cmd *exec.Cmd) *strings.Builder {
	t.Helper()
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return &out
}
