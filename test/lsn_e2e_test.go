package test

// Tests of what lsn- tokens prove against real PostgreSQL, beyond the
// read-your-writes rule of trust_e2e_test.go.

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// Issue 22, case 8: a token on a timeline above every one the cluster has
// proven names WAL no host has, the primary included: the token is forged,
// from another cluster, or pgdns is behind a failover and its primary is
// superseded. Every name answers no address; before, prefer-replica and
// any answered the primary.
func TestTokenFromATimelineNobodyHas(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	r1, r2 := e.ip(1), e.ip(2)
	// Timeline 2: r1 promoted, r2 following it, the old primary gone.
	if err := e.pg.Nodes[0].Stop(context.Background(), "fast"); err != nil {
		t.Fatal(err)
	}
	if err := e.pg.Nodes[1].Promote(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.pg.Nodes[2].Follow(t, e.pg.Nodes[1])
	e.waitFor(t, "primary.db.local.", []string{r1})
	e.waitFor(t, "lsn-0-10-t2.replica.db.local.", []string{r2})
	e.waitFor(t, "lsn-0-10-t1.replica.db.local.", []string{r2}) // timeline 1 ended after 0/10

	for _, target := range []string{"replica", "prefer-replica", "any", "primary"} {
		for _, token := range []string{"lsn-0-10-t3", "lsn-0-10-t9"} {
			e.holds(t, token+"."+target+".db.local.", 200*time.Millisecond, exactly(), "no host has a position on timeline "+token[len(token)-1:])
		}
	}
	// The proven timeline still answers as always; a position beyond the
	// primary's reach on it is had by no host, the primary included
	// (review 7, H9: prefer-replica used to fall back to it).
	e.holds(t, "lsn-ffffffff-0-t2.prefer-replica.db.local.", 200*time.Millisecond, exactly(), "the primary, which cannot have that position")
	e.holds(t, "lsn-0-10-t2.any.db.local.", 200*time.Millisecond, exactly(r1, r2), "the primary and the replica")
}

// aheadOfPrimary returns, as an lsn- token, a position n bytes past the
// primary's insert position now: no replica has replayed it (while nothing
// is written), yet a client that just wrote could hold it.
func aheadOfPrimary(t *testing.T, primary *pgtest.Node, n uint64) string {
	t.Helper()
	var lsn string
	primary.Query(t, "SELECT (pg_current_wal_insert_lsn() + "+strconv.FormatUint(n, 10)+")::text", &lsn)
	return lsnLabel(lsn)
}

// Issue 29, item 6: a flood of lookups for an LSN beyond any position the
// primary can have reached (lsn-ffffffff-ffffffff) costs the databases
// nothing: each is answered at once, without a refresh round, and counted
// in pgdns_lsn_unreachable_total; the hosts are probed on the interval
// only. Before, every lookup asked for a refresh round (hundreds in 2 s).
// A token just ahead of the primary, which a client that wrote after the
// last probe may hold, still asks for one.
//
// The probes of the flood are counted by why they were made
// (pgdns_probes_total), in one scrape before and one after it, and
// bounded by the interval's schedule over the scrapes' own span: a loaded
// machine only makes ticks late (missed ones are dropped, not queued), so
// it lowers the figure; what it can add is a flux episode (a probe that
// timed out under load moves the role answer), whose probes are what a
// role change makes, not a lookup, and are left out (logged). A 2 s
// window at rest compared with a window that also held the TXT queries
// and the scrapes, host by host, failed at load 40-50 (65 > 48).
func TestUnreachableLSNCostsNoProbe(t *testing.T) {
	t.Parallel()
	const interval = 250 * time.Millisecond
	e := newEnv(t, envOptions{Interval: interval.String(), LSNWait: "20ms", MinGap: "5ms"})
	e.waitFor(t, "replica.db.local.", []string{e.ip(1), e.ip(2)})
	const roundsMetric, unreachableMetric = `pgdns_lsn_refresh_rounds_total{cluster="main"}`, `pgdns_lsn_unreachable_total{cluster="main"}`

	rounds, unreachable := e.metricSum(t, roundsMetric), e.metricSum(t, unreachableMetric)
	start := time.Now()
	before := e.probesByWhy(t)
	flood := e.hammer(t, "lsn-ffffffff-ffffffff.replica.db.local.", 8, 2*time.Second)
	after := e.probesByWhy(t)
	span := time.Since(start)
	// The slow path too (TXT), and the other names: same rule, same answers.
	for _, name := range []string{"lsn-ffffffff-ffffffff.replica.db.local.", "lsn-ffffffff-0-t1.prefer-replica.db.local.", "lsn-ffffffff-ffffffff.any.db.local."} {
		m := e.query(t, "udp", name, dns.TypeTXT)
		if m.Rcode != dns.RcodeSuccess {
			t.Fatalf("%s TXT: rcode %s", name, dns.RcodeToString[m.Rcode])
		}
	}
	if got := e.ips(t, "lsn-ffffffff-ffffffff.prefer-replica.db.local."); len(got) != 0 {
		t.Errorf("prefer-replica with an unreachable LSN = %v, want none: the primary provably lacks it", got)
	}
	if got := e.ips(t, "lsn-ffffffff-ffffffff.replica.db.local."); len(got) != 0 {
		t.Errorf("replica with an unreachable LSN = %v, want none", got)
	}
	lookups := float64(flood[dns.RcodeSuccess])
	if len(flood) != 1 || lookups == 0 {
		t.Errorf("answers by rcode (-1: no answer): %v, want only NOERROR", flood)
	}
	if n := e.metricSum(t, roundsMetric) - rounds; n != 0 {
		t.Errorf("%.0f lookups of an unreachable LSN started %.0f refresh rounds, want none", lookups, n)
	}
	if n := e.metricSum(t, unreachableMetric) - unreachable; n < lookups+5 {
		t.Errorf("%.0f unreachable lookups counted, want at least the %.0f of the flood and 5 more", n, lookups)
	}
	// No probe asked by a lookup, and the interval's probes only: each
	// host at most twice an interval (the primary's tick and its round's
	// closing probe; a replica's round probe, or its own tick should the
	// rounds stall), and once more at either end of the span (a probe in
	// flight, a kick queued). A probe a lookup made would make it
	// thousands: the flood is thousands of lookups in 2 s, hundreds at
	// load 50.
	delta := map[string]float64{}
	var scheduled float64
	for why, n := range after {
		delta[why] = n - before[why]
		if why != "flux" && why != "refresh" {
			scheduled += delta[why]
		}
	}
	bound := float64(len(e.pg.Nodes)) * 2 * (span.Seconds()/interval.Seconds() + 1)
	t.Logf("probes by why in %v (%.0f unreachable lookups): %v; bound %.0f", span.Round(time.Millisecond), lookups, delta, bound)
	if delta["refresh"] != 0 {
		t.Errorf("%.0f probes asked by refreshes during %.0f unreachable lookups, want none", delta["refresh"], lookups)
	}
	if scheduled > bound {
		t.Errorf("%.0f probes in %v during %.0f unreachable lookups (%v), more than the interval's %.0f", scheduled, span, lookups, delta, bound)
	}

	// A token just ahead of the primary is reachable: a refresh may find
	// the write on a replica, so it asks for one.
	ahead := aheadOfPrimary(t, e.pg.Nodes[0], 1<<20)
	rounds = e.metricSum(t, roundsMetric)
	if got := e.ips(t, "lsn-"+ahead+".replica.db.local."); len(got) != 0 {
		t.Fatalf("a position no replica has replayed answered %v", got)
	}
	if n := e.metricSum(t, roundsMetric) - rounds; n < 1 {
		t.Errorf("a token 1 MiB ahead of the primary started no refresh round")
	}
}

// Review R1: a token taken from pg_current_wal_insert_lsn() right after
// pg_switch_wal() points just past the long header of the next segment's
// first page (X+40), where no record ends; the replicas have every record
// before it and replay to X. lsn-X+40.replica answers them while the
// primary writes nothing more. Before, the token waited for the next WAL
// record (up to 15 s on an idle primary: the bgwriter's running-xacts
// record), and so did each answer. The proof needs no clock: an answer
// given while the primary's insert position is still the token's came
// without any record after it, which before was never so. A background
// record slipping in first leaves the run inconclusive, and it is tried
// again (at most 3 times).
func TestTokenJustPastASegmentHeader(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.waitFor(t, "replica.db.local.", []string{e.ip(1), e.ip(2)})
	conn := e.pg.Nodes[0].Conn(t)
	ctx := context.Background()
	insertLSN := func() string {
		var lsn string
		if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn); err != nil {
			t.Fatal(err)
		}
		return lsn
	}
	for try := 1; ; try++ {
		if _, err := conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS t (id serial PRIMARY KEY, v text); INSERT INTO t (v) VALUES ('switch')"); err != nil {
			t.Fatal(err) // something to switch away from
		}
		if _, err := conn.Exec(ctx, "SELECT pg_switch_wal()"); err != nil {
			t.Fatal(err)
		}
		token := insertLSN()
		if !strings.HasSuffix(token, "000028") {
			t.Fatalf("insert position after pg_switch_wal() = %s, want one 40 bytes into a segment", token)
		}
		took := e.waitFor(t, "lsn-"+lsnLabel(token)+".replica.db.local.", []string{e.ip(1), e.ip(2)})
		now := insertLSN()
		t.Logf("try %d: lsn-%s answered both replicas in %v; the primary's insert position is %s", try, lsnLabel(token), took.Round(time.Millisecond), now)
		if now == token {
			break // answered with no record past the token
		}
		if try == 3 {
			t.Fatalf("lsn-%s answered the caught-up replicas only once the primary wrote past it (now at %s), in each of %d tries", lsnLabel(token), now, try)
		}
	}
}
