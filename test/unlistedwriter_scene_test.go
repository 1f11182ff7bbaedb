package test

import (
	"context"
	"testing"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// twoWritersOfTimelineTwo is the scene of a replica on the branch of a
// writer pgdns is never told of: on four nodes (returned), with a login
// role named role that has pg_monitor but may not call pg_read_file (its
// probe DSN returned), n1 creates table t and n2, n3 and n4 stream it; n1
// stops (immediate); n2 is promoted to timeline 2, and n4, which never saw
// n2's history file, is promoted and takes timeline 2 as well (a DR
// site's writer); n3 follows n4 and streams a write of n4's.
func twoWritersOfTimelineTwo(t *testing.T, role string) (pg *pgtest.Cluster, dsn string) {
	t.Helper()
	pg = pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(4)})
	dsn = monitorRole(t, pg, role)
	n1, n2, n3, n4 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2], pg.Nodes[3]
	ctx := context.Background()
	common := writeAndTakeLSN(t, n1.Conn(t), "CREATE TABLE t (id serial PRIMARY KEY, v text)")
	for _, n := range []*pgtest.Node{n2, n3, n4} {
		waitStreaming(t, n, 1, common)
	}
	if err := n1.Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*pgtest.Node{n2, n4} {
		if err := n.Promote(ctx); err != nil {
			t.Fatal(err)
		}
		n.Exec(t, "CHECKPOINT") // the promotion's checkpoint may be spread: timeline_id is the last one's
		var tl int
		n.Query(t, "SELECT timeline_id FROM pg_control_checkpoint()", &tl)
		if tl != 2 {
			t.Fatalf("%s promoted to timeline %d, want 2", n.Name, tl)
		}
	}
	n3.Follow(t, n4)
	waitStreaming(t, n3, 2, writeAndTakeLSN(t, n4.Conn(t), "INSERT INTO t (v) VALUES ('on n4')"))
	return pg, dsn
}
