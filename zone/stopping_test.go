package zone

import (
	"strings"
	"testing"
)

// A writable host shutting down while other sessions on it remain
// (Stopping) is in no answer, primary nor any, and no replica has it
// for a primary; it is no second writer either: a promoted replica on a
// newer timeline is the primary, and one on the same timeline is no
// split brain with it.
func TestStoppingWriterIsSetAside(t *testing.T) {
	p := seen("10.0.0.1", false, 0x3000060)
	p.Stopping = true
	r := seen("10.0.0.2", true, 0x3000060)
	s := cluster(p, r)
	c := s.Clusters[0]
	if h := c.Hosts[0]; h.Aside != AsideStopping || h.Role != RoleUnknown || h.Note != stoppingNote || c.Primary != -1 {
		t.Errorf("stopping writer: %v, aside %v (%s), cluster primary %d", h.Role, h.Aside, h.Note, c.Primary)
	}
	for _, name := range []string{"primary.db.local.", "any.db.local.", "prefer-replica.db.local."} {
		if got := selectIPs(t, s, name, t0, 0); len(got) > 1 || len(got) == 1 && got[0] == "10.0.0.1" {
			t.Errorf("%s answered %v", name, got)
		}
	}
	promoted := seen("10.0.0.2", false, 0x3000100)
	if c := cluster(p, promoted).Clusters[0]; c.SplitBrain || c.Primary != 1 {
		t.Errorf("a writer beside the stopping one: split brain %v, primary %d", c.SplitBrain, c.Primary)
	}
}

// A replica proven on another branch than the stopping writer's (its
// position, or its history file) stays aside while that writer stops, as
// it does once the writer is down: no primary is answered, and the writer
// it was judged against is still the last one seen writable. Its own
// replicas are answered; before, every replica was.
func TestForkedReplicaOfAStoppingWriter(t *testing.T) {
	p := seen("10.0.0.1", false, 0x9000)
	p.Timeline, p.OwnHistory, p.Stopping = 2, []TimelineEnd{{Timeline: 1, End: 0x4000}}, true
	own, ahead, other := seen("10.0.0.2", true, 0x8000), seen("10.0.0.3", true, 0x9800), seen("10.0.0.4", true, 0x8000)
	for _, h := range []*Host{&own, &ahead, &other} {
		h.Timeline = 2
	}
	own.OwnHistory = []TimelineEnd{{Timeline: 1, End: 0x4000}}
	ahead.DivergedFrom, ahead.DivergedNote = p.Addr, "another branch of timeline 2: replayed to 0/9800, past 0/9000 where 10.0.0.1:5432 was read after it"
	other.OwnHistory = []TimelineEnd{{Timeline: 1, End: 0x5000}}
	s := cluster(p, own, ahead, other)
	c := s.Clusters[0]
	if c.Primary != -1 || c.Hosts[0].Aside != AsideStopping {
		t.Fatalf("primary %d, writer aside %v", c.Primary, c.Hosts[0].Aside)
	}
	want := []Aside{AsideStopping, NotAside, AsideForked, AsideForked}
	for i, w := range want {
		if h := &c.Hosts[i]; h.Aside != w {
			t.Errorf("%s: aside %v (note %q), want %v", h.Addr, h.Aside, h.Note, w)
		}
	}
	for _, i := range []int{2, 3} {
		if n := c.Hosts[i].Note; !strings.HasSuffix(n, "(that server is shutting down: no primary is answered)") {
			t.Errorf("%s: note %q", c.Hosts[i].Addr, n)
		}
	}
	for _, name := range []string{"replica.db.local.", "prefer-replica.db.local.", "any.db.local.", "lsn-0-8000.replica.db.local."} {
		if got := selectIPs(t, s, name, t0, 0); len(got) != 1 || got[0] != "10.0.0.2" {
			t.Errorf("%s answered %v, want only 10.0.0.2", name, got)
		}
	}
}
