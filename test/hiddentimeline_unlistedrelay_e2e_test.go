package test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// Review 13a, finding 3. n4 cascades from n2, a relay standby pgdns does
// not list (a DR site's upstream). A DR drill promotes n2 (timeline 2)
// while n1 goes on as the cluster's primary on timeline 1: n4 follows
// n2's promotion by itself (recovery_target_timeline = latest) and
// replays n2's branch. A probe role without pg_read_all_stats reads no
// WAL receiver's timeline, and n4's control file still says timeline 1:
// a lower bound at the newest timeline, which cannot tell it from a
// later, unseen one. n1 writes W right after the split, then much more;
// n2 writes a little, so that n4's replay position passes W's
// numerically while staying behind n1's. lsn-W must not answer n4, which
// lacks W. Before, with LOGIN only or with pg_read_file, lsn-W.replica
// answered n4 (TXT lag_bytes=457784, measured across two branches:
// bytes-1mb passed it); now a replica whose timeline is hidden is
// answered only when the primary's readable WAL senders prove it its
// own, which neither a cascade nor a role without pg_read_all_stats on
// the primary gives: n4 is set aside from the start, saying why. With
// pg_monitor (or pg_read_all_stats) n4's exact timeline 2 sets n1 aside
// instead (rule 1's promoted-copy case); and n4 is set aside before the
// drill already: on timeline 1 it streams from n2, which the cluster does
// not list (review 15c: such an upstream may be another writer of
// timeline 1).
func TestHiddenTimelineUnlistedRelayPromoted(t *testing.T) {
	t.Parallel()
	for name, grant := range map[string]string{"LOGIN only": "", "pg_monitor": "pg_monitor", "pg_read_file": "EXECUTE ON FUNCTION pg_read_file(text, bigint, bigint, boolean)", "pg_read_all_stats": "pg_read_all_stats"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			unlistedRelay(t, grant)
		})
	}
}

func unlistedRelay(t *testing.T, grant string) {
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(4)})
	n1, n2, n3, n4 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2], pg.Nodes[3]
	n1.Exec(t, "CREATE ROLE pgdns LOGIN")
	if grant != "" {
		n1.Exec(t, "GRANT "+grant+" TO pgdns")
	}
	n1.Exec(t, "CREATE TABLE t (id serial PRIMARY KEY, v text)")
	cascadeFromRelay(t, n2, n4)
	e := attach(t, pg, envOptions{DSN: leastPrivilege, Hosts: []string{n1.Addr(), n3.Addr(), n4.Addr()}})
	stats := grant == "pg_monitor" || grant == "pg_read_all_stats"
	if stats {
		// n4 streams timeline 1 from n2, which the cluster does not list:
		// a server pgdns does not probe may be another writer of timeline
		// 1, so n4 is set aside from the start (setAsideUnlistedUpstream,
		// test/timelineone_unlistedwriter_e2e_test.go); n3 is answered.
		e.waitFor(t, "replica.db.local.", []string{n3.IP})
		e.waitHost(t, n4.Addr(), "set aside as branch_unproven", func(h hostState) bool {
			return h.Aside == "branch_unproven" && strings.Contains(h.Note, "which the cluster does not list")
		})
	} else {
		e.waitFor(t, "primary.db.local.", []string{n1.IP})
		for _, n := range []*pgtest.Node{n3, n4} {
			e.waitHost(t, n.Addr(), "probed", func(h hostState) bool { return h.ReplayLSN != nil })
		}
	}
	w := relayPromotedBesideW(t, n1, n2, n3, n4)
	t.Logf("%s", positionsLine(t, nodeDSNs(pg)))
	dsns := map[string]string{n1.IP: n1.DSN(), n3.IP: n3.DSN(), n4.IP: n4.DSN()}
	seen := neverLacking(t, e, dsns, 3*time.Second, "W",
		"lsn-"+w+".replica.db.local.", "lsn-"+w+".any.db.local.", "lsn-"+w+".prefer-replica.db.local.")
	t.Logf("answered %v; TXT %q", seen, e.txt(t, "any.db.local."))
	if !stats {
		// Without the primary's statistics no WAL sender proves n3 or n4
		// its own (n4 has none: it cascades): both are set aside at the
		// newest timeline seen, saying why and what to do, and bytes-1mb
		// does not measure n4 across two branches. n4 may instead be set
		// aside as forked: once its replay position on n2's branch
		// passes one the primary was read at after it, rule 1 proves it
		// on another branch, which is the stronger reason and equally
		// keeps it out (seen in CI: forked before the hidden note was
		// read).
		waitHiddenAside(t, e, n3)
		e.waitHost(t, n4.Addr(), "set aside, hidden timeline or forked", func(h hostState) bool {
			return h.Aside == "forked" || h.Aside != "" && strings.HasPrefix(h.Note, "timeline hidden from the probe role") && strings.HasSuffix(h.Note, grantHint)
		})
		if ips := e.ips(t, "replica.db.local."); slices.Contains(ips, n4.IP) {
			t.Fatalf("replica.db.local answered %v, %s among them, set aside", ips, n4.IP)
		}
		if ips := e.ips(t, "bytes-1mb.replica.db.local."); len(ips) != 0 {
			t.Errorf("bytes-1mb.replica.db.local = %v, want none", ips)
		}
		if got := e.ips(t, "prefer-replica.db.local."); len(got) != 1 || got[0] != n1.IP {
			t.Errorf("prefer-replica.db.local = %v, want the primary %s", got, n1.IP)
		}
	}
}
