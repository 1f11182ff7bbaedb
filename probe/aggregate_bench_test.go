package probe

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/pgdns/pgdns/zone"
)

// What a probe result costs the aggregator once the checker has it: the
// fleets are fed results directly (no goroutines, no sockets), in the order
// probe rounds produce them: each cluster's primary on its tick, its
// replicas, the primary's closing probe. Run with
//
//	go test -run '^$' -bench Aggregator -benchmem ./probe/
//
// result: take (record, the round, whether it is steady) of one result;
// publish: one cluster's round taken, then a snapshot: the publish of a
// result that is not held (hold.go) costs about the op less results/op
// results. What a result costs overall is result plus publish times the
// publishes per result, which the hold and the fleet's rate set.

type benchFleet struct {
	p       *Prober
	samples [][]Sample // per cluster, per host: the next sample
	lsn     zone.LSN
	started time.Time
	clock   func() time.Time // the samples' times and the prober's (p.now)
}

func newBenchFleet(tb testing.TB, clusters, per int) *benchFleet {
	tb.Helper()
	return newFleetOnClock(tb, clusters, per, time.Now)
}

// stepClock is a clock that moves a microsecond each time it is read, from
// now: a fleet on it never ages, however slowly a loaded machine runs the
// test (on the wall clock, every host of a 1,000-cluster fleet went stale
// StaleAfter after it was built, and the publish that saw it rebuilt every
// cluster: 4,983 allocations a publish instead of 4, seen as 62 at load
// 13). Not safe for concurrent use: the tests on it call take and
// publish from one goroutine.
func stepClock() func() time.Time {
	at := time.Now()
	return func() time.Time {
		at = at.Add(time.Microsecond)
		return at
	}
}

// newFleetOnClock is newBenchFleet with its samples and its prober on clock.
func newFleetOnClock(tb testing.TB, clusters, per int, clock func() time.Time) *benchFleet {
	tb.Helper()
	cfg := Config{Interval: 250 * time.Millisecond, Timeout: time.Second, MaxFails: 3}
	f := &benchFleet{lsn: 0x3000000, started: clock().Add(-time.Hour), clock: clock}
	for ci := range clusters {
		cc := ClusterConfig{Name: fmt.Sprintf("c%d", ci)}
		var hosts []Sample
		var standbys []zone.Standby
		for hi := range per {
			ip := netip.AddrFrom4([4]byte{10, byte(ci >> 8), byte(ci), byte(hi + 1)})
			cc.Hosts = append(cc.Hosts, ip.String()+":5432")
			s := Sample{IP: ip, SystemID: uint64(1000 + ci), StartedAt: f.started.Add(time.Duration(hi) * time.Second), Timeline: 1,
				WALBlockSize: 8192, WALSegmentSize: 16 << 20}
			if hi > 0 {
				s.InRecovery = true
				s.AppName, s.Receiver = fmt.Sprintf("r%d", hi), "streaming"
				s.SenderHost, s.SenderPort = hosts[0].IP.String(), 5432
				standbys = append(standbys, zone.Standby{Addr: ip, AppName: s.AppName})
			}
			hosts = append(hosts, s)
		}
		hosts[0].Standbys = standbys
		cfg.Clusters = append(cfg.Clusters, cc)
		f.samples = append(f.samples, hosts)
	}
	table := zone.NewTable()
	cfg.Hooks.Published = func(prev, next *zone.Snapshot) { _ = zone.Changes(prev, next) } // as internal/app does
	f.p = New(cfg, table, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), "c0")
	f.p.now = clock
	for ci := range clusters {
		for hi := range per {
			f.p.take(f.result(ci, hi, true))
		}
	}
	f.p.publish()
	f.p.publish() // the first ready snapshot, then one with roles known to the rounds
	if !f.p.last.Ready || f.p.last.Clusters[0].Primary != 0 {
		tb.Fatalf("fleet not ready: ready=%v primary=%d", f.p.last.Ready, f.p.last.Clusters[0].Primary)
	}
	return f
}

// result is host hi of cluster ci's next result, its WAL a little further.
func (f *benchFleet) result(ci, hi int, ticked bool) result {
	f.lsn += 64
	s := f.samples[ci][hi]
	s.Start = f.clock()
	s.End = s.Start.Add(100 * time.Microsecond)
	if s.InRecovery {
		s.ReceiveLSN, s.ReplayLSN = f.lsn, f.lsn
	} else {
		s.InsertLSN, s.ReplayLSN = f.lsn, f.lsn
	}
	return result{cluster: ci, host: hi, started: s.Start, ticked: ticked, sample: s}
}

// round yields the results of one probe round of cluster ci: the
// primary's tick, each replica, the closing probe.
func (f *benchFleet) round(ci int, yield func(result)) {
	yield(f.result(ci, 0, true))
	for hi := 1; hi < len(f.samples[ci]); hi++ {
		yield(f.result(ci, hi, false))
	}
	yield(f.result(ci, 0, false))
}

// results returns the fleet's results one by one, round after round of
// one cluster after another.
func (f *benchFleet) results() func() result {
	var queue []result
	ci := 0
	return func() result {
		if len(queue) == 0 {
			queue = queue[:0:0]
			f.round(ci, func(r result) { queue = append(queue, r) })
			ci = (ci + 1) % len(f.samples)
		}
		r := queue[0]
		queue = queue[1:]
		return r
	}
}

// cpuTime is the CPU the process has used, garbage collection included:
// on a machine others load, wall time per op says more of them than of
// the aggregator.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var benchFleets = []struct{ clusters, per int }{{100, 3}, {100, 10}, {1000, 10}, {333, 3}, {3334, 3}}

func BenchmarkAggregator(b *testing.B) {
	for _, fl := range benchFleets {
		name := fmt.Sprintf("hosts=%d/clusters=%d", fl.clusters*fl.per, fl.clusters)
		b.Run(name+"/result", func(b *testing.B) {
			f := newBenchFleet(b, fl.clusters, fl.per)
			next := f.results()
			b.ReportAllocs()
			cpu := cpuTime()
			for b.Loop() {
				f.p.take(next())
			}
			b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
		})
		b.Run(name+"/publish", func(b *testing.B) {
			f := newBenchFleet(b, fl.clusters, fl.per)
			b.ReportAllocs()
			results, ci := 0, 0
			cpu := cpuTime()
			for b.Loop() {
				f.round(ci, func(r result) {
					f.p.take(r)
					results++
				})
				f.p.publish()
				ci = (ci + 1) % fl.clusters
			}
			b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(results)/float64(b.N), "results/op")
		})
	}
}
