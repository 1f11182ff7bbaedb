package probe

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/zone"
)

// lightFakeChecker is a fake host's checker that can probe lightly
// (closingChecker): a light probe reads what the fake's full one does,
// is counted in light, and, while gate is set, holds its result until
// the gate is closed.
type lightFakeChecker struct {
	fakeChecker
	light *atomic.Int64
	gate  *atomic.Pointer[chan struct{}]
}

func (c lightFakeChecker) checkClosing(ctx context.Context, _ time.Duration, s *Sample) (bool, error) {
	c.light.Add(1)
	c.h.probes.Add(-1) // fakeChecker.Check counts full probes
	sample, err := c.fakeChecker.Check(ctx)
	if g := c.gate.Load(); g != nil {
		select {
		case <-*g:
		case <-ctx.Done():
		}
	}
	*s = sample
	return err == nil, err
}

// refreshClosingPair runs a prober of a primary p:1, which can be probed
// lightly, and its replica r:1, with gap as dns.lsn_refresh_min_gap and
// an interval long enough that nothing but refreshes probes them after
// the first round. It returns the prober once its first snapshot with both
// is in the table.
func refreshClosingPair(t *testing.T, gap time.Duration) (p *Prober, primary, replica *fakeHost, light *atomic.Int64, gate *atomic.Pointer[chan struct{}]) {
	t.Helper()
	primary = &fakeHost{ip: "10.0.0.1", lsn: 1000} // ahead of every replay position the tests set
	replica = &fakeHost{ip: "10.0.0.2", inRecovery: true, lsn: 100}
	light, gate = new(atomic.Int64), new(atomic.Pointer[chan struct{}])
	cfg := Config{Interval: time.Minute, Timeout: 20 * time.Second, MaxFails: 3, MinRefreshGap: gap,
		Clusters: []ClusterConfig{{Name: "main", Hosts: []string{"p:1", "r:1"}}}}
	table := zone.NewTable()
	newChecker := func(addr string) (Checker, error) {
		if addr == "p:1" {
			return lightFakeChecker{fakeChecker{primary}, light, gate}, nil
		}
		return fakeChecker{replica}, nil
	}
	p = New(cfg, table, newChecker, slog.New(slog.NewTextHandler(&testkit.Buffer{}, nil)), "main")
	t.Cleanup(runProber(p))
	waitSnapshot(t, table, "ready", func(s *zone.Snapshot) bool { return s.Ready && roles(s) == "pr" })
	time.Sleep(50 * time.Millisecond) // whatever the start asked for done
	return p, primary, replica, light, gate
}

// Under lsn- lookups, a refresh round that ends within the refresh gap
// closes with a light probe of the primary (closing.go), as a probe round
// does: its own full probe of the primary read the rest a moment before,
// and the next round cannot start before the gap is over. Before, the
// closing probe was a full one: under a steady stream of lookups the
// primary ran the full statement twice a round (the dbcost bench: 364
// probes/s of the primary, 183 of a replica).
func TestRefreshClosingProbeIsLight(t *testing.T) {
	const gap, rounds = 50 * time.Millisecond, 5
	p, primary, replica, light, _ := refreshClosingPair(t, gap)
	light0, full0 := light.Load(), primary.probes.Load()
	for i := range rounds {
		replica.set(func(h *fakeHost) { h.lsn = zone.LSN(200 + i) })
		waitClosed(t, p.Refresh("main"), "a refresh")
		if got := p.published.Load().Clusters[0].Hosts[1].ReplayLSN; got != zone.LSN(200+i) {
			t.Fatalf("round %d published replay %v, want %v", i, got, 200+i)
		}
		testkit.Eventually(t, 5*time.Second, time.Millisecond, fmt.Sprintf("round %d: its closing probe of the primary, light (full probes: %d)", i, primary.probes.Load()-full0), func() (int64, bool) {
			n := light.Load() - light0
			return n, n == int64(i+1)
		})
		time.Sleep(gap) // the next round starts at once, not at the gap's end
	}
	if full := primary.probes.Load() - full0; full != rounds {
		t.Fatalf("%d refresh rounds probed the primary in full %d times (and lightly %d), want %d", rounds, full, light.Load()-light0, rounds)
	}
}

// A refresh round that ends past the gap closes with a full probe of the
// primary, and the next round, asked for at once, takes it for its own
// while it is in flight; a round that starts while a light closing probe
// is in flight does not take it (it reads too little): it probes the
// primary in full once the light probe is done, and its waiters are let
// go then, not at the probe's timeout.
func TestRefreshRoundAfterAClosingProbe(t *testing.T) {
	t.Run("past the gap: full, taken by the next round", func(t *testing.T) {
		const gap = time.Nanosecond // every round ends past it
		p, primary, _, light, gate := refreshClosingPair(t, gap)
		light0, full0 := light.Load(), primary.probes.Load()
		open := make(chan struct{})
		gate.Store(&open) // a light probe would hold
		waitClosed(t, p.Refresh("main"), "a refresh")
		waitClosed(t, p.Refresh("main"), "the next refresh")
		testkit.Eventually(t, 5*time.Second, time.Millisecond, "the second round's closing probe", func() (int64, bool) {
			n := primary.probes.Load() - full0
			return n, n >= 3
		})
		gate.Store(nil)
		close(open)
		if l := light.Load() - light0; l != 0 {
			t.Fatalf("rounds that ended past the %v gap closed with %d light probes of the primary, want full ones", gap, l)
		}
	})
	t.Run("within the gap: light, not taken", func(t *testing.T) {
		const gap = 200 * time.Millisecond
		p, primary, _, light, gate := refreshClosingPair(t, gap)
		time.Sleep(gap)
		light0 := light.Load()
		open := make(chan struct{})
		gate.Store(&open)
		waitClosed(t, p.Refresh("main"), "a refresh")
		testkit.Eventually(t, 5*time.Second, time.Millisecond, "the round's light closing probe in flight", func() (int64, bool) {
			n := light.Load() - light0
			return n, n == 1
		})
		time.Sleep(gap) // the next round starts at once, the light probe still in flight
		full0 := primary.probes.Load()
		next := p.Refresh("main")
		time.AfterFunc(100*time.Millisecond, func() { gate.Store(nil); close(open) })
		start := time.Now()
		waitClosed(t, next, "the round asked for while the light closing probe was in flight")
		if full := primary.probes.Load() - full0; full < 1 {
			t.Fatalf("the round was let go after %v with no full probe of the primary", time.Since(start))
		}
	})
}
