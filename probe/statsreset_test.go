package probe

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// TestFlushColumnCarriesTheStatsReset: a primary's flush column as the
// server sends it (the flush position, a space, the statistics' reset
// time in µs) and as a bench's fake server does (the position alone: not
// known), and what no server sends.
func TestFlushColumnCarriesTheStatsReset(t *testing.T) {
	for in, want := range map[string]int64{"0/4FFFF00 1700000000000999": 1700000000000999, "0/4FFFF00": 0, "0/4FFFF00 0": 0} {
		cols := append([]string(nil), primaryCols...)
		cols[20] = in
		var s Sample
		if err := parseProbeRow(textRow(cols...), &s); err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if s.FlushLSN != 0x4FFFF00 || s.StatsReset != want {
			t.Errorf("%q: flush %s, stats reset %d; want 0/4FFFF00, %d", in, s.FlushLSN, s.StatsReset, want)
		}
	}
	cols := append([]string(nil), primaryCols...)
	cols[20] = "0/4FFFF00 soon"
	if err := parseProbeRow(textRow(cols...), new(Sample)); err == nil {
		t.Error("a reset time that is no number was taken")
	}
}

// TestStatsResetInARunIsACrash: a writable run whose statistics' reset
// time moves between two of its samples is taken for reinitialised
// after a crash, with a reason that says it may be a stats reset; one
// that reads it unchanged, or not at all (0), is not, and the first
// sample of a run only records it.
func TestStatsResetInARunIsACrash(t *testing.T) {
	run := time.UnixMicro(1700000000000000)
	r := writableRun{run: run}
	r.watchStatsReset(Sample{StartedAt: run, StatsReset: 1700000000000100})
	r.watchStatsReset(Sample{StartedAt: run, StatsReset: 1700000000000100})
	r.watchStatsReset(Sample{StartedAt: run}) // not read
	if r.crashed != "" || r.statsReset != 1700000000000100 {
		t.Fatalf("unchanged: %+v", r)
	}
	r.watchStatsReset(Sample{StartedAt: run, StatsReset: 1700000005000200})
	if !strings.Contains(r.crashed, "or a stats reset") || !strings.Contains(r.crashed, "2023-11-14T22:13:25.000200Z") ||
		r.statsReset != 1700000005000200 {
		t.Fatalf("moved: %+v", r)
	}
	first := r.crashed
	r.watchStatsReset(Sample{StartedAt: run, StatsReset: 1700000009000000})
	if r.crashed != first {
		t.Errorf("a second reset before the window was set replaced the first reason: %q", r.crashed)
	}
}

// TestProbeSessionFetchesStatisticsAsCached: a server whose sessions
// fetch statistics as a snapshot (stats_fetch_consistency = snapshot)
// gives the probe's session PostgreSQL's default, cache, so that a probe
// reading the statistics' reset time does not copy every statistic of
// the database.
func TestProbeSessionFetchesStatisticsAsCached(t *testing.T) {
	t.Parallel()
	cl := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(1), Conf: []string{"stats_fetch_consistency = snapshot"}})
	node := cl.Nodes[0]
	var server string
	node.Query(t, "SHOW stats_fetch_consistency", &server)
	if server != "snapshot" {
		t.Fatalf("the server's sessions fetch statistics as %q, want snapshot: the test would prove nothing", server)
	}
	c := pgCheckerOf(t, "user=postgres dbname=postgres sslmode=disable", node.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := c.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.StatsReset == 0 {
		t.Errorf("the primary's sample has no statistics' reset time: %+v", s)
	}
	row, err := sessionQuery(ctx, c, "SHOW stats_fetch_consistency")
	if err != nil || len(row) != 1 || row[0] != "cache" {
		t.Errorf("the probe's session fetches statistics as %q (%v), want cache", row, err)
	}
}
