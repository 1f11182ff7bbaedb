package test

import (
	"context"
	"testing"
	"time"
)

// TestWitnessedTimelineKeepsTheOldPrimaryOutUnderEveryName: the scene of
// TestFreshPgdnsKeepsASupersededPrimaryOutWhileItsWitnessRestarts (n2
// promoted while n1 runs on unfenced, n3 followed n2 and made a
// restartpoint on timeline 2, n2 down), met by a pgdns started without
// knowledge that serves "main" (n1, n2, n3) and "reporting" (n1 alone,
// under its other address: a second name for the database, listing only
// its primary). n3's lower bound shows timeline 2 under main, so n1 is set
// aside there; primary.reporting must not answer n1 either.
func TestWitnessedTimelineKeepsTheOldPrimaryOutUnderEveryName(t *testing.T) {
	t.Parallel()
	pg := newReportingCluster(t)
	e := attach(t, pg, envOptions{})
	n1, n2, n3 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	e.waitFor(t, "replica.db.local.", []string{n2.IP, n3.IP})
	ctx := context.Background()
	common := e.insertAndTakeLSN(t, n1)
	waitStreaming(t, n2, 1, common)
	waitStreaming(t, n3, 1, common)
	if err := n2.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	n3.Follow(t, n2)
	writeAndTakeLSN(t, n2.Conn(t), "INSERT INTO t (v) VALUES ('on n2')")
	onTL2 := writeAndTakeLSN(t, n2.Conn(t), "CHECKPOINT")
	waitStreaming(t, n3, 2, onTL2)
	n3.Exec(t, "CHECKPOINT")
	if err := n2.Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	if err := e.app.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	fresh := startMainAndReporting(t, pg, n1)
	fresh.waitFirstRound(t, "the fresh pgdns")
	fresh.holds(t, "primary.main.db.local.", time.Second, without(n1.IP), "n1, superseded by timeline 2 (n3's restartpoint)")
	fresh.holds(t, "primary.reporting.db.local.", 2*time.Second, exactly(),
		"n1, writable on timeline 1, superseded by timeline 2 (n3's restartpoint, seen under main)")
}
