package probe

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/zone"
)

// fakeHost is a scripted host: its behaviour can change while probed.
type fakeHost struct {
	mu         sync.Mutex
	ip         string
	inRecovery bool
	lsn        zone.LSN
	started    time.Time // its postmaster start time (zero unless a test sets one)
	hang       bool
	fail       error
	probes     atomic.Int64
}

func (f *fakeHost) set(fn func(*fakeHost)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

type fakeChecker struct{ h *fakeHost }

func (c fakeChecker) Check(ctx context.Context) (Sample, error) {
	c.h.probes.Add(1)
	c.h.mu.Lock()
	hang, fail := c.h.hang, c.h.fail
	s := Sample{Start: time.Now(), End: time.Now(), IP: netip.MustParseAddr(c.h.ip), InRecovery: c.h.inRecovery,
		ReplayLSN: c.h.lsn, Timeline: 1, SystemID: 42, StartedAt: c.h.started}
	if !s.InRecovery {
		s.InsertLSN = c.h.lsn
	}
	c.h.mu.Unlock()
	if hang {
		<-ctx.Done()
		return Sample{}, ctx.Err()
	}
	if fail != nil {
		return Sample{}, fail
	}
	return s, nil
}

func (fakeChecker) Close() {}

// runFake probes the fake hosts (one cluster "main") until the test ends.
func runFake(t *testing.T, cfg Config, hosts map[string]*fakeHost) (*zone.Table, *testkit.Buffer) {
	t.Helper()
	table, logs := zone.NewTable(), &testkit.Buffer{}
	startFakeLogging(t, cfg, table, hosts, logs)
	return table, logs
}

// runPair probes a primary p:1 and its replica r:1, both at lsn, in
// cluster "main" every 10ms (timeout 5s, max_fails 3) until the test
// ends. The timeout is far above the interval because it sets how long a
// host's last good probe vouches for it (Config.StaleAfter): at 100ms a
// healthy fake host whose goroutine waited that long for a CPU under load
// went down by age and came back, a change the tests did not make (the
// serial moved, a state change was logged twice). Their fake hosts fail
// at once (fail), never by the timeout.
func runPair(t *testing.T, lsn zone.LSN) (primary, replica *fakeHost, table *zone.Table, logs *testkit.Buffer) {
	t.Helper()
	return runPairWithin(t, lsn, 5*time.Second)
}

// runPairWithin is runPair with the probe timeout given, for a test whose
// host hangs.
func runPairWithin(t *testing.T, lsn zone.LSN, timeout time.Duration) (primary, replica *fakeHost, table *zone.Table, logs *testkit.Buffer) {
	t.Helper()
	primary = &fakeHost{ip: "10.0.0.1", lsn: lsn}
	replica = &fakeHost{ip: "10.0.0.2", inRecovery: true, lsn: lsn}
	cfg := Config{Interval: 10 * time.Millisecond, Timeout: timeout, MaxFails: 3,
		Clusters: []ClusterConfig{{Name: "main", Hosts: []string{"p:1", "r:1"}}}}
	table, logs = runFake(t, cfg, map[string]*fakeHost{"p:1": primary, "r:1": replica})
	return primary, replica, table, logs
}

// runProber runs p until the returned stop, which cancels it and waits
// for Run to return.
func runProber(p *Prober) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	return func() { cancel(); <-done }
}

// waitReady waits until every host of p has been probed (p.Ready),
// failing the test after within.
func waitReady(t testing.TB, p *Prober, within time.Duration) {
	t.Helper()
	select {
	case <-p.Ready():
	case <-time.After(within):
		t.Fatalf("not every host was probed within %v", within)
	}
}

// startFakeLogging runs a prober of the fake hosts (one cluster "main",
// addrs in order) on table, logging to logs, until the test ends.
func startFakeLogging(t *testing.T, cfg Config, table *zone.Table, hosts map[string]*fakeHost, logs *testkit.Buffer) *Prober {
	t.Helper()
	newChecker := func(addr string) (Checker, error) {
		h, ok := hosts[addr]
		if !ok {
			return nil, errors.New("no such fake host")
		}
		return fakeChecker{h}, nil
	}
	p := New(cfg, table, newChecker, slog.New(slog.NewTextHandler(logs, nil)), "main")
	t.Cleanup(runProber(p))
	return p
}

func waitSnapshot(t *testing.T, table *zone.Table, what string, ok func(*zone.Snapshot) bool) *zone.Snapshot {
	t.Helper()
	return testkit.Eventually(t, 20*time.Second, 5*time.Millisecond, "a snapshot "+what, func() (*zone.Snapshot, bool) {
		s := table.Load()
		return s, ok(s)
	})
}

