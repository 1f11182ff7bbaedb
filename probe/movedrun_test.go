package probe

import (
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/zone"
)

// A replica that main's entry in the state file remembers by its server
// run (Remembered.Runs), listed after the restart in a cluster of its own
// under another address, is main's server: "old" takes a copy of main's
// knowledge before anything is answered for it, and the replica, on
// timeline 1 below main's newest 2, is set aside as superseded, as at a
// reload (moved). Without the run (an entry written before them) it is
// known by its address only, as before: "old" settles anew and answers it.
// What is reported keeps the runs of the hosts each cluster lists.
func TestProberKnowsAMovedRespeltReplicaByItsRememberedRun(t *testing.T) {
	run := time.Date(2026, 12, 1, 9, 0, 0, 123456000, time.UTC)
	for _, remembered := range []bool{true, false} {
		hosts := map[string]*fakeHost{"a:1": {ip: "10.0.0.1", inRecovery: true, lsn: 100, started: run.Add(-time.Hour)},
			"d:1": {ip: "10.0.1.3", inRecovery: true, lsn: 100, started: run}} // c:1 respelt
		main := Remembered{Identity: 42, NewestTimeline: 2, Members: []string{"a:1", "b:1", "c:1"}}
		if remembered {
			main.Runs = map[string]time.Time{"a:1": run.Add(-time.Hour), "c:1": run}
		}
		learned := &learnedLog{}
		cfg := Config{Interval: 10 * time.Millisecond, Timeout: time.Second, MaxFails: 2,
			Clusters:   []ClusterConfig{{Name: "main", Hosts: []string{"a:1", "b:1"}}, {Name: "old", Hosts: []string{"d:1"}}},
			Remembered: map[string]Remembered{"main": main},
			Hooks:      Hooks{Learned: learned.hook}}
		hosts["b:1"] = &fakeHost{ip: "10.0.0.2", fail: ErrNotServing}
		table, _ := runFake(t, cfg, hosts)
		s := waitSnapshot(t, table, "old with an identity", func(s *zone.Snapshot) bool { return len(s.Clusters) == 2 && s.Clusters[1].Identity != 0 })
		c := s.Clusters[1]
		if remembered && (c.NewestTimeline != 2 || c.Hosts[0].Aside != zone.AsideSuperseded) {
			t.Errorf("old, its replica remembered by its run: newest timeline %d, replica %v %q; want 2, set aside as superseded",
				c.NewestTimeline, c.Hosts[0].Aside, c.Hosts[0].Note)
		}
		if !remembered && (c.NewestTimeline != 1 || c.Hosts[0].Aside != zone.NotAside) {
			t.Errorf("old, no run remembered: newest timeline %d, replica %v %q; want 1, answered (known by its address only)",
				c.NewestTimeline, c.Hosts[0].Aside, c.Hosts[0].Note)
		}
		if !remembered {
			continue
		}
		got := testkit.Eventually(t, 5*time.Second, 5*time.Millisecond, "a report of both runs", func() (map[string]Remembered, bool) {
			m, _ := learned.last()
			return m, m["main"].Runs != nil && m["old"].Runs != nil
		})
		if r := got["main"].Runs; len(r) != 1 || !r["a:1"].Equal(run.Add(-time.Hour)) {
			t.Errorf("main's runs reported: %v, want a:1's alone (c:1 is no longer listed)", r)
		}
		if r := got["old"].Runs; len(r) != 1 || !r["d:1"].Equal(run) {
			t.Errorf("old's runs reported: %v, want d:1's", r)
		}
	}
}
