package probe

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

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
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
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