// waitLogged waits until logs hold want: the prober logs a snapshot's
// changes just after it is in the table (publish), so a test that saw
// the snapshot may read the logs before its line is written.
func waitLogged(t *testing.T, logs *testkit.Buffer, want string) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, 5*time.Millisecond, "the log line "+want, func() (string, bool) {
		s := logs.String()
		return s, strings.Contains(s, want)
	})
}

func roles(s *zone.Snapshot) string {
	var b strings.Builder
	for _, h := range s.Clusters[0].Hosts {
		b.WriteString(h.Role.String()[:1])
	}
	return b.String()
}

func TestProberHungHostDelaysNobody(t *testing.T) {
	primary := &fakeHost{ip: "10.0.0.1", lsn: 100}
	replica := &fakeHost{ip: "10.0.0.2", inRecovery: true, lsn: 100}
	hung := &fakeHost{ip: "10.0.0.3", inRecovery: true, hang: true}
	cfg := Config{Interval: 20 * time.Millisecond, Timeout: time.Second, MaxFails: 2,
		Clusters: []ClusterConfig{{Name: "main", Hosts: []string{"p:1", "r:1", "h:1"}}}}
	table, logs := runFake(t, cfg, map[string]*fakeHost{"p:1": primary, "r:1": replica, "h:1": hung})

	// Not ready until the hung host's first probe has timed out, a second
	// after the start, though the others are in.
	waitSnapshot(t, table, "the others probed", func(s *zone.Snapshot) bool {
		return len(s.Clusters) == 1 && s.Clusters[0].Hosts[0].Seen && s.Clusters[0].Hosts[1].Seen
	})
	if table.Load().Ready {
		t.Fatal("ready before every host was probed once")
	}
	s := waitSnapshot(t, table, "the hung host down", func(s *zone.Snapshot) bool {
		return s.Ready && roles(s) == "prd"
	})
	// Meanwhile the others were probed every interval.
	now := time.Now()
	for _, h := range s.Clusters[0].Hosts[:2] {
		// Probes queued behind the hung one would be a timeout old.
		if age := now.Sub(h.ProbedAt); age > cfg.Timeout/2 {
			t.Errorf("%s probe age %v while a host hangs", h.Addr, age)
		}
	}
	if n := primary.probes.Load(); n < 10 {
		t.Errorf("primary probed %d times in %v", n, time.Since(now))
	}
	waitLogged(t, logs, "host=h:1 from=unknown to=down") // the hung host's state change
}

func TestProberLogsEachChangeOnce(t *testing.T) {
	primary, replica, table, logs := runPair(t, 100)
	waitSnapshot(t, table, "pr", func(s *zone.Snapshot) bool { return s.Ready && roles(s) == "pr" })
	time.Sleep(200 * time.Millisecond) // 20 probe rounds with nothing new

	replica.set(func(h *fakeHost) { h.fail = errors.New("connect: connection refused") })
	waitSnapshot(t, table, "replica down", func(s *zone.Snapshot) bool { return roles(s) == "pd" })
	time.Sleep(200 * time.Millisecond)

	// Failover: the primary goes away, then the replica is promoted. The
	// promotion waits until pgdns has seen the primary down (max_fails
	// refused probes): promoted before that, both are writable on one
	// timeline in pgdns's samples, a split brain pgdns rightly logs (under
	// load the primary's three failing probes took longer than the down
	// replica's back-off before its next probe).
	primary.set(func(h *fakeHost) { h.fail = errors.New("connect: connection refused") })
	waitSnapshot(t, table, "primary down", func(s *zone.Snapshot) bool { return roles(s) == "dd" })
	replica.set(func(h *fakeHost) { h.fail, h.inRecovery = nil, false })
	waitSnapshot(t, table, "promotion", func(s *zone.Snapshot) bool { return roles(s) == "dp" })
	// Its line is written just after the snapshot is in the table, and
	// every line before it was written before it.
	waitLogged(t, logs, "host=r:1 from=down to=primary")
	time.Sleep(100 * time.Millisecond) // more snapshots with nothing new

	out := logs.String()
	for _, want := range []string{
		"host=p:1 from=unknown to=primary", "host=r:1 from=unknown to=replica",
		`host=r:1 from=replica to=down error="connect: connection refused"`,
		"host=p:1 from=primary to=down", "host=r:1 from=down to=primary",
	} {
		if strings.Count(out, want) != 1 {
			t.Errorf("%q logged %d times:\n%s", want, strings.Count(out, want), out)
		}
	}
	if n := strings.Count(out, "host state changed"); n != 5 {
		t.Errorf("%d state changes logged, want 5:\n%s", n, out)
	}
}

