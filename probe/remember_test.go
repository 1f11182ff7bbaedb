package probe

import (
	"sync"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/zone"
)

// learnedLog keeps every report of Hooks.Learned.
type learnedLog struct {
	mu    sync.Mutex
	calls []map[string]Remembered
}

func (l *learnedLog) hook(m map[string]Remembered) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, m)
}

func (l *learnedLog) last() (map[string]Remembered, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.calls) == 0 {
		return nil, 0
	}
	return l.calls[len(l.calls)-1], len(l.calls)
}

// A prober seeded with what a previous run learned starts from it: a
// writable host on a timeline older than the remembered newest one is
// never the primary, from the first snapshot on. It reports what it
// remembers once, not on every probe.
func TestProberStartsFromWhatItRemembers(t *testing.T) {
	old := &fakeHost{ip: "10.0.0.1", lsn: 100}                        // writable, timeline 1, system 42
	follower := &fakeHost{ip: "10.0.0.2", inRecovery: true, lsn: 100} // streams from it
	hosts := map[string]*fakeHost{"a:1": old, "b:1": follower, "c:1": {ip: "10.0.0.3", fail: ErrNotServing}}
	history := TimelineHistory{Ends: []zone.TimelineEnd{{Timeline: 1, End: 0x3000060}}, FromFile: true}
	learned := &learnedLog{}
	cfg := Config{Interval: 10 * time.Millisecond, Timeout: time.Second, MaxFails: 2,
		Clusters: []ClusterConfig{{Name: "main", Hosts: []string{"a:1", "b:1", "c:1"}}},
		Remembered: map[string]Remembered{
			"main": {Identity: 42, NewestTimeline: 2, Timelines: map[uint32]TimelineHistory{2: history}},
			"gone": {Identity: 7, NewestTimeline: 5}, // no longer configured
		},
		Hooks: Hooks{Learned: learned.hook}}
	table, _ := runFake(t, cfg, hosts)

	s := waitSnapshot(t, table, "ready", func(s *zone.Snapshot) bool { return s.Ready })
	c := s.Clusters[0]
	if c.Primary >= 0 || c.NewestTimeline != 2 || c.Identity != 42 {
		t.Fatalf("seeded with timeline 2: primary %d, newest timeline %d, identity %d; want no primary, 2, 42", c.Primary, c.NewestTimeline, c.Identity)
	}
	if h := c.Hosts[0]; h.Aside != zone.AsideSuperseded {
		t.Errorf("the writable host on timeline 1: %v %q, want set aside as superseded", h.Role, h.Note)
	}
	got := testkit.Eventually(t, 5*time.Second, 5*time.Millisecond, "a report", func() (map[string]Remembered, bool) {
		m, _ := learned.last()
		return m, m != nil
	})
	main, ok := got["main"]
	if !ok || main.Identity != 42 || main.NewestTimeline != 2 || len(main.Timelines) != 1 || !main.Timelines[2].FromFile ||
		len(main.Timelines[2].Ends) != 1 || main.Timelines[2].Ends[0] != history.Ends[0] {
		t.Errorf("reported %+v, want what was seeded for main", got)
	}
	// The cluster no longer configured stays remembered, for a reload or
	// restart that lists it again (review 14b, finding 1).
	if gone, ok := got["gone"]; !ok || gone.Identity != 7 || gone.NewestTimeline != 5 {
		t.Errorf("reported %+v, want the cluster no longer configured kept, of identity 7 on timeline 5", got)
	}
	_, n := learned.last()
	// Fifty probe intervals teach nothing new: no new report.
	if _, ok := testkit.Holds(500*time.Millisecond, 10*time.Millisecond, func() bool {
		_, now := learned.last()
		return now == n
	}); !ok {
		_, now := learned.last()
		t.Errorf("%d reports after %d while nothing new was learned", now, n)
	}
}

