package probe

import (
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/zone"
)

// A prober seeded with a timeline a replica's lower bound showed
// (Remembered.Witnessed: the state file of a pgdns that saw it, review 6,
// G1d), that replica down now, sets the writable host below it aside from
// the first snapshot on, and reports it as remembered, witness and run
// included, for the next write of the file.
func TestProberStartsFromAWitnessedTimeline(t *testing.T) {
	old := &fakeHost{ip: "10.0.0.1", lsn: 100} // writable, timeline 1
	hosts := map[string]*fakeHost{"a:1": old, "b:1": {ip: "10.0.0.2", inRecovery: true, lsn: 100},
		"c:1": {ip: "10.0.0.3", fail: ErrNotServing}} // the witness, down
	run := time.Date(2026, 12, 1, 9, 15, 0, 0, time.UTC)
	learned := &learnedLog{}
	cfg := Config{Interval: 10 * time.Millisecond, Timeout: time.Second, MaxFails: 2,
		Clusters:   []ClusterConfig{{Name: "main", Hosts: []string{"a:1", "b:1", "c:1"}}},
		Remembered: map[string]Remembered{"main": {Identity: 42, NewestTimeline: 1, Witnessed: 2, WitnessedBy: "c:1", WitnessedRun: run}},
		Hooks:      Hooks{Learned: learned.hook}}
	table, _ := runFake(t, cfg, hosts)

	s := waitSnapshot(t, table, "ready", func(s *zone.Snapshot) bool { return s.Ready })
	c := s.Clusters[0]
	if c.Primary >= 0 || c.Witnessed != 2 || c.Hosts[0].Aside != zone.AsideSuperseded {
		t.Fatalf("seeded with timeline 2 witnessed: primary %d, witnessed %d, the writable host %v %q", c.Primary, c.Witnessed, c.Hosts[0].Aside, c.Hosts[0].Note)
	}
	got := testkit.Eventually(t, 5*time.Second, 5*time.Millisecond, "a report", func() (Remembered, bool) {
		m, _ := learned.last()
		return m["main"], m != nil
	})
	if got.Witnessed != 2 || got.WitnessedBy != "c:1" || !got.WitnessedRun.Equal(run) || got.NewestTimeline != 1 {
		t.Errorf("reported %+v, want timeline 2 witnessed by c:1 (run %v)", got, run)
	}
}
