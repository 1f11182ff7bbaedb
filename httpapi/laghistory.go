package httpapi

import (
	"context"
	"sync"
	"time"

	"github.com/pgdns/pgdns/zone"
)

// Lag history for the status page's sparklines: one sample of every
// replica's time lag per step, the last LagSamples steps, in memory only.
//
// Memory is bounded whatever the fleet does: at most LagHosts hosts are
// kept, each with a fixed array of LagSamples int32 (600 bytes) plus its
// key and map entry, so the whole history stays under LagHosts × ~740
// bytes ≈ 2.9 MiB (BenchmarkLagHistoryMemory: 2,948 KiB at the cap,
// 139 KiB for 200 hosts). A host that leaves the
// snapshot (a reload, a Patroni member gone) is forgotten at the next
// sample; past LagHosts the hosts beyond are not recorded (their
// sparkline says so). Nothing grows with time: an hour of samples costs
// what five minutes do.
const (
	LagSamples = 150             // samples kept per host
	LagStep    = 2 * time.Second // one sample per step: LagSamples × LagStep = 5 minutes
	LagHosts   = 4096            // hosts recorded at most
)

// Sample values that are no lag.
const (
	lagAbsent  int32 = -1 // the host was not in the snapshot (or not recorded yet)
	lagUnknown int32 = -2 // in the snapshot, but its lag could not be vouched for
)

// hostKey names a host across snapshots.
type hostKey struct{ cluster, addr string }

// LagHistory records replicas' lags from zone views, for the sparklines.
// Record and the page's reads may run concurrently.
type LagHistory struct {
	mu    sync.Mutex
	times [LagSamples]time.Time // when each slot was sampled; zero: never
	next  int                   // the slot the next Record writes
	hosts map[hostKey]*[LagSamples]int32
}

// NewLagHistory returns an empty history.
func NewLagHistory() *LagHistory {
	return &LagHistory{hosts: map[hostKey]*[LagSamples]int32{}}
}

// Record takes one sample of v: each replica's time lag as v vouches for
// it (the rule TXT and /v1/hosts show lags by), unknown otherwise. The
// primary and hosts that are not replicas are sampled as unknown: they
// have no lag to draw.
func (l *LagHistory) Record(v zone.View) {
	l.mu.Lock()
	defer l.mu.Unlock()
	slot := l.next
	l.next = (l.next + 1) % LagSamples
	l.times[slot] = v.Now
	seen := make(map[hostKey]bool, len(l.hosts))
	for _, c := range v.Snap.Clusters {
		for i := range c.Hosts {
			h := &c.Hosts[i]
			k := hostKey{c.Name, h.Addr}
			row := l.hosts[k]
			if row == nil {
				if len(l.hosts) >= LagHosts {
					continue
				}
				row = new([LagSamples]int32)
				for j := range row {
					row[j] = lagAbsent
				}
				l.hosts[k] = row
			}
			seen[k] = true
			row[slot] = lagUnknown
			if h.Role != zone.RoleReplica || !v.Live(h) {
				continue
			}
			if lag, ok := v.Lag(c, h); ok {
				row[slot] = int32(min(lag.Milliseconds(), 1<<31-1))
			}
		}
	}
	for k := range l.hosts {
		if !seen[k] {
			delete(l.hosts, k)
		}
	}
}

// Run records a sample of table every step until ctx is done.
func (l *LagHistory) Run(ctx context.Context, table *zone.Table, step time.Duration) {
	t := time.NewTicker(step)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			l.Record(table.View(now))
		}
	}
}

// lagPoint is one sample of one host: when, and its lag in milliseconds
// (lagUnknown when it could not be vouched for).
type lagPoint struct {
	at time.Time
	ms int32
}

// series returns the samples of a host since since, oldest first, and
// whether the host is recorded at all.
func (l *LagHistory) series(cluster, addr string, since time.Time) ([]lagPoint, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	row := l.hosts[hostKey{cluster, addr}]
	if row == nil {
		return nil, false
	}
	out := make([]lagPoint, 0, LagSamples)
	for i := range LagSamples {
		slot := (l.next + i) % LagSamples
		at := l.times[slot]
		if at.IsZero() || at.Before(since) || row[slot] == lagAbsent {
			continue
		}
		out = append(out, lagPoint{at: at, ms: row[slot]})
	}
	return out, true
}

// start is where the sparklines' time axis begins at now: the oldest
// sample of the last LagSamples steps, so that a history only seconds old
// still fills the box; now when nothing is recorded.
func (l *LagHistory) start(now time.Time) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	start, floor := now, now.Add(-LagSamples*LagStep)
	for _, at := range l.times {
		if !at.IsZero() && !at.Before(floor) && at.Before(start) {
			start = at
		}
	}
	return start
}

// full reports whether LagHosts hosts are recorded: others are not.
func (l *LagHistory) full() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.hosts) >= LagHosts
}
