package probe

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgdns/pgdns/zone"
)

// What probing a fleet costs pgdns's side of it, sockets aside: every host
// of a fleet of clusters of 3 (benchFleet's samples) is probed by an
// in-memory checker that answers at once, through the whole prober (a
// goroutine and a tick per host, the aggregator, probe rounds, holding,
// publishing), for a few seconds once every host has been probed. It
// reports the probes done per second against the configured rate
// (hosts/interval: a prober that cannot keep it falls behind here as at a
// real fleet, only without the sockets' cost) and the CPU per probe. Run
// with
//
//	go test -run '^$' -bench ProbeFleet -benchtime 1x ./probe/

// memChecker answers with the bench fleet's next sample of its host.
type memChecker struct {
	f      *benchFleet
	ci, hi int
	lsn    *atomic.Uint64 // the fleet's WAL, shared
	probes *atomic.Int64
	delay  time.Duration // how long a probe takes
}

func (c *memChecker) Check(ctx context.Context) (Sample, error) {
	c.probes.Add(1)
	s := c.f.samples[c.ci][c.hi]
	s.Start = time.Now()
	s.End = s.Start
	if c.delay > 0 {
		time.Sleep(c.delay)
		s.End = time.Now()
	}
	lsn := zone.LSN(0x3000000 + c.lsn.Add(64))
	if s.InRecovery {
		s.ReceiveLSN, s.ReplayLSN = lsn, lsn
	} else {
		s.InsertLSN, s.ReplayLSN = lsn, lsn
	}
	return s, ctx.Err()
}

// CheckWithin is Check with the deadline the checker keeps itself, as
// pgChecker does (timedChecker): no context per probe.
func (c *memChecker) CheckWithin(ctx context.Context, _ time.Duration) (Sample, error) {
	return c.Check(ctx)
}

func (*memChecker) Close() {}

func BenchmarkProbeFleet(b *testing.B) {
	for _, fl := range []struct {
		clusters int
		interval time.Duration
		delay    time.Duration // a probe's duration (and so each hop of a round)
	}{{333, 250 * time.Millisecond, 0}, {1000, 250 * time.Millisecond, 0}, {3334, time.Second, 0},
		// Each hop of a round under holdMax (250 ms), the round over it
		// in all, as the scale bench's rounds at 10,000 hosts every 1s:
		// builds/round says whether a cluster is built once a round
		// (hold.go, deferBuild).
		{3334, time.Second, 150 * time.Millisecond}} {
		name := fmt.Sprintf("hosts=%d/every=%v", fl.clusters*3, fl.interval)
		if fl.delay > 0 {
			name += fmt.Sprintf("/probe=%v", fl.delay)
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				probeFleet(b, fl.clusters, fl.interval, fl.delay, 3*time.Second)
			}
		})
	}
}

// probeFleet probes a fleet of clusters of 3 every interval, each probe
// taking delay, for span once every host has been probed, and reports
// what it did.
func probeFleet(b *testing.B, clusters int, interval, delay, span time.Duration) {
	f := &benchFleet{started: time.Now().Add(-time.Hour), clock: time.Now}
	samples := newFleetOnClock(b, clusters, 3, time.Now).samples // the layout alone
	f.samples = samples
	var lsn atomic.Uint64
	var probes atomic.Int64
	cfg := Config{Interval: interval, Timeout: time.Second, MaxFails: 3}
	index := map[string][2]int{}
	for ci := range clusters {
		cc := ClusterConfig{Name: fmt.Sprintf("c%d", ci)}
		for hi := range 3 {
			addr := fmt.Sprintf("10.%d.%d.%d:5432", ci>>8, ci&255, hi+1)
			cc.Hosts = append(cc.Hosts, addr)
			index[addr] = [2]int{ci, hi}
		}
		cfg.Clusters = append(cfg.Clusters, cc)
	}
	var publishes, builds atomic.Int64
	cfg.Hooks.Published = func(prev, next *zone.Snapshot) { // as internal/app does
		publishes.Add(1)
		builds.Add(int64(len(next.Changed))) // the clusters built, once the fleet is ready (zone.Snapshot.Changed)
		_ = zone.Changes(prev, next)
	}
	var mu sync.Mutex
	why := map[ProbeCause]int{}
	cfg.Hooks.Probes = func(_ string, c ProbeCause, n int) { mu.Lock(); why[c] += n; mu.Unlock() }
	newChecker := func(addr string) (Checker, error) {
		at := index[addr]
		return &memChecker{f: f, ci: at[0], hi: at[1], lsn: &lsn, probes: &probes, delay: delay}, nil
	}
	table := zone.NewTable()
	p := New(cfg, table, newChecker, slog.New(slog.NewTextHandler(io.Discard, nil)), "c0")
	stop := runProber(p)
	defer stop()
	waitReady(b, p, time.Minute)
	time.Sleep(2 * interval) // the rounds under way
	mu.Lock()
	why0 := maps.Clone(why)
	mu.Unlock()
	n0, pub0, built0, cpu0, t0 := probes.Load(), publishes.Load(), builds.Load(), cpuTime(), time.Now()
	time.Sleep(span)
	n, pub, built, cpu, took := probes.Load()-n0, publishes.Load()-pub0, builds.Load()-built0, cpuTime()-cpu0, time.Since(t0)
	mu.Lock()
	for c, k := range why {
		if v := float64(k-why0[c]) / took.Seconds(); v > 0 {
			b.ReportMetric(v, string(c)+"/s")
		}
	}
	mu.Unlock()
	snap := table.Load()
	live := 0
	for _, c := range snap.Clusters {
		for hi := range c.Hosts {
			if r := c.Hosts[hi].Role; r == zone.RolePrimary || r == zone.RoleReplica {
				live++
			}
		}
	}
	hosts := clusters * 3
	b.ReportMetric(float64(n)/took.Seconds(), "probes/s")
	b.ReportMetric(float64(n)/took.Seconds()/(float64(hosts)/interval.Seconds()), "of-configured")
	b.ReportMetric(float64(cpu.Microseconds())/float64(max(n, 1)), "cpu-us/probe")
	b.ReportMetric(float64(pub)/took.Seconds(), "publishes/s")
	b.ReportMetric(float64(built)/took.Seconds()/(float64(clusters)/interval.Seconds()), "builds/round")
	b.ReportMetric(float64(live), "live")
}