func TestProberComputesLagFromThePrimarysClock(t *testing.T) {
	primary, replica, table, _ := runPair(t, 1000)
	waitSnapshot(t, table, "caught-up replica", func(s *zone.Snapshot) bool {
		return s.Ready && s.Clusters[0].Hosts[1].LagKnown && s.Clusters[0].Hosts[1].LagBytes == 0
	})
	primary.set(func(h *fakeHost) { h.lsn = 5000 })
	// A replica probed after the primary's last probe started has no
	// byte bound until the primary's next probe (build.go computeLag):
	// under load that snapshot can be the first past 100ms.
	s := waitSnapshot(t, table, "lag growing past 100ms, with a byte bound", func(s *zone.Snapshot) bool {
		r := s.Clusters[0].Hosts[1]
		return r.LagKnown && r.Lag > 100*time.Millisecond && r.BytesKnown
	})
	if r := s.Clusters[0].Hosts[1]; r.LagBytes != 4000 {
		t.Fatalf("byte lag %d, want 4000", r.LagBytes)
	}
	replica.set(func(h *fakeHost) { h.lsn = 5000 })
	waitSnapshot(t, table, "replica caught up again", func(s *zone.Snapshot) bool {
		r := s.Clusters[0].Hosts[1]
		return r.LagKnown && r.Lag == 0 && r.BytesKnown && r.LagBytes == 0
	})
}

// Refresh probes the live replicas and the primary at once and releases
// its caller once the fresh results are published (refresh_test.go: rounds
// shared, the gap between them).
func TestProberRefresh(t *testing.T) {
	primary := &fakeHost{ip: "10.0.0.1", lsn: 100}
	replica := &fakeHost{ip: "10.0.0.2", inRecovery: true, lsn: 100}
	// A long interval: without Refresh the replica's new position would
	// not be seen for a minute.
	cfg := Config{Interval: time.Minute, Timeout: time.Second, MaxFails: 3,
		Clusters: []ClusterConfig{{Name: "main", Hosts: []string{"p:1", "r:1"}}}}
	table := zone.NewTable()
	p := startFake(t, cfg, table, map[string]*fakeHost{"p:1": primary, "r:1": replica})
	waitSnapshot(t, table, "ready", func(s *zone.Snapshot) bool { return s.Ready && roles(s) == "pr" })

	replica.set(func(h *fakeHost) { h.lsn = 200 })
	primary.set(func(h *fakeHost) { h.lsn = 300 })
	before := replica.probes.Load()
	select {
	case <-p.Refresh("main"):
	case <-time.After(5 * time.Second):
		t.Fatal("the refresh never completed")
	}
	if got := table.Load().Clusters[0].Hosts[1].ReplayLSN; got != 200 {
		t.Fatalf("after the refresh the snapshot has replay %v, want 200", got)
	}
	// The primary's fresh position is in the same snapshot: lag is
	// measured against a primary sample as fresh as the replica's.
	if got := table.Load().Clusters[0].Hosts[0].InsertLSN; got != 300 {
		t.Fatalf("after the refresh the snapshot has the primary at %v, want 300", got)
	}
	if n := replica.probes.Load() - before; n < 1 {
		t.Fatalf("the replica was probed %d times for one refresh", n)
	}
	select {
	case <-p.Refresh("nope"):
	default:
		t.Fatal("a refresh of a cluster without replicas must complete at once")
	}
}

// A host that hangs goes stale, then down by max_fails: one change, logged
// once, not once per snapshot while its staleness grows.
func TestProberLogsAHungHostOnce(t *testing.T) {
	// A timeout of 1s, not 100ms: the staleness bound it sets must not
	// take the replica out before it hangs (runPair), while its three
	// timed-out probes still take seconds, not minutes.
	_, replica, table, logs := runPairWithin(t, 100, time.Second)
	waitSnapshot(t, table, "pr", func(s *zone.Snapshot) bool { return s.Ready && roles(s) == "pr" })
	replica.set(func(h *fakeHost) { h.hang = true })
	testkit.Eventually(t, 30*time.Second, 5*time.Millisecond, "a snapshot with the replica down by max_fails", func() (*zone.Snapshot, bool) {
		s := table.Load()
		h := s.Clusters[0].Hosts[1]
		return s, h.Role == zone.RoleDown && h.Fails >= 3
	})
	waitLogged(t, logs, "host=r:1 from=replica to=down")
	time.Sleep(200 * time.Millisecond) // more snapshots while it stays down
	if n := strings.Count(logs.String(), "host=r:1 from=replica to=down"); n != 1 {
		t.Errorf("the hung replica's fall logged %d times:\n%s", n, logs)
	}
	if n := strings.Count(logs.String(), "host=r:1 from=down to=down"); n != 0 {
		t.Errorf("down to down logged %d times:\n%s", n, logs)
	}
}
