package test

// The scene of the tests of a crash that loses asynchronous commits
// (reinit_e2e_test.go, unseencrash_e2e_test.go): a primary whose WAL
// writer is held stopped writes commits that no one flushes, then one of
// its backends is killed, as by the OOM killer, and the postmaster
// reinitialises the server.

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// asyncCrashConf is the server configuration of the scene: the WAL writer
// neither wakes nor flushes by itself before it is stopped.
var asyncCrashConf = []string{"wal_writer_delay = 10s", "wal_writer_flush_after = 0"}

// stopWALWriter stops n's WAL writer (SIGSTOP) and returns its pid: no
// asynchronous commit is written out until it is killed. A stopped
// process ends only by SIGKILL.
func stopWALWriter(t *testing.T, n *pgtest.Node) (pid int) {
	t.Helper()
	n.Query(t, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'", &pid)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	return pid
}

// writeUnflushedCommits stops n's WAL writer, so that no asynchronous
// commit is written out before the crash (every one of them is lost), and
// writes 30 asynchronous commits into ryw on conn, a session of n's. It
// waits for pgdns to probe n past the last of them and returns the WAL
// writer's pid, conn's backend pid (the crash's victim) and the commits'
// tokens.
func writeUnflushedCommits(t *testing.T, e *env, n *pgtest.Node, conn *pgx.Conn) (walWriter, backend int, tokens []string) {
	t.Helper()
	ctx := context.Background()
	walWriter = stopWALWriter(t, n)
	if _, err := conn.Exec(ctx, "SET synchronous_commit = off"); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		tokens = append(tokens, writeAndTakeLSN(t, conn, "INSERT INTO ryw (v) VALUES ($1)", fmt.Sprintf("async-%d", i)))
	}
	last := tokens[len(tokens)-1]
	e.waitProbedPast(t, n, last, "pgdns to probe n1 past the tokens")
	return walWriter, backend, tokens
}

// crashAndWriteOn kills backend, as the OOM killer would: the postmaster
// reinitialises the server (the stopped WAL writer is killed too, as the
// postmaster would after 5 s). The clients, by dsn, reconnect at once and
// write on, past the lost tokens. It fails the test unless the scene is
// what the tests need: none of the commits survived, and the server wrote
// past the last token.
func crashAndWriteOn(t *testing.T, dsn string, walWriter, backend int, tokens []string) {
	t.Helper()
	ctx := context.Background()
	if err := syscall.Kill(backend, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(walWriter, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, 2*time.Millisecond, "a client to reconnect and write", func() (string, bool) {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err.Error(), false
		}
		defer c.Close(ctx)
		_, err = c.Exec(ctx, "INSERT INTO ryw (v) SELECT repeat('z', 200) FROM generate_series(1, 3000)")
		return fmt.Sprint(err), err == nil
	})
	check, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close(ctx)
	var survived int
	if err := check.QueryRow(ctx, "SELECT count(*) FROM ryw WHERE v LIKE 'async-%'").Scan(&survived); err != nil {
		t.Fatal(err)
	}
	if survived != 0 {
		t.Fatalf("%d of %d asynchronous commits survived the crash (the WAL writer was stopped): the scene is not what the test needs", survived, len(tokens))
	}
	last := tokens[len(tokens)-1]
	var past bool
	if err := check.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn() > '"+strings.Replace(last, "-", "/", 1)+"'::pg_lsn").Scan(&past); err != nil {
		t.Fatal(err)
	}
	if !past {
		t.Fatalf("n1 did not write past the lost tokens")
	}
}

// expectLostToTheCrash checks what every crash of the scene must leave,
// once pgdns sees n1 writable again: a write after the crash is answered
// by the replica n2, and the lost commits' tokens (the first and the last)
// by no name, with and without their timeline, the last one's TXT saying
// why: unprovable=, with the words why.
func expectLostToTheCrash(t *testing.T, e *env, n1, n2 *pgtest.Node, lost []string, crash, why string) {
	t.Helper()
	after := e.insertAndTakeLSN(t, n1)
	waitStreaming(t, n2, 1, after)
	e.waitFor(t, "lsn-"+after+".replica.db.local.", []string{n2.IP}) // a write after it is answered
	for _, tok := range lost {
		for _, name := range []string{"lsn-" + tok + ".replica.db.local.", "lsn-" + tok + "-t1.any.db.local.", "lsn-" + tok + ".prefer-replica.db.local."} {
			e.holds(t, name, 500*time.Millisecond, exactly(), "no host: the write was an asynchronous commit lost to "+crash)
		}
	}
	last := lost[len(lost)-1]
	txt := strings.Join(e.txt(t, "lsn-"+last+".any.db.local."), " ")
	t.Logf("lsn-%s.any TXT: %s", last, txt)
	if !strings.Contains(txt, "unprovable=") || !strings.Contains(txt, why) {
		t.Errorf("lsn-%s.any TXT %q: want unprovable= saying the server was reinitialised (%q)", last, txt, why)
	}
}
