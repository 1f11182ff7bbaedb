package zone

import (
	"fmt"
	"testing"
	"time"
)

// TestDecideDuplicates: one server run listed under several addresses is
// answered once, under the first live one; a down first listing leaves the
// next live one answered; other runs and hosts without a start time are
// never duplicates.
func TestDecideDuplicates(t *testing.T) {
	run1, run2 := t0.Add(-time.Hour), t0.Add(-time.Hour+time.Microsecond)
	host := func(ip string, started time.Time) Host {
		h := seen(ip, true, 0x5000)
		h.StartedAt = started
		return h
	}
	down := host("10.0.0.1", run1)
	down.Fails = 3
	hosts := []Host{
		seen("10.0.0.9", false, 0x5000), // the primary, no start time
		down,                            // run1, down: not the one others duplicate
		host("10.0.0.2", run1),          // run1: answered
		host("10.0.0.3", run2),          // run2: answered
		host("10.0.0.4", run1),          // run1 again: set aside as 10.0.0.2
		host("10.0.0.5", time.Time{}),   // no start time: never a duplicate
		host("10.0.0.6", time.Time{}),
		host("10.0.0.7", run2), // run2 again: set aside as 10.0.0.3
	}
	c := cluster(hosts...).Clusters[0]
	want := []struct {
		role  Role
		aside Aside
		of    string
	}{
		{RolePrimary, NotAside, ""}, {RoleDown, NotAside, ""}, {RoleReplica, NotAside, ""}, {RoleReplica, NotAside, ""},
		{RoleUnknown, AsideDuplicate, "10.0.0.2:5432"}, {RoleReplica, NotAside, ""}, {RoleReplica, NotAside, ""},
		{RoleUnknown, AsideDuplicate, "10.0.0.3:5432"},
	}
	for i, w := range want {
		h := &c.Hosts[i]
		if h.Role != w.role || h.Aside != w.aside {
			t.Errorf("%s: role %v aside %v, want %v %v (note %q)", h.Addr, h.Role, h.Aside, w.role, w.aside, h.Note)
		}
		if w.of != "" && h.Note != "the same server as "+w.of+" (same system identifier and start time): answered once, under that address" {
			t.Errorf("%s: note %q, want the same server as %s", h.Addr, h.Note, w.of)
		}
	}
}

// BenchmarkDecide: roles of a cluster whose servers all have start times
// (every probed host does), as the probe decides them on each publish.
func BenchmarkDecide(b *testing.B) {
	for _, n := range []int{3, 1000} {
		hosts := []Host{seen("10.0.0.1", false, 0x5000)}
		for i := 1; i < n; i++ {
			hosts = append(hosts, seen(fmt.Sprintf("10.0.%d.%d", (i+1)/250, (i+1)%250+1), true, 0x5000))
		}
		for i := range hosts {
			hosts[i].StartedAt = t0.Add(-time.Hour + time.Duration(i)*time.Microsecond)
		}
		c := &Cluster{Name: "main", Hosts: hosts}
		b.Run(fmt.Sprintf("hosts=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.Decide(t0, stale, 3)
			}
		})
	}
}

// TestIdentityVotesByServer: a stray server listed under two addresses is
// one vote, not two: against one live host of the cluster it is a tie and
// establishes nothing; against two it loses.
func TestIdentityVotesByServer(t *testing.T) {
	stray, alias := seen("10.0.0.9", false, 0), seen("10.0.0.8", false, 0)
	stray.SystemID, alias.SystemID = 99, 99
	stray.StartedAt, alias.StartedAt = t0.Add(-time.Hour), t0.Add(-time.Hour)
	primary := seen("10.0.0.1", false, 0)
	primary.StartedAt = t0.Add(-2 * time.Hour)
	c := &Cluster{Name: "main", Hosts: []Host{stray, alias, primary}}
	c.Decide(t0, stale, 3)
	if c.Identity != 0 || c.Primary != -1 {
		t.Fatalf("one stray server under two addresses against one host: identity %d primary %d", c.Identity, c.Primary)
	}
	replica := seen("10.0.0.2", true, 0)
	replica.StartedAt = t0.Add(-3 * time.Hour)
	c = &Cluster{Name: "main", Hosts: []Host{stray, alias, primary, replica}}
	c.Decide(t0, stale, 3)
	if c.Identity != 7 || c.Primary != 2 {
		t.Fatalf("one stray server under two addresses against two hosts: identity %d primary %d", c.Identity, c.Primary)
	}
}