// A remembered entry whose identity differs from the pinned one belongs
// to another cluster and is not applied.
func TestProberIgnoresRememberedForeignIdentity(t *testing.T) {
	hosts := map[string]*fakeHost{"a:1": {ip: "10.0.0.1", lsn: 100}, "b:1": {ip: "10.0.0.2", inRecovery: true, lsn: 100}}
	learned := &learnedLog{}
	cfg := Config{Interval: 10 * time.Millisecond, Timeout: time.Second, MaxFails: 2,
		Clusters:   []ClusterConfig{{Name: "main", Hosts: []string{"a:1", "b:1"}, SystemID: 42}},
		Remembered: map[string]Remembered{"main": {Identity: 99, NewestTimeline: 9}},
		Hooks:      Hooks{Learned: learned.hook}}
	table, _ := runFake(t, cfg, hosts)
	s := waitSnapshot(t, table, "with a primary", func(s *zone.Snapshot) bool { return s.Ready && s.Clusters[0].Primary == 0 })
	if c := s.Clusters[0]; c.NewestTimeline != 1 {
		t.Errorf("newest timeline %d: the foreign entry's timeline 9 was applied", c.NewestTimeline)
	}
	testkit.Eventually(t, 5*time.Second, 5*time.Millisecond, "a report of the pinned identity", func() (bool, bool) {
		m, _ := learned.last()
		ok := m["main"].Identity == 42 && m["main"].NewestTimeline == 1
		return ok, ok
	})
}

// A replica proven to be on another branch of the primary's timeline
// stays set aside after a restart of pgdns while the same server run
// answers: the proof is remembered with the run it holds for. A fork of
// an earlier run at the same address holds too: a restart of the
// replica's server keeps its data, the other branch's (review 6, G7b).
func TestProberRestoresRememberedForks(t *testing.T) {
	hosts := map[string]*fakeHost{"p:1": {ip: "10.0.0.1", lsn: 100}, "r:1": {ip: "10.0.0.2", inRecovery: true, lsn: 100},
		"s:1": {ip: "10.0.0.3", inRecovery: true, lsn: 100}, "q:1": {ip: "10.0.0.4", inRecovery: true, lsn: 100}}
	forked := Fork{From: "p:1", Note: "another branch of timeline 1: replayed to 0/200, past 0/100 where p:1 was read after it"}
	restarted := Fork{Run: time.Unix(1, 0), From: "p:1", Note: "another branch of timeline 1: of s:1's run before"}
	learned := &learnedLog{}
	cfg := Config{Interval: 10 * time.Millisecond, Timeout: time.Second, MaxFails: 2,
		Clusters: []ClusterConfig{{Name: "main", Hosts: []string{"p:1", "r:1", "s:1", "q:1"}}},
		Remembered: map[string]Remembered{"main": {Identity: 42, NewestTimeline: 1, Forks: map[string]Fork{
			"r:1": forked,    // the fakes' run: started at the zero time
			"s:1": restarted, // a run that ended: the server restarted since
		}}},
		Hooks: Hooks{Learned: learned.hook}}
	table, _ := runFake(t, cfg, hosts)
	s := waitSnapshot(t, table, "ready", func(s *zone.Snapshot) bool { return s.Ready && s.Clusters[0].Primary == 0 })
	if h := s.Clusters[0].Hosts[1]; h.Aside != zone.AsideForked || h.Note != forked.Note {
		t.Errorf("the remembered fork of the same run: %v %v %q, want set aside as forked", h.Role, h.Aside, h.Note)
	}
	if h := s.Clusters[0].Hosts[2]; h.Aside != zone.AsideForked || h.Note != restarted.Note {
		t.Errorf("the remembered fork of the replica's run before its restart: %v %v %q, want set aside as forked", h.Role, h.Aside, h.Note)
	}
	if h := s.Clusters[0].Hosts[3]; h.Role != zone.RoleReplica {
		t.Errorf("a replica with no fork remembered: %v %v %q, want a replica", h.Role, h.Aside, h.Note)
	}
	testkit.Eventually(t, 5*time.Second, 5*time.Millisecond, "a report of both forks, of the runs seen now", func() (map[string]Fork, bool) {
		m, _ := learned.last()
		f := m["main"].Forks
		return f, len(f) == 2 && f["r:1"].From == "p:1" && f["r:1"].Note == forked.Note && f["r:1"].Run.IsZero() &&
			f["s:1"].Note == restarted.Note && f["s:1"].Run.IsZero()
	})
}

