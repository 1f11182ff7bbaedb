package probe

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/zone"
)

// startFake runs a prober of the fake hosts (one cluster "main", addrs in
// order) on table until the test ends.
func startFake(t *testing.T, cfg Config, table *zone.Table, hosts map[string]*fakeHost) *Prober {
	t.Helper()
	return startFakeLogging(t, cfg, table, hosts, &testkit.Buffer{})
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s never completed", what)
	}
}

// A Refresh asked for less than MinRefreshGap after the last round started
// gets the next round, which starts when the gap is over, shared with
// every caller meanwhile; each round is counted.
func TestRefreshWaitsOutTheMinGap(t *testing.T) {
	primary := &fakeHost{ip: "10.0.0.1", lsn: 100}
	replica := &fakeHost{ip: "10.0.0.2", inRecovery: true, lsn: 100}
	const gap = 300 * time.Millisecond
	var mu sync.Mutex
	var starts []time.Time
	coalesced := map[Coalesced]int{}
	cfg := Config{Interval: time.Minute, Timeout: time.Second, MaxFails: 3, MinRefreshGap: gap,
		Clusters: []ClusterConfig{{Name: "main", Hosts: []string{"p:1", "r:1"}}},
		Hooks: Hooks{
			RefreshRound: func(string) { mu.Lock(); starts = append(starts, time.Now()); mu.Unlock() },
			RefreshCoalesced: func(_ string, why Coalesced) {
				mu.Lock()
				coalesced[why]++
				mu.Unlock()
			},
		}}
	table := zone.NewTable()
	p := startFake(t, cfg, table, map[string]*fakeHost{"p:1": primary, "r:1": replica})
	waitSnapshot(t, table, "ready", func(s *zone.Snapshot) bool { return s.Ready && roles(s) == "pr" })

	waitClosed(t, p.Refresh("main"), "the first refresh")
	replica.set(func(h *fakeHost) { h.lsn = 200 })
	a, b := p.Refresh("main"), p.Refresh("main")
	if a != b {
		t.Fatal("refreshes asked for inside the gap do not share the next round")
	}
	waitClosed(t, a, "the refresh after the gap")
	if got := table.Load().Clusters[0].Hosts[1].ReplayLSN; got != 200 {
		t.Fatalf("after the delayed refresh the snapshot has replay %v, want 200", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(starts) != 2 {
		t.Fatalf("%d rounds started, want 2", len(starts))
	}
	// The hook runs just after each round's start: allow for that.
	if d := starts[1].Sub(starts[0]); d < gap-10*time.Millisecond {
		t.Fatalf("the second round started %v after the first, inside the %v gap", d, gap)
	}
	if coalesced[CoalescedMinGap] != 2 || len(coalesced) != 1 {
		t.Fatalf("coalesced: %v, want 2 for the min gap", coalesced)
	}
}

// Eight callers asking back to back, each waiting 20ms as a lookup with
// dns.lsn_wait would, probe a host at most about once per gap (without the
// gap: hundreds of times a second).
func TestRefreshLoadIsBounded(t *testing.T) {
	primary := &fakeHost{ip: "10.0.0.1", lsn: 100}
	replica := &fakeHost{ip: "10.0.0.2", inRecovery: true, lsn: 100}
	const gap, d = 20 * time.Millisecond, time.Second
	var rounds atomic.Int64
	cfg := Config{Interval: time.Minute, Timeout: time.Second, MaxFails: 3, MinRefreshGap: gap,
		Clusters: []ClusterConfig{{Name: "main", Hosts: []string{"p:1", "r:1"}}},
		Hooks:    Hooks{RefreshRound: func(string) { rounds.Add(1) }}}
	table := zone.NewTable()
	p := startFake(t, cfg, table, map[string]*fakeHost{"p:1": primary, "r:1": replica})
	waitSnapshot(t, table, "ready", func(s *zone.Snapshot) bool { return s.Ready && roles(s) == "pr" })

	before := replica.probes.Load()
	start := time.Now()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < d {
				select {
				case <-p.Refresh("main"):
				case <-time.After(20 * time.Millisecond):
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	n := replica.probes.Load() - before
	bound := 2 * (took.Seconds()/gap.Seconds() + 2)
	t.Logf("replica probed %d times in %v by %d rounds (bound %.0f)", n, took, rounds.Load(), bound)
	if float64(n) > bound {
		t.Fatalf("the replica was probed %d times in %v with a %v gap (bound %.0f)", n, took, gap, bound)
	}
	if rounds.Load() == 0 || primary.probes.Load() < rounds.Load()/2 {
		t.Fatalf("%d rounds, the primary probed %d times: rounds re-probe the primary", rounds.Load(), primary.probes.Load())
	}
}

// Right after a reload the shared table still holds the old prober's
// snapshot, with hosts the new prober does not have. Refresh reads the
// prober's own state: it neither panics on a dropped host's index nor
// probes the old prober's hosts.
func TestRefreshUsesTheProbersOwnHosts(t *testing.T) {
	primary := &fakeHost{ip: "10.0.0.1", lsn: 100}
	r1 := &fakeHost{ip: "10.0.0.2", inRecovery: true, lsn: 100}
	r2 := &fakeHost{ip: "10.0.0.3", inRecovery: true, lsn: 100}
	hosts := map[string]*fakeHost{"p:1": primary, "r:1": r1, "r:2": r2}
	table := zone.NewTable()
	startFake(t, Config{Interval: time.Minute, Timeout: time.Second, MaxFails: 3,
		Clusters: []ClusterConfig{{Name: "main", Hosts: []string{"p:1", "r:1", "r:2"}}}}, table, hosts)
	waitSnapshot(t, table, "the old prober ready", func(s *zone.Snapshot) bool { return s.Ready && roles(s) == "prr" })

	// The reloaded configuration drops r:2; its prober warms up aside.
	next := startFake(t, Config{Interval: time.Minute, Timeout: time.Second, MaxFails: 3, Inactive: true,
		Clusters: []ClusterConfig{{Name: "main", Hosts: []string{"p:1", "r:1"}}}}, table, hosts)
	waitClosed(t, next.Ready(), "the new prober's first round")
	waitSnapshot(t, table, "", func(*zone.Snapshot) bool { return true })
	before := r2.probes.Load()
	func() {
		defer func() {
			if v := recover(); v != nil {
				t.Fatalf("Refresh panicked with the old prober's snapshot in the table: %v", v)
			}
		}()
		waitClosed(t, next.Refresh("main"), "the new prober's refresh")
	}()
	if n := r2.probes.Load() - before; n != 0 {
		t.Fatalf("the new prober's refresh probed the dropped host %d times", n)
	}
}

// gatedChecker probes a fake host and then, while a gate is set, holds the
// probe's result until the gate is closed: a probe in flight, on demand.
type gatedChecker struct {
	fakeChecker
	gate *atomic.Pointer[chan struct{}]
}

func (c gatedChecker) Check(ctx context.Context) (Sample, error) {
	s, err := c.fakeChecker.Check(ctx)
	if g := c.gate.Load(); g != nil {
		<-*g
	}
	return s, err
}

// A lookup arriving while a round runs shares it, though that round's
// probes may have read the replicas before its write; asking again once
// the round is done, it gets a round that starts after it asked and sees
// what was replayed since.
func TestRefreshDuringARoundThenTheNext(t *testing.T) {
	primary := &fakeHost{ip: "10.0.0.1", lsn: 100}
	replica := &fakeHost{ip: "10.0.0.2", inRecovery: true, lsn: 100}
	var gate atomic.Pointer[chan struct{}]
	var rounds atomic.Int64
	cfg := Config{Interval: time.Minute, Timeout: 5 * time.Second, MaxFails: 3,
		Clusters: []ClusterConfig{{Name: "main", Hosts: []string{"p:1", "r:1"}}},
		Hooks:    Hooks{RefreshRound: func(string) { rounds.Add(1) }}}
	table := zone.NewTable()
	newChecker := func(addr string) (Checker, error) {
		if addr == "r:1" {
			return gatedChecker{fakeChecker{replica}, &gate}, nil
		}
		return fakeChecker{primary}, nil
	}
	p := New(cfg, table, newChecker, slog.New(slog.NewTextHandler(&testkit.Buffer{}, nil)), "main")
	stop := runProber(p)
	defer stop()
	waitSnapshot(t, table, "ready", func(s *zone.Snapshot) bool { return s.Ready && roles(s) == "pr" })

	open := make(chan struct{})
	gate.Store(&open)
	before := replica.probes.Load()
	first := p.Refresh("main")
	// Until the round's probe of the replica is in flight.
	testkit.Eventually(t, 5*time.Second, time.Millisecond, "the refresh to probe the replica (probes)", func() (int64, bool) {
		n := replica.probes.Load()
		return n, n != before
	})
	replica.set(func(h *fakeHost) { h.lsn = 200 }) // replayed after that probe read it
	if p.Refresh("main") != first {
		t.Fatal("a lookup arriving during a round does not share it")
	}
	gate.Store(nil)
	close(open)
	waitClosed(t, first, "the first round")
	if got := table.Load().Clusters[0].Hosts[1].ReplayLSN; got != 100 {
		t.Fatalf("the first round's probe read replay %v before it changed, want 100", got)
	}
	second := p.Refresh("main")
	if second == first {
		t.Fatal("asking again after a round got the same round")
	}
	waitClosed(t, second, "the next round")
	if got := table.Load().Clusters[0].Hosts[1].ReplayLSN; got != 200 {
		t.Fatalf("after the next round the snapshot has replay %v, want 200", got)
	}
	if n := rounds.Load(); n != 2 {
		t.Fatalf("%d rounds, want 2", n)
	}
}

// A Refresh asked the moment a snapshot is in the table (here from the
// Published hook, which runs just after the table has it) probes the
// hosts that snapshot answers. Refresh reads them from the prober's own
// copy of its last snapshot, which was stored only after the hooks had
// run: such a Refresh found no host and completed at once, unprobed, and
// a read-your-writes lookup waiting on it was answered from the snapshot
// it could not use (seen as TestProberRefresh reading the old replay
// position after its refresh, 5 runs of 40 under load).
func TestRefreshRightAfterAPublishProbes(t *testing.T) {
	primary := &fakeHost{ip: "10.0.0.1", lsn: 100}
	replica := &fakeHost{ip: "10.0.0.2", inRecovery: true, lsn: 100}
	hosts := map[string]*fakeHost{"p:1": primary, "r:1": replica}
	var prober atomic.Pointer[Prober]
	var once sync.Once
	asked := make(chan (<-chan struct{}), 1)
	// A long interval: nothing but the refresh probes the replica again.
	cfg := Config{Interval: time.Minute, Timeout: 5 * time.Second, MaxFails: 3,
		Clusters: []ClusterConfig{{Name: "main", Hosts: []string{"p:1", "r:1"}}},
		Hooks: Hooks{Published: func(_, next *zone.Snapshot) {
			if next.Ready && roles(next) == "pr" {
				once.Do(func() {
					replica.set(func(h *fakeHost) { h.lsn = 200 })
					asked <- prober.Load().Refresh("main")
				})
			}
		}}}
	table := zone.NewTable()
	p := New(cfg, table, func(addr string) (Checker, error) { return fakeChecker{hosts[addr]}, nil },
		slog.New(slog.NewTextHandler(io.Discard, nil)), "main")
	prober.Store(p)
	t.Cleanup(runProber(p))

	var refreshed <-chan struct{}
	select {
	case refreshed = <-asked:
	case <-time.After(20 * time.Second):
		t.Fatal("no ready snapshot with a primary and a replica")
	}
	waitClosed(t, refreshed, "the refresh asked right after the first publish")
	if got := table.Load().Clusters[0].Hosts[1].ReplayLSN; got != 200 {
		t.Fatalf("after the refresh the snapshot has replay %v, want 200: the refresh probed nothing", got)
	}
}
