package probe

import (
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/pgdns/pgdns/zone"
)

// A prober with Hooks.ClusterProbes counts each round's probes (its
// tick, its replicas', its closing probe) by the function the hook gave
// for the cluster, once each, and not by Probes as well.
func TestClusterProbesCountsEachRound(t *testing.T) {
	const interval = 100 * time.Millisecond
	hosts := map[string]*fakeHost{
		"p:1":  {ip: "10.0.0.1", lsn: 100},
		"r1:1": {ip: "10.0.0.2", inRecovery: true, lsn: 100},
		"r2:1": {ip: "10.0.0.3", inRecovery: true, lsn: 100},
	}
	var mu sync.Mutex
	byName := map[ProbeCause]int{}
	byCluster := map[string]map[ProbeCause]int{}
	made := 0
	cfg := Config{Interval: interval, Timeout: time.Second, MaxFails: 3,
		Clusters: []ClusterConfig{{Name: "main", Hosts: []string{"p:1", "r1:1", "r2:1"}}},
		Hooks: Hooks{
			Probes: func(_ string, why ProbeCause, n int) {
				mu.Lock()
				defer mu.Unlock()
				byName[why] += n
			},
			ClusterProbes: func(cluster string) func(ProbeCause, int) {
				made++
				counts := map[ProbeCause]int{}
				byCluster[cluster] = counts
				return func(why ProbeCause, n int) {
					mu.Lock()
					defer mu.Unlock()
					counts[why] += n
				}
			},
		}}
	newChecker := func(addr string) (Checker, error) { return fakeChecker{hosts[addr]}, nil }
	table := zone.NewTable()
	p := New(cfg, table, newChecker, slog.New(slog.NewTextHandler(io.Discard, nil)), "main")
	if made != 1 || byCluster["main"] == nil {
		t.Fatalf("ClusterProbes was called %d times (clusters %v), want once, for main", made, byCluster)
	}
	stop := runProber(p)
	defer stop()
	waitSnapshot(t, table, "with a primary and 2 replicas", func(s *zone.Snapshot) bool {
		return s.Ready && s.Clusters[0].Primary == 0 && roles(s) == "prr"
	})
	mu.Lock()
	clear(byName)
	clear(byCluster["main"])
	mu.Unlock()
	time.Sleep(10 * interval)
	mu.Lock()
	defer mu.Unlock()
	got := byCluster["main"]
	t.Logf("by ClusterProbes: %v; by Probes: %v", got, byName)
	if got[ProbeTick] < 5 || got[ProbeRound] < 2*got[ProbeTick]-4 || got[ProbeClosing] < got[ProbeTick]-2 {
		t.Errorf("by ClusterProbes: %v; want each round's tick, its 2 replicas' probes and its closing probe", got)
	}
	for _, why := range []ProbeCause{ProbeTick, ProbeTickDriven, ProbeRound, ProbeClosing} {
		if byName[why] != 0 {
			t.Errorf("Probes also counted %d %s probes, which ClusterProbes counts", byName[why], why)
		}
	}
}
