package zone

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

// A replica proven on another branch of its timeline than a writable
// server (forkedFrom, otherWriterNote, setAsideForkedFromTheDown).

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
	for _, h := range []*Host{&proven, &otherRun, &noRun} {
		h.SenderHost = "10.0.0.9" // streaming from the primary as listed (setAsideUnlistedUpstream)
	}
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
