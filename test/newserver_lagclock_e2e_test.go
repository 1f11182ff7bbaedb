package test

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/zone"
)

// TestNewServerAtThePrimarysAddressRestartsTheLagClock: a time lag bound
// is proven from the primary's WAL clock, the positions its probes read
// and when (docs/probe.md, "Lag, computed right"). A clock belongs to one
// server run: another server at the primary's address (the cluster
// rebuilt elsewhere and given the old addresses, so that pgdns replaces
// the cluster's identity) writes other WAL, and the old server's marks say
// nothing of when it inserted what its replicas lack.
//
// Cluster A (n1, n2, n3) runs under pgdns, which reaches each server at
// an address of its own (a forwarder); cluster B (b0 primary, b1 its
// replica, given recovery_min_apply_delay once caught up) runs beside it,
// its WAL past A's. W, a write on b0, is delayed on b1. Once W is older
// than 15 s, A is stopped and A's first two addresses forward to b0 and
// b1. Before the fix pgdns measured b1's lag from A's last mark
// below b1's replay position, A's last probe, a few seconds before, and
// lag-15s.replica answered b1 without W; now the clock starts over with
// b0's run and b1's lag is not known until it replays past b0's first
// sample (byte bounds, read from b0's own samples, are kept).
func TestNewServerAtThePrimarysAddressRestartsTheLagClock(t *testing.T) {
	bl := pgtest.Addrs(t)
	ctx := context.Background()
	a := pgtest.New(t, pgtest.Options{IPs: bl.IPs(3)})
	b := pgtest.New(t, pgtest.Options{IPs: []string{bl.IP(4), bl.IP(5)}})
	b0, b1 := b.Nodes[0], b.Nodes[1]
	// pgdns reaches every server through an address of its own (a VIP,
	// a forwarder), so that B can take A's addresses without a restart
	// of b1, whose WAL receiver a delayed replay would not start again.
	var proxies []*testkit.Proxy
	var hosts []string
	for i, n := range a.Nodes {
		addr := bl.Addr(7+i, 5432)
		proxies = append(proxies, testkit.StartProxy(t, addr, n.Addr(), 0))
		hosts = append(hosts, addr)
	}
	e := launch(t, a, envOptions{Hosts: hosts})
	e.waitFor(t, "primary.db.local.", []string{bl.IP(7)})
	e.waitFor(t, "replica.db.local.", []string{bl.IP(8), bl.IP(9)})

	// B's WAL past A's, replayed on b1.
	b0.Exec(t, "CREATE TABLE pad (x int)")
	for range 4 {
		b0.Exec(t, "INSERT INTO pad VALUES (1)") // a segment switch needs WAL since the last one
		b0.Exec(t, "SELECT pg_switch_wal()")
	}
	b0.Exec(t, "INSERT INTO pad VALUES (1)")
	var insertB string
	b0.Query(t, "SELECT pg_current_wal_insert_lsn()::text", &insertB)
	var replayB1 string
	testkit.Eventually(t, 10*time.Second, 100*time.Millisecond, "b1 caught up", func() (string, bool) {
		b1.Query(t, "SELECT coalesce(pg_last_wal_replay_lsn()::text, '')", &replayB1)
		return replayB1, replayB1 != "" && newServerCmpLSN(t, replayB1, insertB) >= 0
	})
	// From now on b1 applies a commit two minutes after it was made; its
	// WAL receiver streams on.
	b1.Exec(t, "ALTER SYSTEM SET recovery_min_apply_delay = '120s'")
	b1.Exec(t, "SELECT pg_reload_conf()")
	time.Sleep(500 * time.Millisecond)
	b0.Exec(t, "CREATE TABLE w (id int)") // W
	written := time.Now()

	// Wait until W is older than the bound, then give B A's addresses.
	time.Sleep(time.Until(written.Add(17 * time.Second)))
	var insertA string
	a.Nodes[0].Query(t, "SELECT pg_current_wal_insert_lsn()::text", &insertA)
	b1.Query(t, "SELECT pg_last_wal_replay_lsn()::text", &replayB1)
	if newServerCmpLSN(t, replayB1, insertA) <= 0 {
		t.Fatalf("setup: b1 replayed to %s, not past A's insert position %s", replayB1, insertA)
	}
	for _, n := range a.Nodes {
		if err := n.Stop(ctx, "immediate"); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range proxies {
		p.RefuseNew()
		p.Cut(true)
	}
	time.Sleep(100 * time.Millisecond)
	testkit.StartProxy(t, hosts[0], b0.Addr(), 0)
	testkit.StartProxy(t, hosts[1], b1.Addr(), 0)
	e.waitWithin(t, 30*time.Second, "primary.db.local.", []string{bl.IP(7)})
	e.waitWithin(t, 30*time.Second, "replica.db.local.", []string{bl.IP(8)})

	// For 8 s: b1 lacks W, committed more than 15 s ago, so lag-15s must
	// not answer it.
	conn := b1.Conn(t)
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_class WHERE relname = 'w'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		got := answerIPs(t, e.query(t, "udp", "lag-15s.replica.db.local.", dns.TypeA))
		if n == 0 && slices.Contains(got, bl.IP(8)) {
			t.Fatalf("lag-15s.replica answered b1, which lacks a commit made %v ago (TXT %q)",
				time.Since(written).Round(time.Second), strings.Join(e.txt(t, "lag-15s.replica.db.local."), " | "))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("TXT of replica: %q", e.txt(t, "replica.db.local."))
}

// newServerCmpLSN compares two LSNs as PostgreSQL prints them.
func newServerCmpLSN(t *testing.T, a, b string) int {
	t.Helper()
	la, err := zone.ParseLSN(a)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := zone.ParseLSN(b)
	if err != nil {
		t.Fatal(err)
	}
	return cmp.Compare(la, lb)
}
