package probe

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/pgdns/pgdns/zone"
)

// The probe stamps serials as it publishes: they stay put while only lag
// moves and grow when a role answer changes.
func TestProberSerials(t *testing.T) {
	primary, replica, table, _ := runPair(t, 100)
	s0 := waitSnapshot(t, table, "pr", func(s *zone.Snapshot) bool { return s.Ready && roles(s) == "pr" }).Clusters[0].Serial

	primary.set(func(h *fakeHost) { h.lsn = 5000 })
	s := waitSnapshot(t, table, "the replica lagging", func(s *zone.Snapshot) bool {
		return s.Clusters[0].Hosts[0].InsertLSN == 5000 && s.Clusters[0].Hosts[1].ReplayLSN == 100
	})
	if s.Clusters[0].Serial != s0 {
		t.Fatalf("lag moved and the serial went from %d to %d", s0, s.Clusters[0].Serial)
	}

	replica.set(func(h *fakeHost) { h.fail = errors.New("connect: connection refused") })
	s = waitSnapshot(t, table, "replica down", func(s *zone.Snapshot) bool { return roles(s) == "pd" })
	if s1 := s.Clusters[0].Serial; !zone.SerialLess(s0, s1) || s.Serial() != s1 {
		t.Fatalf("a replica went down and the serial went from %d to %d (apex %d)", s0, s1, s.Serial())
	}
}

// A prober that starts while another's snapshot is served (a reload, a
// Patroni membership change) carries its serials on: never back, even
// when they ran ahead of the clock.
func TestProberCarriesSerialsOn(t *testing.T) {
	ahead := uint32(time.Now().Unix()) + 1000
	table := zone.NewTable()
	table.Store(&zone.Snapshot{Ready: true, Default: "main", Clusters: []*zone.Cluster{{Name: "main", Primary: -1, Serial: ahead}}})
	hosts := map[string]*fakeHost{"p:1": {ip: "10.0.0.1", lsn: 100}}
	cfg := Config{Interval: 10 * time.Millisecond, Timeout: 100 * time.Millisecond, MaxFails: 3,
		Clusters: []ClusterConfig{{Name: "main", Hosts: []string{"p:1"}}}}
	p := New(cfg, table, func(addr string) (Checker, error) { return fakeChecker{hosts[addr]}, nil },
		slog.New(slog.NewTextHandler(io.Discard, nil)), "main")
	t.Cleanup(runProber(p))

	s := waitSnapshot(t, table, "the new prober's first ready snapshot", func(s *zone.Snapshot) bool {
		return s.Ready && len(s.Clusters[0].Hosts) == 1
	})
	if got := s.Clusters[0].Serial; got != ahead+1 {
		t.Fatalf("serial %d after the served %d, want %d", got, ahead, ahead+1)
	}
}
