package test

// A probe role that may read server files learns that its server stopped
// admitting sessions from postmaster.pid, in the probe's own statement:
// no admission session is opened (beside the startup packet of every third
// bare connect, review 8 R8-2), and a smart shutdown is seen within one
// probe (probe/admission.go). A role without the grant, or whose grant is
// revoked, is checked with new sessions as before.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// One cluster (a primary and a replica, logging every session) for every
// case, each case with a pgdns of its own, probing as one of two roles:
// reader, which may read server files, and plain, which may not (both in
// pg_monitor). Before the status read, reader's pgdns opened an
// admission session to each host every second (the first case fails at
// "sessions at rest"), and a smart shutdown was seen by one of them being
// refused (57P03), up to a second later.
func TestSmartShutdownSeenInTheProbeSession(t *testing.T) {
	t.Parallel()
	b := pgtest.Addrs(t)
	pg := pgtest.New(t, pgtest.Options{IPs: b.IPs(2), Conf: []string{"log_connections = on"}})
	primary, replica := pg.Nodes[0], pg.Nodes[1]
	primary.Exec(t, "CREATE ROLE reader LOGIN IN ROLE pg_monitor")
	primary.Exec(t, "GRANT EXECUTE ON FUNCTION pg_read_file(text, bigint, bigint, boolean) TO reader")
	primary.Exec(t, "CREATE ROLE plain LOGIN IN ROLE pg_monitor")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "the roles on the replica", func() (bool, bool) {
		var ok bool
		err := replica.QueryOnce(ctx, "SELECT count(*) = 2 FROM pg_roles WHERE rolname IN ('reader', 'plain')", &ok)
		return ok, err == nil && ok
	})
	// sessions counts the sessions role has started on n: admission
	// sessions under trust authentication are whole sessions, each logged
	// (a session refused at startup, 57P03, is not authorized).
	sessions := func(n *pgtest.Node, role string) int {
		return strings.Count(n.Log(), "connection authorized: user="+role+" ")
	}
	start := func(t *testing.T, role string) *env {
		e := attach(t, pg, envOptions{DSN: "user=" + role + " dbname=postgres sslmode=disable", Nodes: 2})
		e.waitFor(t, "replica.db.local.", []string{replica.IP})
		return e
	}
	// complaints are the lines a connection that sends nothing (or is
	// reset) makes a backend log.
	complaints := func(log string) int {
		return strings.Count(log, "incomplete startup packet") + strings.Count(log, "could not receive data from client")
	}
	// stopSmartly stops n smartly and waits until pgdns no longer answers
	// name with it, and until the stop completes (pgdns closed its
	// session); it returns why pgdns took n out, and the sessions role
	// started on n meanwhile. n is started again.
	stopSmartly := func(t *testing.T, e *env, n *pgtest.Node, name, role string) (string, int) {
		t.Helper()
		before := sessions(n, role)
		_, page, err := e.watch(ctx, "index=0")
		if err != nil {
			t.Fatal(err)
		}
		stopped := make(chan error, 1)
		go func() { stopped <- n.Stop(context.Background(), "smart") }() // pg_ctl -t 60
		took := e.waitFor(t, name, nil)
		evs, _ := e.follow(t, page.Index, "host_down", n.Addr())
		why := find(evs, "host_down", n.Addr()).Detail
		t.Logf("the smartly stopping %s left the answers after %v: %s", n.Name, took, why)
		if err := <-stopped; err != nil {
			t.Fatalf("smart stop of %s while pgdns runs: %v", n.Name, err)
		}
		opened := sessions(n, role) - before
		if err := n.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return why, opened
	}
	const byStatus, byRefusal = `postmaster.pid says "stopping"`, "a new session was refused"

	t.Run("a role that may read server files opens no admission session", func(t *testing.T) {
		e := start(t, "reader")
		before, logged := sessions(replica, "reader"), len(replica.Log())
		time.Sleep(4500 * time.Millisecond) // 45 probes; 4 admission sessions at the default probe.admission_interval, 1 bare connect
		// Every third bare connect (one in 12 s) is a startup packet, to
		// see a pg_hba.conf refusing pgdns (review 8, R8-2): under trust
		// a whole session, so at most one here.
		if n := sessions(replica, "reader") - before; n > 1 {
			t.Fatalf("sessions at rest: pgdns started %d sessions on the replica in 4.5 s, want at most one (the startup packet of every third bare connect) beside its probe session", n)
		}
		// The bare connects (one every 4 s) are logged as received
		// (log_connections), and nothing else.
		if log := replica.Log()[logged:]; !strings.Contains(log, "connection received") || complaints(log) != 0 {
			t.Fatalf("the replica's log at rest: want a bare connect received and no complaint, got:\n%s", log)
		}
		why, opened := stopSmartly(t, e, replica, "replica.db.local.", "reader")
		if !strings.Contains(why, byStatus) || opened > 1 {
			t.Fatalf("the replica's smart shutdown was seen by %q, with %d sessions opened; want %q and at most one (a bare connect's startup packet)", why, opened, byStatus)
		}
		e.waitFor(t, "replica.db.local.", []string{replica.IP})
		why, opened = stopSmartly(t, e, primary, "primary.db.local.", "reader")
		if !strings.Contains(why, byStatus) || opened > 1 {
			t.Fatalf("the primary's smart shutdown was seen by %q, with %d sessions opened; want %q and at most one (a bare connect's startup packet)", why, opened, byStatus)
		}
		e.waitFor(t, "primary.db.local.", []string{primary.IP})
	})

	// A packet filter's REJECT in front of the replica (a forwarder that
	// refuses new connections and carries the ones it has): pgdns's
	// session works and the status says "ready", but no client gets a
	// connection. Before the bare connects, the replica stayed answered
	// for good.
	t.Run("a host refusing new connections leaves the answers", func(t *testing.T) {
		proxy := testkit.StartProxy(t, b.Addr(31, 5432), replica.Addr(), 0)
		e := attach(t, pg, envOptions{DSN: "user=reader dbname=postgres sslmode=disable", Hosts: []string{primary.Addr(), proxy.Addr()}})
		e.waitFor(t, "replica.db.local.", []string{b.IP(31)})
		_, page, err := e.watch(ctx, "index=0")
		if err != nil {
			t.Fatal(err)
		}
		proxy.RefuseNew()
		took := e.waitFor(t, "replica.db.local.", nil)
		evs, _ := e.follow(t, page.Index, "host_down", proxy.Addr())
		why := find(evs, "host_down", proxy.Addr()).Detail
		t.Logf("the replica refusing new connections left the answers after %v: %s", took, why)
		if !strings.Contains(why, byRefusal) {
			t.Fatalf("the replica left the answers because %q, want %q", why, byRefusal)
		}
	})

	t.Run("a role that may not asks with new sessions", func(t *testing.T) {
		e := start(t, "plain")
		before := sessions(replica, "plain")
		time.Sleep(3 * time.Second)
		if n := sessions(replica, "plain") - before; n == 0 {
			t.Fatal("pgdns started no session on the replica in 3 s: the role without the grant is not checked")
		}
		if why, _ := stopSmartly(t, e, replica, "replica.db.local.", "plain"); !strings.Contains(why, byRefusal) {
			t.Fatalf("the replica's smart shutdown was seen by %q, want %q", why, byRefusal)
		}
		e.waitFor(t, "replica.db.local.", []string{replica.IP})
		if why, _ := stopSmartly(t, e, primary, "primary.db.local.", "plain"); !strings.Contains(why, byRefusal) {
			t.Fatalf("the primary's smart shutdown was seen by %q, want %q", why, byRefusal)
		}
		e.waitFor(t, "primary.db.local.", []string{primary.IP})
	})

	t.Run("a grant revoked in the session falls back to new sessions", func(t *testing.T) {
		e := start(t, "reader")
		before := sessions(replica, "reader")
		primary.Exec(t, "REVOKE EXECUTE ON FUNCTION pg_read_file(text, bigint, bigint, boolean) FROM reader") // it replicates
		defer primary.Exec(t, "GRANT EXECUTE ON FUNCTION pg_read_file(text, bigint, bigint, boolean) TO reader")
		testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "an admission session on the replica once the grant is revoked", func() (int, bool) {
			n := sessions(replica, "reader") - before
			return n, n > 0
		})
		// The probes went on: the host never left the answers.
		if got := e.ips(t, "replica.db.local."); len(got) != 1 || got[0] != replica.IP {
			t.Fatalf("replica.db.local answers %v after the revoke, want %s", got, replica.IP)
		}
		if why, _ := stopSmartly(t, e, replica, "replica.db.local.", "reader"); !strings.Contains(why, byRefusal) {
			t.Fatalf("the replica's smart shutdown was seen by %q, want %q", why, byRefusal)
		}
	})
}