// A remembered fork holds for the replica's server run and against the
// writable server's run under any address: a replica and a primary both
// listed under other addresses by the config a restarted pgdns reads stay
// aside (review 6, G7); a fork of a replica not listed now is kept for a
// later config that lists it.
func TestProberRestoresARememberedForkUnderAnotherAddress(t *testing.T) {
	pRun, rRun := time.Date(2026, 12, 1, 9, 0, 0, 1000, time.UTC), time.Date(2026, 12, 1, 9, 5, 0, 2000, time.UTC)
	hosts := map[string]*fakeHost{"p2:1": {ip: "10.0.0.1", lsn: 100, started: pRun},
		"r2:1": {ip: "10.0.0.2", inRecovery: true, lsn: 100, started: rRun}}
	forked := Fork{Run: rRun, From: "p:1", FromRun: pRun, Note: "another branch of timeline 1: replayed to 0/200, past 0/100 where p:1 was read after it"}
	unlisted := Fork{Run: rRun.Add(time.Minute), From: "p:1", FromRun: pRun, Note: "another branch of timeline 1: of u:1"}
	learned := &learnedLog{}
	cfg := Config{Interval: 10 * time.Millisecond, Timeout: time.Second, MaxFails: 2,
		Clusters:   []ClusterConfig{{Name: "main", Hosts: []string{"p2:1", "r2:1"}}},
		Remembered: map[string]Remembered{"main": {Identity: 42, NewestTimeline: 1, Forks: map[string]Fork{"r:1": forked, "u:1": unlisted}}},
		Hooks:      Hooks{Learned: learned.hook}}
	table, _ := runFake(t, cfg, hosts)
	s := waitSnapshot(t, table, "ready", func(s *zone.Snapshot) bool { return s.Ready && s.Clusters[0].Primary == 0 })
	if h := s.Clusters[0].Hosts[1]; h.Aside != zone.AsideForked || h.Note != forked.Note {
		t.Errorf("the remembered fork of r:1's run, now listed as r2:1, against p:1's run, now p2:1: %v %v %q, want set aside as forked", h.Role, h.Aside, h.Note)
	}
	testkit.Eventually(t, 5*time.Second, 5*time.Millisecond, "a report of both forks, the applied one under its new address", func() (map[string]Fork, bool) {
		m, _ := learned.last()
		f := m["main"].Forks
		return f, len(f) == 2 && f["r2:1"].Run.Equal(rRun) && f["r2:1"].Note == forked.Note && f["u:1"].Run.Equal(unlisted.Run)
	})
}

