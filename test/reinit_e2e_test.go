package test

// A crash of one backend (the OOM killer's pick) makes the postmaster
// reinitialise the server: every session ends, the server goes through
// crash recovery and comes back writable with the same start time. WAL
// not yet written out is lost, asynchronous commits included (review 7,
// H5), and the server writes other data at their positions. pgdns's
// session ended with the rest, and its new session was refused with 57P03
// "the database system is in recovery mode": rule 13's window must follow,
// whether or not pgdns's first probe after it sees the insert position
// back below the one it last saw (a busy primary has written past it).

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

func TestAsyncCommitsLostToAReinitialisation(t *testing.T) {
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(2), Conf: []string{"wal_writer_delay = 10s", "wal_writer_flush_after = 0"}})
	n1, n2 := pg.Nodes[0], pg.Nodes[1]
	n1.Exec(t, "CREATE TABLE ryw (id serial PRIMARY KEY, v text)")
	e := attach(t, pg, envOptions{Interval: "250ms"}) // the default interval
	e.waitFor(t, "replica.db.local.", []string{n2.IP})
	ctx := context.Background()

	// The WAL writer is held stopped, so that no asynchronous commit is
	// written out before the crash: every one of them is lost.
	var walWriter int
	n1.Query(t, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'", &walWriter)
	if err := syscall.Kill(walWriter, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	conn := n1.Conn(t)
	if _, err := conn.Exec(ctx, "SET synchronous_commit = off"); err != nil {
		t.Fatal(err)
	}
	var pid int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	var tokens []string
	for i := range 30 {
		tokens = append(tokens, writeAndTakeLSN(t, conn, "INSERT INTO ryw (v) VALUES ($1)", fmt.Sprintf("async-%d", i)))
	}
	last := tokens[len(tokens)-1]
	testkit.Eventually(t, 10*time.Second, 50*time.Millisecond, "pgdns to probe n1 past the tokens", func() (string, bool) {
		got := e.hostStates(t)[n1.Addr()].ReplayLSN // a primary's is its insert position
		return deref(got), got != nil && parseLSN(t, *got) >= parseLSN(t, last)
	})

	// The OOM killer takes the backend: the postmaster reinitialises the
	// server (the stopped WAL writer is killed, as the postmaster would
	// after 5 s); the clients reconnect at once and write on.
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(walWriter, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, 2*time.Millisecond, "a client to reconnect and write", func() (string, bool) {
		c, err := pgx.Connect(ctx, n1.DSN())
		if err != nil {
			return err.Error(), false
		}
		defer c.Close(ctx)
		_, err = c.Exec(ctx, "INSERT INTO ryw (v) SELECT repeat('z', 200) FROM generate_series(1, 3000)")
		return fmt.Sprint(err), err == nil
	})
	var started int
	n1.Query(t, "SELECT count(*) FROM ryw WHERE v LIKE 'async-%'", &started)
	if started != 0 {
		t.Fatalf("%d of %d asynchronous commits survived the crash (the WAL writer was stopped): the scene is not what the test needs", started, len(tokens))
	}
	var past bool
	n1.Query(t, "SELECT pg_current_wal_insert_lsn() > '"+strings.Replace(last, "-", "/", 1)+"'::pg_lsn", &past)
	if !past {
		t.Fatalf("n1 did not write past the lost tokens")
	}
	// A write once pgdns sees the run again is above the window.
	e.waitFor(t, "primary.db.local.", []string{n1.IP})
	after := e.insertAndTakeLSN(t, n1)
	waitStreaming(t, n2, 1, after)
	e.waitFor(t, "lsn-"+after+".replica.db.local.", []string{n2.IP}) // a write after it is answered
	for _, tok := range []string{tokens[0], last} {
		for _, name := range []string{"lsn-" + tok + ".replica.db.local.", "lsn-" + tok + "-t1.any.db.local.", "lsn-" + tok + ".prefer-replica.db.local."} {
			e.holds(t, name, 500*time.Millisecond, exactly(), "no host: the write was an asynchronous commit lost to the reinitialisation")
		}
	}
	txt := strings.Join(e.txt(t, "lsn-"+last+".any.db.local."), " ")
	t.Logf("lsn-%s.any TXT: %s", last, txt)
	if !strings.Contains(txt, "unprovable=") || !strings.Contains(txt, "reinitialised") {
		t.Errorf("lsn-%s.any TXT %q: want unprovable= saying the server was reinitialised", last, txt)
	}
}
