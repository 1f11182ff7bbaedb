package zone

import (
	"fmt"
	"net/netip"
	"strings"
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

// TestForkedReplica: a replica on the primary's timeline number whose own
// history file says an earlier timeline ended elsewhere, or that the probe
// proved ahead of the primary, is set aside; one whose history matches,
// or proved ahead of another writable host, is a replica.
func TestForkedReplica(t *testing.T) {
	primary := seen("10.0.0.1", false, 0x9000)
	primary.Timeline, primary.OwnHistory = 2, []TimelineEnd{{Timeline: 1, End: 0x4000}}
	same, other, ahead, elsewhere := seen("10.0.0.2", true, 0x8000), seen("10.0.0.3", true, 0x8000),
		seen("10.0.0.4", true, 0x8000), seen("10.0.0.5", true, 0x8000)
	for _, h := range []*Host{&same, &other, &ahead, &elsewhere} {
		h.Timeline = 2
	}
	same.OwnHistory = []TimelineEnd{{Timeline: 1, End: 0x4000}}
	other.OwnHistory = []TimelineEnd{{Timeline: 1, End: 0x5000}}
	ahead.DivergedFrom, ahead.DivergedNote = "10.0.0.1:5432", "another branch of timeline 2: replayed to ..."
	elsewhere.DivergedFrom = "10.0.0.9:5432"
	// elsewhere has no history file: the primary's WAL sender to it
	// (its application name) is what puts it on the primary's branch.
	elsewhere.AppName = "n5"
	primary.Standbys = []Standby{{Addr: elsewhere.IP, AppName: "n5"}}
	c := &Cluster{Name: "main", Hosts: []Host{primary, same, other, ahead, elsewhere}}
	c.Decide(t0, stale, 3)
	want := []Aside{NotAside, NotAside, AsideForked, AsideForked, NotAside}
	for i, w := range want {
		if h := &c.Hosts[i]; h.Aside != w {
			t.Errorf("%s: aside %v (note %q), want %v", h.Addr, h.Aside, h.Note, w)
		}
	}
	if n := c.Hosts[2].Note; n != "another branch of timeline 2: its history says timeline 1 ended at 0/5000, the primary's timeline 1 ended at 0/4000" {
		t.Errorf("note %q", n)
	}
}

// TestForkedReplicaWhileThePrimaryIsDown: TestForkedReplica's cluster with
// its primary down (no primary answered): the replicas proven on another
// branch than its stay aside (review 13, R13b-4), the others are replicas.
func TestForkedReplicaWhileThePrimaryIsDown(t *testing.T) {
	primary := seen("10.0.0.1", false, 0x9000)
	primary.Timeline, primary.OwnHistory, primary.Fails = 2, []TimelineEnd{{Timeline: 1, End: 0x4000}}, 3
	same, other, ahead, elsewhere := seen("10.0.0.2", true, 0x8000), seen("10.0.0.3", true, 0x8000),
		seen("10.0.0.4", true, 0x8000), seen("10.0.0.5", true, 0x8000)
	for _, h := range []*Host{&same, &other, &ahead, &elsewhere} {
		h.Timeline = 2
	}
	same.OwnHistory = []TimelineEnd{{Timeline: 1, End: 0x4000}}
	other.OwnHistory = []TimelineEnd{{Timeline: 1, End: 0x5000}}
	ahead.DivergedFrom, ahead.DivergedNote = "10.0.0.1:5432", "another branch of timeline 2: replayed to ..."
	elsewhere.DivergedFrom = "10.0.0.9:5432"
	c := &Cluster{Name: "main", Hosts: []Host{primary, same, other, ahead, elsewhere}}
	c.Decide(t0, stale, 3)
	if c.Primary != -1 {
		t.Fatalf("primary %d, want none", c.Primary)
	}
	want := []Aside{NotAside, NotAside, AsideForked, AsideForked, NotAside}
	for i, w := range want {
		if h := &c.Hosts[i]; h.Aside != w {
			t.Errorf("%s: aside %v (note %q), want %v", h.Addr, h.Aside, h.Note, w)
		}
	}
	if n := c.Hosts[3].Note; !strings.HasSuffix(n, "(that server is down: no primary is answered)") {
		t.Errorf("note %q", n)
	}

	// On a timeline known forked, no replica of it is answered without a
	// primary: its branch is unknown (R13b-6).
	c = &Cluster{Name: "main", Identity: same.SystemID, NewestTimeline: 2, Hosts: []Host{primary, same}, ForkedTimelines: []TimelineFork{{Timeline: 2, Note: "two writers"}}}
	c.Decide(t0, stale, 3)
	if h := c.Hosts[1]; h.Aside != AsideForked || !strings.Contains(h.Note, "timeline 2 forked (two writers): its branch is unknown") {
		t.Errorf("forked timeline, no primary: aside %v (note %q)", h.Aside, h.Note)
	}

	// Not seen since pgdns started (restarted from its state file, which
	// kept ahead's proof): the proof by its address still holds; the
	// history files' comparison needs the server's.
	unseen := Host{Cluster: "main", Addr: "10.0.0.1:5432", IP: netip.MustParseAddr("10.0.0.1"), Port: 5432}
	c = &Cluster{Name: "main", Identity: same.SystemID, NewestTimeline: 2, Hosts: []Host{unseen, same, other, ahead, elsewhere}}
	c.Decide(t0, stale, 3)
	want = []Aside{NotAside, NotAside, NotAside, AsideForked, NotAside}
	for i, w := range want {
		if h := &c.Hosts[i]; h.Aside != w {
			t.Errorf("unseen primary: %s: aside %v (note %q), want %v", h.Addr, h.Aside, h.Note, w)
		}
	}
}

// TestForkedReplicaOfTheSameServerRelisted: a replica proven not to follow
// a writable server stays aside while that server run is the primary,
// whatever address it is listed under now (review 6, G7); a proof of
// another run at another address, or of a run not known, names another
// server.
func TestForkedReplicaOfTheSameServerRelisted(t *testing.T) {
	run := t0.Add(-time.Hour)
	primary := seen("10.0.0.9", false, 0x9000) // the proof's 10.0.0.1, by its other address
	primary.StartedAt = run
	proven, otherRun, noRun := seen("10.0.0.2", true, 0x8000), seen("10.0.0.3", true, 0x8000), seen("10.0.0.4", true, 0x8000)
	proven.DivergedFrom, proven.DivergedRun, proven.DivergedNote = "10.0.0.1:5432", run, "another branch of timeline 1: ..."
	otherRun.DivergedFrom, otherRun.DivergedRun = "10.0.0.1:5432", run.Add(time.Second)
	noRun.DivergedFrom = "10.0.0.1:5432"
	c := &Cluster{Name: "main", Hosts: []Host{primary, proven, otherRun, noRun}}
	c.Decide(t0, stale, 3)
	want := []Aside{NotAside, AsideForked, NotAside, NotAside}
	for i, w := range want {
		if h := &c.Hosts[i]; h.Aside != w {
			t.Errorf("%s: aside %v (note %q), want %v", h.Addr, h.Aside, h.Note, w)
		}
	}
	if n := c.Hosts[1].Note; n != proven.DivergedNote {
		t.Errorf("note %q, want the proof's", n)
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
