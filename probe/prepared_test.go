package probe

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// The probe statement is planned once per session: past the first five
// runs of each (PostgreSQL plans a statement with parameters anew for
// those), every probe runs the one generic plan of a prepared statement
// (pg_prepared_statements counts them), none is planned anew. Sent as a
// simple query, it was planned on every probe. A role that may read server files (postgres, here) runs
// probeStatusSQL from its session's second probe on: the plans of both
// statements are counted.
func TestProbeStatementPlannedOnce(t *testing.T) {
	t.Parallel()
	_, c, ctx := probedNode(t, 20*time.Second)
	plans := func() (generic, custom int) {
		t.Helper()
		row, err := sessionQuery(ctx, c.(*pgChecker), "SELECT sum(generic_plans), sum(custom_plans) FROM pg_prepared_statements WHERE name LIKE 'pgdns_probe%'")
		if err != nil || len(row) != 2 {
			t.Fatalf("the probe's statement in its session: %q, %v", row, err)
		}
		g, err1 := strconv.Atoi(row[0])
		c, err2 := strconv.Atoi(row[1])
		if err1 != nil || err2 != nil {
			t.Fatalf("plans %q", row)
		}
		return g, c
	}
	probes := func(n int) {
		for range n {
			if _, err := c.Check(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The primary's statements take parameters (the WAL senders pgdns
	// knows: senders.go), so PostgreSQL plans each anew for its first five
	// runs, then settles on its generic plan.
	probes(7)
	generic0, custom0 := plans()
	probes(5)
	generic, custom := plans()
	if custom != custom0 || generic-generic0 < 5 || custom0 > 10 {
		t.Fatalf("probes 8 to 12 ran %d generic and %d custom plans (%d custom before), want every one generic", generic-generic0, custom-custom0, custom0)
	}
}

// A prepared statement lives as long as its session: after a restart the
// probe's new session prepares it again, and a session that lost it
// (deallocated under the probe: both statements) gets it back in the same
// probe.
func TestProbeStatementOutlivesItsSession(t *testing.T) {
	t.Parallel()
	node, c, ctx := probedNode(t, 60*time.Second)
	pc := c.(*pgChecker)
	if _, err := sessionQuery(ctx, pc, "DEALLOCATE ALL"); err != nil {
		t.Fatal(err)
	}
	if s, err := c.Check(ctx); err != nil || s.SystemID == 0 {
		t.Fatalf("the probe after its statement was deallocated: %+v, %v", s, err)
	}
	if err := node.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var err error
	testkit.Poll(30*time.Second, 50*time.Millisecond, func() bool {
		_, err = c.Check(ctx)
		return err == nil
	})
	if err != nil {
		t.Fatalf("the probe after a restart: %v", err)
	}
	s, err := c.Check(ctx)
	if err != nil || s.SystemID == 0 || s.Timeline != 1 {
		t.Fatalf("the second probe after a restart: %+v, %v", s, err)
	}
}

// A replica's probes run the replica variant of the statement, without
// the pg_stat_replication sub-select (which never has rows there but cost
// every probe its setup); the probe that first finds the replica promoted
// runs the primary's statement in the same probe, so it reads the new
// primary's WAL senders at once. Without that second round trip the
// promotion's probe failed ("column 9 is NULL").
func TestReplicaVariantSeesAPromotionInOneProbe(t *testing.T) {
	t.Parallel()
	cl := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(2)})
	replica := cl.Nodes[1]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := pgCheckerOf(t, "user=postgres dbname=postgres sslmode=disable", replica.Addr())
	for range 3 {
		if s, err := c.Check(ctx); err != nil || !s.InRecovery {
			t.Fatalf("a probe of the replica: %+v, %v", s, err)
		}
	}
	row, err := sessionQuery(ctx, c, "SELECT generic_plans FROM pg_prepared_statements WHERE name = '"+ProbeReplicaStatusStatement+"'")
	if err != nil || len(row) != 1 || row[0] == "0" || !c.replica {
		t.Fatalf("the replica's probes ran %q of the replica variant (%v), and the next one will: %v; want some, and true", row, err, c.replica)
	}
	if err := replica.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := c.Check(ctx) // the first probe since: the replica variant, then the primary's statement
	if err != nil || s.InRecovery || s.Standbys == nil || s.InsertLSN == 0 {
		t.Fatalf("the probe of the promoted replica: %+v, %v; want a primary's sample with its (no) standbys", s, err)
	}
	if c.replica {
		t.Fatal("after the promotion the next probe still runs the replica variant")
	}
}
