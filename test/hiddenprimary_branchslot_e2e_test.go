package test

import (
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// TestHiddenPrimaryStatsProveNoBranchBySlot: on a timeline above 1 the
// branch rule (decisions.md rule 1) answers a replica only when history
// files agree or one of the primary's WAL senders is provably its own, by
// its slot; without pg_read_all_stats on the primary every column of its
// WAL senders but the pid reads NULL, so the sender on the replica's slot
// may be pg_receivewal's, which a readable apply position (NULL for it)
// would tell apart. The replica's own statistics may be readable (another
// role there: pg_monitor granted on its upstream's branch, which it
// replays), so the hidden-timeline rule does not set it aside.
//
// n1 stops; n4 (not listed) is promoted to timeline 2 and grants
// pg_read_all_stats to the probe role; n3 follows n4 on slot n3 under n2's
// host name (primary_conninfo host=n2 hostaddr=n4: what a replication
// network, NAT or a second name does, which sender_host cannot see
// through); n2 is promoted to timeline 2 too and writes, and pg_receivewal
// -S n3 streams from it. Before, the row on slot n3 proved n3 n2's
// replica: replica answered n3, on n4's branch, without n2's writes. Now
// n3 is set aside branch_unproven, saying why and to grant pg_monitor.
func TestHiddenPrimaryStatsProveNoBranchBySlot(t *testing.T) {
	bin, err := pgtest.BinDir()
	testkit.Require(t, err)
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(4)})
	n1, n2, n3, n4 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2], pg.Nodes[3]
	ctx := context.Background()
	n1.Exec(t, "CREATE ROLE pgdns LOGIN")
	var end string
	n1.Query(t, "SELECT pg_current_wal_insert_lsn()::text", &end)
	for _, n := range []*pgtest.Node{n2, n3, n4} {
		testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, n.Name+" has the role", func() (bool, bool) {
			var ok bool
			n.Query(t, "SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = 'pgdns')", &ok)
			return ok, ok
		})
	}
	if err := n1.Stop(ctx, "fast"); err != nil { // its standbys receive all it wrote
		t.Fatal(err)
	}
	time.Sleep(time.Second)

	// n4's branch of timeline 2, with pg_read_all_stats for the probe role.
	if err := n4.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	n4.Exec(t, "GRANT pg_read_all_stats TO pgdns")
	n4.Exec(t, "SELECT pg_create_physical_replication_slot('n3')")
	n3.Exec(t, "ALTER SYSTEM SET primary_conninfo = 'host="+n2.IP+" hostaddr="+n4.IP+" port=5432 user=postgres application_name=n3'")
	n3.Exec(t, "ALTER SYSTEM SET primary_slot_name = 'n3'")
	n3.Exec(t, "SELECT pg_reload_conf()")
	testkit.Eventually(t, 30*time.Second, 100*time.Millisecond, "n3 streaming timeline 2 from n4, with the grant", func() (string, bool) {
		var s string
		n3.Query(t, "SELECT coalesce((SELECT status||' '||received_tli||' '||sender_host FROM pg_stat_wal_receiver), 'none')||' '||pg_has_role('pgdns', 'pg_read_all_stats', 'member')::text", &s)
		return s, s == "streaming 2 "+n2.IP+" true"
	})

	// n2's branch: the primary pgdns sees.
	if err := n2.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	n2.Exec(t, "CREATE TABLE branch_a AS SELECT g FROM generate_series(1, 10000) g") // past n3's position
	n2.Exec(t, "SELECT pg_create_physical_replication_slot('n3')")
	recv := exec.CommandContext(ctx, filepath.Join(bin, "pg_receivewal"), "-d",
		"host="+n2.IP+" port="+strconv.Itoa(n2.Port)+" user=postgres application_name=n3",
		"-S", "n3", "-D", t.TempDir(), "-n")
	startWALClient(t, recv)
	testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "pg_receivewal on slot n3 of n2", func() (int, bool) {
		var n int
		n2.Query(t, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'n3' AND active", &n)
		return n, n == 1
	})

	e := launch(t, pg, envOptions{DSN: leastPrivilege, Hosts: []string{n1.Addr(), n2.Addr(), n3.Addr()}})
	e.waitWithin(t, 30*time.Second, "primary.db.local.", []string{n2.IP})
	var hasA bool
	n3.Query(t, "SELECT to_regclass('branch_a') IS NOT NULL", &hasA)
	if hasA {
		t.Fatal("setup: n3 has n2's table; the case needs it on n4's branch")
	}
	// pgdns reads a WAL sender's slot when it first sees its pid and every
	// 10 s again: ask for 12 s.
	start := time.Now()
	for time.Since(start) < 12*time.Second {
		if ips := e.ips(t, "replica.db.local."); slices.Contains(ips, n3.IP) {
			_, hosts := e.get(t, http.DefaultClient, "/v1/hosts", "")
			t.Fatalf("replica answered %v: n3 streams from n4's branch of timeline 2 and lacks n2's writes; /v1/hosts: %s", ips, hosts)
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.waitHost(t, n3.Addr(), "set aside, its branch unproven", func(h hostState) bool {
		return h.Aside != "" && strings.Contains(h.Note, "its branch is unproven") && strings.Contains(h.Note, "grant pg_monitor")
	})
}
