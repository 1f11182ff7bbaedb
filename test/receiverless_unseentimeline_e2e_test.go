package test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// TestReceiverlessReplicaOnAnUnseenTimeline (decisions.md rule 1, the
// case left open by reading): n4 cascades from n2, a relay pgdns does not
// list; n2 is promoted (timeline 2) while n1 writes W and more on
// timeline 1, n4 follows n2 and replays past W's position on n2's branch,
// then n2 stops, so that n4 has no WAL receiver while its control file
// still says timeline 1. A pgdns started then (no state file: it never
// saw n4 stream timeline 2), with a superuser probe role, sees n4's lower
// bound at the newest timeline: lsn-W must not answer n4, which lacks W.
// Before, lsn-W.replica answered n4 (TXT lag_bytes=457784, measured across
// the two branches); now a replica whose lower bound pgdns never saw
// exact in its server run is set aside (branch_unproven), saying why.
func TestReceiverlessReplicaOnAnUnseenTimeline(t *testing.T) {
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(4)})
	n1, n2, n3, n4 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2], pg.Nodes[3]
	ctx := context.Background()
	n1.Exec(t, "CREATE TABLE t (id serial PRIMARY KEY, v text)")
	cascadeFromRelay(t, n2, n4)
	w := relayPromotedBesideW(t, n1, n2, n3, n4)
	if err := n2.Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	var control string
	testkit.Eventually(t, 30*time.Second, 50*time.Millisecond, "n4 without a WAL receiver", func() (string, bool) {
		n4.Query(t, "SELECT coalesce((SELECT status FROM pg_stat_wal_receiver), 'none')||' '||(SELECT timeline_id FROM pg_control_checkpoint())||' '||(SELECT min_recovery_end_timeline FROM pg_control_recovery())", &control)
		return control, control[:4] == "none"
	})
	if control != "none 1 1" && control != "none 1 0" {
		t.Skipf("n4's control file shows timeline 2 already (%s): the case needs it on 1", control)
	}
	e := launch(t, pg, envOptions{Hosts: []string{n1.Addr(), n3.Addr(), n4.Addr()}})
	e.waitWithin(t, 30*time.Second, "primary.db.local.", []string{n1.IP})
	e.waitHost(t, n4.Addr(), "probed", func(h hostState) bool { return h.ReplayLSN != nil })
	t.Logf("%s", positionsLine(t, nodeDSNs(pg)))
	dsns := map[string]string{n1.IP: n1.DSN(), n3.IP: n3.DSN(), n4.IP: n4.DSN()}
	seen := neverLacking(t, e, dsns, 5*time.Second, "W",
		"lsn-"+w+".replica.db.local.", "lsn-"+w+".any.db.local.", "lsn-"+w+".prefer-replica.db.local.")
	t.Logf("answered %v; TXT %q", seen, e.txt(t, "any.db.local."))
	e.waitHost(t, n4.Addr(), "set aside, its timeline a lower bound never seen exact", func(h hostState) bool {
		return h.Aside == "branch_unproven" && strings.HasPrefix(h.Note, "no WAL receiver streams to it")
	})
	if ips := e.ips(t, "replica.db.local."); slices.Contains(ips, n4.IP) {
		t.Fatalf("replica answered %v, n4 among them", ips)
	}
}
