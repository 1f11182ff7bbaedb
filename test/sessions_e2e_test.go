package test

// Servers that refuse new sessions: a smart shutdown (57P03) and a full
// max_connections (53300).

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// A server stopping in smart mode refuses every new session with 57P03 and
// waits for the open ones to end. pgdns must take it out of the answers
// although its own open session still works, and close that session, so
// that pg_ctl stop -m smart completes while pgdns runs: a replica's, then
// the primary's. Before the fix the replica was still answered 20 s later
// and pg_ctl gave up ("server does not shut down") after 60 s.
func TestSmartShutdownLeavesTheAnswers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	primary, r1, r2 := e.pg.Nodes[0], e.pg.Nodes[1], e.pg.Nodes[2]
	e.waitFor(t, "replica.db.local.", []string{r1.IP, r2.IP})
	smartStop := func(n *pgtest.Node) <-chan error {
		done := make(chan error, 1)
		go func() { done <- n.Stop(context.Background(), "smart") }() // pg_ctl -t 60
		return done
	}

	stopped := smartStop(r1)
	took := e.waitFor(t, "replica.db.local.", []string{r2.IP})
	t.Logf("the smartly stopping replica left the answers after %v", took)
	if err := <-stopped; err != nil {
		t.Fatalf("smart stop of the replica while pgdns runs: %v", err)
	}

	stopped = smartStop(primary)
	took = e.waitFor(t, "primary.db.local.", nil)
	t.Logf("the smartly stopping primary left the answers after %v", took)
	if err := <-stopped; err != nil {
		t.Fatalf("smart stop of the primary while pgdns runs: %v", err)
	}
}

// A server whose connection slots are all taken by other clients refuses
// new sessions with 53300 (too many clients). That is load, not a
// shutdown: the host keeps serving the sessions it has, pgdns's own among
// them, and must stay in the answers while pgdns's admission attempts run
// into the limit (the server logs each). The probe role may not read
// server files, so that pgdns asks with new sessions (a role that may
// reads the server's status instead, probe/admission.go).
func TestTooManyClientsIsNotAShutdown(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(2)})
	pg.Nodes[0].Exec(t, "CREATE ROLE pgdns LOGIN IN ROLE pg_monitor")
	e := attach(t, pg, envOptions{DSN: "user=pgdns dbname=postgres sslmode=disable"})
	primary, replica := e.pg.Nodes[0], e.pg.Nodes[1]
	e.waitFor(t, "replica.db.local.", []string{replica.IP})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var conns []*pgx.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close(context.Background())
		}
	}()
	for range 100 { // max_connections is 50 (pgtest), pgdns holds one
		conn, err := pgx.Connect(ctx, primary.DSN())
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "53300" {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
	}
	if len(conns) == 100 {
		t.Fatal("100 sessions and no 53300: max_connections is not what the test expects")
	}
	refusals := func() int { return strings.Count(primary.Log(), "too many clients") }
	before := refusals()
	passed, ok := testkit.Holds(4*time.Second, 50*time.Millisecond, func() bool {
		return slices.Equal(e.ips(t, "primary.db.local."), []string{primary.IP})
	})
	if !ok {
		t.Fatalf("the primary left the answers after %d good lookups while others held every connection slot; evidence %q",
			passed, e.txt(t, "any.db.local."))
	}
	if n := refusals() - before; n < 2 {
		t.Fatalf("the server refused %d new sessions with too many clients in 4 s: pgdns did not try to open any", n)
	}
}
