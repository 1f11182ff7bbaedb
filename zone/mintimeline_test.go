package zone

import "testing"

// A host below MinTimeline is set aside as superseded, writable or not,
// and two writable hosts below it are no split brain; the floor is not
// learned: without it the same hosts are answered again at once.
func TestDecideMinTimeline(t *testing.T) {
	hosts := []Host{seen("10.0.0.1", false, 0), seen("10.0.0.2", true, 0), seen("10.0.0.3", false, 0)}
	c := &Cluster{Name: "main", Hosts: hosts, MinTimeline: 2}
	c.Decide(t0, stale, 3)
	if c.Primary != -1 || c.SplitBrain || c.NewestTimeline != 1 {
		t.Fatalf("min_timeline 2, hosts on 1: primary %d, split brain %v, newest %d; want none, false, 1", c.Primary, c.SplitBrain, c.NewestTimeline)
	}
	for _, h := range c.Hosts {
		if h.Aside != AsideSuperseded || h.Note != h.timelineKind()+" on timeline 1, below the configured min_timeline 2" {
			t.Errorf("%s: %v %q", h.Addr, h.Aside, h.Note)
		}
	}
	c.Hosts = c.Hosts[:2]
	c.MinTimeline = 0
	c.Decide(t0, stale, 3)
	if c.Primary != 0 || c.Hosts[1].Role != RoleReplica {
		t.Errorf("without the floor: primary %d, replica %v", c.Primary, c.Hosts[1].Role)
	}
	c.MinTimeline = 1
	c.Decide(t0, stale, 3)
	if c.Primary != 0 {
		t.Errorf("a floor at the hosts' own timeline set the primary aside: primary %d", c.Primary)
	}
}