// TestNewestTimelineNeedsProof: a replica without a WAL receiver, whose
// timeline is only a lower bound, does not raise the newest timeline (it
// stays set aside, abandoned), but a writable host below that bound is no
// primary (review 6, G1: it proves a promotion superseded it); a
// streaming replica raises the newest timeline.
func TestNewestTimelineNeedsProof(t *testing.T) {
	primary, bound := seen("10.0.0.1", false, 0x9000), seen("10.0.0.2", true, 0x8000)
	bound.Timeline, bound.TimelineExact = 3, false
	c := &Cluster{Name: "main", Hosts: []Host{primary, bound}}
	c.Decide(t0, stale, 3)
	if c.NewestTimeline != 1 || c.Primary != -1 || c.Hosts[1].Aside != AsideAbandoned || c.Hosts[0].Aside != AsideSuperseded {
		t.Fatalf("a lower bound: newest %d primary %d aside %v %v", c.NewestTimeline, c.Primary, c.Hosts[0].Aside, c.Hosts[1].Aside)
	}
	if n := c.Hosts[0].Note; n != "writable on timeline 1, superseded by timeline 3: 10.0.0.2:5432 (in recovery) has replayed timeline 3 "+
		"(its last restartpoint or minimum recovery point was on it), which only a promotion creates" {
		t.Errorf("note %q", n)
	}
	c.Hosts[1].Seen, c.Hosts[1].Fails = false, 3 // the witness down (review 6, G1c): the promotion it showed stays
	c.Decide(t0, stale, 3)
	if c.NewestTimeline != 1 || c.Witnessed != 3 || c.Primary != -1 || c.Hosts[0].Aside != AsideSuperseded {
		t.Fatalf("the witness down: newest %d witnessed %d primary %d", c.NewestTimeline, c.Witnessed, c.Primary)
	}
	c.Witnessed = 0 // forgotten by an operator (probe's forget)
	c.Decide(t0, stale, 3)
	if c.Primary != 0 {
		t.Fatalf("the witnessed timeline forgotten, its witness down: primary %d", c.Primary)
	}
	c.Hosts[1].Seen, c.Hosts[1].Fails = true, 0
	c.Hosts[1].TimelineExact = true
	c.Decide(t0, stale, 3)
	if c.NewestTimeline != 3 || c.Primary != -1 {
		t.Fatalf("a streaming replica: newest %d primary %d", c.NewestTimeline, c.Primary)
	}
}

// TestLeaderKeyDecides: with Patroni, only the member holding the leader
// key is the primary, on whatever timeline; a writable host without it is
// set aside; the leader under another spelling of its address is found by
// its server run; no leader, no primary.
func TestLeaderKeyDecides(t *testing.T) {
	leader, rogue, follower := seen("10.0.0.1", false, 0x9000), seen("10.0.0.2", false, 0xa000), seen("10.0.0.3", true, 0x9000)
	rogue.Timeline = 2
	leader.StartedAt = t0.Add(-time.Hour)
	c := &Cluster{Name: "main", LeaderKey: true, Leader: "10.0.0.1:5432", NewestTimeline: 2, Hosts: []Host{leader, rogue, follower}}
	c.Decide(t0, stale, 3)
	if c.Primary != 0 || c.NewestTimeline != 1 || c.Hosts[1].Aside != AsideNotLeader || c.Hosts[2].Role != RoleReplica {
		t.Fatalf("leader key: primary %d newest %d rogue %v follower %v", c.Primary, c.NewestTimeline, c.Hosts[1].Aside, c.Hosts[2].Role)
	}
	alias := leader
	alias.Addr = "db1:5432"
	c = &Cluster{Name: "main", LeaderKey: true, Leader: "10.0.0.1:5432", Hosts: []Host{alias, follower, leader}}
	c.Decide(t0, stale, 3)
	if c.Primary != 0 {
		t.Fatalf("the leader listed first under a name: primary %d (%v %q)", c.Primary, c.Hosts[0].Aside, c.Hosts[0].Note)
	}
	c = &Cluster{Name: "main", LeaderKey: true, Hosts: []Host{leader, follower}}
	c.Decide(t0, stale, 3)
	if c.Primary != -1 || c.Hosts[0].Aside != AsideNotLeader {
		t.Fatalf("no leader key: primary %d aside %v", c.Primary, c.Hosts[0].Aside)
	}
}