// What is remembered belongs to the identity, not to the name: a cluster
// renamed since (main → prod) inherits it once its hosts establish the
// same identity, before its first snapshot answers anything, and the old
// name leaves the report. Until some cluster could claim it, it stays.
func TestProberInheritsWhatARenamedClusterRemembers(t *testing.T) {
	old := &fakeHost{ip: "10.0.0.1", lsn: 100}
	hosts := map[string]*fakeHost{"a:1": old, "b:1": {ip: "10.0.0.2", inRecovery: true, lsn: 100},
		"c:1": {ip: "10.0.0.3", fail: ErrNotServing}}
	learned := &learnedLog{}
	cfg := Config{Interval: 10 * time.Millisecond, Timeout: time.Second, MaxFails: 2,
		Clusters:   []ClusterConfig{{Name: "prod", Hosts: []string{"a:1", "b:1", "c:1"}}},
		Remembered: map[string]Remembered{"main": {Identity: 42, NewestTimeline: 2}, "other": {Identity: 7, NewestTimeline: 5}},
		Hooks:      Hooks{Learned: learned.hook}}
	table, _ := runFake(t, cfg, hosts)
	s := waitSnapshot(t, table, "an identity", func(s *zone.Snapshot) bool { return len(s.Clusters) > 0 && s.Clusters[0].Identity != 0 })
	if c := s.Clusters[0]; c.Primary >= 0 || c.NewestTimeline != 2 || c.Identity != 42 {
		t.Fatalf("the first snapshot with an identity: primary %d, newest timeline %d, identity %d; want none, 2, 42",
			c.Primary, c.NewestTimeline, c.Identity)
	}
	got := testkit.Eventually(t, 5*time.Second, 5*time.Millisecond, "a report", func() (map[string]Remembered, bool) {
		m, _ := learned.last()
		return m, m != nil
	})
	if len(got) != 2 || got["prod"].Identity != 42 || got["prod"].NewestTimeline != 2 || got["other"].NewestTimeline != 5 {
		t.Errorf("reported %+v, want prod, of identity 42 on timeline 2, and other, unclaimed, kept", got)
	}

	// No host answers: nothing is claimed, nothing is dropped.
	down := map[string]*fakeHost{"a:1": {ip: "10.0.0.1", fail: ErrNotServing}}
	learned = &learnedLog{}
	cfg.Clusters = []ClusterConfig{{Name: "prod", Hosts: []string{"a:1"}}}
	cfg.Hooks = Hooks{Learned: learned.hook}
	table, _ = runFake(t, cfg, down)
	waitSnapshot(t, table, "ready", func(s *zone.Snapshot) bool { return s.Ready })
	got = testkit.Eventually(t, 5*time.Second, 5*time.Millisecond, "a report", func() (map[string]Remembered, bool) {
		m, _ := learned.last()
		return m, m != nil
	})
	if len(got) != 2 || got["main"].NewestTimeline != 2 || got["other"].NewestTimeline != 5 {
		t.Errorf("reported %+v, want both unclaimed entries kept", got)
	}
}

// Review 6, G9: a cluster that has knowledge of its own, under its own
// name, does not inherit what another cluster of the same identity (a
// promoted copy of it, in a cluster of its own) knew: its newest timeline
// stays its own, and the copy's entry is kept aside, for the copy's
// cluster should a reload list it again (review 14b, finding 1).
func TestProberKeepsItsOwnKnowledgeBesideACopysOrphan(t *testing.T) {
	hosts := map[string]*fakeHost{"a:1": {ip: "10.0.0.1", lsn: 100}, "b:1": {ip: "10.0.0.2", inRecovery: true, lsn: 100}}
	learned := &learnedLog{}
	cfg := Config{Interval: 10 * time.Millisecond, Timeout: time.Second, MaxFails: 2,
		Clusters:   []ClusterConfig{{Name: "main", Hosts: []string{"a:1", "b:1"}}},
		Remembered: map[string]Remembered{"main": {Identity: 42, NewestTimeline: 1}, "staging": {Identity: 42, NewestTimeline: 2}},
		Hooks:      Hooks{Learned: learned.hook}}
	table, _ := runFake(t, cfg, hosts)
	s := waitSnapshot(t, table, "ready", func(s *zone.Snapshot) bool { return s.Ready })
	if c := s.Clusters[0]; c.Primary != 0 || c.NewestTimeline != 1 {
		t.Errorf("main: primary %d, newest timeline %d; want a:1 on its own timeline 1", c.Primary, c.NewestTimeline)
	}
	got := testkit.Eventually(t, 5*time.Second, 5*time.Millisecond, "a report", func() (map[string]Remembered, bool) {
		m, _ := learned.last()
		return m, m != nil
	})
	if len(got) != 2 || got["main"].NewestTimeline != 1 || got["staging"].NewestTimeline != 2 {
		t.Errorf("reported %+v, want main on timeline 1 and staging's entry kept on timeline 2", got)
	}
}
