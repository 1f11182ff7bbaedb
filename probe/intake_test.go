package probe

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/zone"
)

// A replica that rounds drive has its own tick only every 2.5 intervals
// (intake.go: every tick before that would only wake it to skip it); when
// the rounds stop (the primary hangs: no answer opens a round) it probes
// on its own again, within three intervals of the last round and every
// interval after.
func TestReplicasProbeOnTheirOwnWhenRoundsStop(t *testing.T) {
	const interval = 100 * time.Millisecond
	var mu sync.Mutex
	asked := map[ProbeCause]int{}
	primary := &fakeHost{ip: "10.0.0.1", lsn: 100}
	replicas := []*fakeHost{{ip: "10.0.0.2", inRecovery: true, lsn: 100}, {ip: "10.0.0.3", inRecovery: true, lsn: 100}}
	hosts := map[string]*fakeHost{"p:1": primary, "r0:1": replicas[0], "r1:1": replicas[1]}
	cfg := Config{Interval: interval, Timeout: time.Minute, MaxFails: 3, // the hung probe fails after the test
		Clusters: []ClusterConfig{{Name: "main", Hosts: []string{"p:1", "r0:1", "r1:1"}}},
		Hooks: Hooks{Probes: func(_ string, why ProbeCause, n int) {
			mu.Lock()
			defer mu.Unlock()
			asked[why] += n
		}}}
	newChecker := func(addr string) (Checker, error) { return fakeChecker{hosts[addr]}, nil }
	table := zone.NewTable()
	p := New(cfg, table, newChecker, slog.New(slog.NewTextHandler(io.Discard, nil)), "main")
	stop := runProber(p)
	defer stop()
	waitSnapshot(t, table, "with a primary and 2 replicas", func(s *zone.Snapshot) bool {
		return s.Ready && s.Clusters[0].Primary == 0 && roles(s) == "prr"
	})
	primary.set(func(h *fakeHost) { h.hang = true })
	before := replicas[0].probes.Load()
	time.Sleep(3 * interval) // the last round's replicas probe on their own by now
	mid := replicas[0].probes.Load()
	time.Sleep(20 * interval)
	mu.Lock()
	t.Logf("asked %v", asked)
	mu.Unlock()
	// Every interval once on their own (every 2.5, 8 times, if the tick
	// stayed slow); at least 12 of 20, on a loaded machine.
	if n := replicas[0].probes.Load() - mid; n < 12 {
		t.Fatalf("a replica was probed %d times in the 20 intervals after the rounds stopped (%d in the 3 before), want about 20", n, mid-before)
	}
}

// openingChecker answers its host's first probe after slow (opening a
// session, as a real first probe does) and counts the first probes under
// way, the most at once in most; later probes answer at once.
type openingChecker struct {
	host        fakeChecker
	slow        time.Duration
	first       bool
	now, most   *atomic.Int64
	firstProbes *atomic.Int64
}

func (c *openingChecker) Check(ctx context.Context) (Sample, error) {
	if !c.first {
		c.first = true
		c.firstProbes.Add(1)
		n := c.now.Add(1)
		for m := c.most.Load(); n > m && !c.most.CompareAndSwap(m, n); m = c.most.Load() {
		}
		select {
		case <-time.After(c.slow):
		case <-ctx.Done():
		}
		c.now.Add(-1)
	}
	return c.host.Check(ctx)
}

func (*openingChecker) Close() {}

// At start, at most maxOpening hosts run their first probe (the one that
// opens the session) at once: 2,000 hosts all opened at once before (and
// 10,000 did in the scale bench, their first probes timing out, every host
// live after 57 s). A first probe that takes long frees its slot after
// openingHold, so that hosts that hang hold the rest up that long at most
// (logged: every host's first probe under way in about 2,000/64 × 25 ms,
// although each takes 500 ms).
func TestFirstProbesOpenABoundedNumberAtOnce(t *testing.T) {
	for _, c := range []struct {
		slow     time.Duration
		most     int64 // the bound on first probes at once
		everyone time.Duration
	}{
		// A slot is held openingHold at least, so a loaded machine on
		// which a 5 ms probe takes longer than that runs a few more.
		{slow: 5 * time.Millisecond, most: 4 * maxOpening, everyone: time.Minute},
		{slow: 500 * time.Millisecond, most: 2 * maxOpening * int64(500*time.Millisecond/openingHold+1), everyone: time.Minute},
	} {
		const hosts = 2000
		var now, most, firsts atomic.Int64
		cfg := Config{Interval: time.Second, Timeout: time.Second, MaxFails: 3}
		cc := ClusterConfig{Name: "main"}
		for i := range hosts {
			cc.Hosts = append(cc.Hosts, fmt.Sprintf("10.0.%d.%d:5432", i>>8, i&255))
		}
		cfg.Clusters = []ClusterConfig{cc}
		newChecker := func(addr string) (Checker, error) {
			return &openingChecker{host: fakeChecker{&fakeHost{ip: strings.TrimSuffix(addr, ":5432"), inRecovery: true, lsn: 100}},
				slow: c.slow, now: &now, most: &most, firstProbes: &firsts}, nil
		}
		p := New(cfg, zone.NewTable(), newChecker, slog.New(slog.NewTextHandler(io.Discard, nil)), "main")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		began := time.Now()
		go func() { p.Run(ctx); close(done) }()
		ok := testkit.Poll(c.everyone, 10*time.Millisecond, func() bool { return firsts.Load() == hosts })
		took := time.Since(began)
		cancel()
		<-done
		if !ok {
			t.Errorf("first probes taking %v: %d of %d hosts had theirs within %v", c.slow, firsts.Load(), hosts, c.everyone)
		}
		if m := most.Load(); m > c.most {
			t.Errorf("first probes taking %v: %d ran at once, want at most %d", c.slow, m, c.most)
		}
		t.Logf("first probes taking %v: every host's begun in %v, at most %d at once", c.slow, took.Round(time.Millisecond), most.Load())
	}
}
