package test

import (
	"context"
	"testing"
	"time"
)

// TestSubsetClusterDuringAFailover: "main" lists n1, n2, n3; "reporting"
// lists n1 and n3 under their other addresses (a second name for the same
// database, listing only the hosts that team may use). n2 is promoted
// while n1 runs on unfenced and n3 keeps following n1: pgdns proves
// timeline 2 under main and keeps n1 out of primary.main. primary.reporting
// must not answer n1 either: pgdns knows its timeline was superseded
// (review 13, R13b-2: it answered n1 for as long as n1 ran).
func TestSubsetClusterDuringAFailover(t *testing.T) {
	t.Parallel()
	pg := newReportingCluster(t)
	n1, n2, n3 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	ctx := context.Background()
	e := startMainAndReporting(t, pg, n1, n3)
	e.waitFor(t, "primary.main.db.local.", []string{n1.IP})
	e.waitFor(t, "primary.reporting.db.local.", []string{secondAddress(n1.IP)})

	common := e.insertAndTakeLSN(t, n1)
	waitStreaming(t, n2, 1, common)
	if err := n2.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.main.db.local.", []string{n2.IP})
	for _, name := range []string{"primary.reporting", "replica.reporting", "any.reporting"} {
		e.holds(t, name+".db.local.", time.Second, exactly(),
			"n1 and n3, on timeline 1, superseded by timeline 2 (pgdns knows it under main)")
	}
	e.waitFor(t, "primary.main.db.local.", []string{n2.IP})
}
