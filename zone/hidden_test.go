package zone

import (
	"strings"
	"testing"
)

// hidden returns h as a probe role without pg_monitor sees it: a replica's
// WAL receiver timeline is hidden, leaving the lower bound tl.
func hidden(h Host, tl uint32) Host {
	h.StatsHidden = true
	if h.InRecovery {
		h.TimelineHidden, h.TimelineExact, h.Timeline, h.AppName = true, false, tl, ""
	}
	return h
}

// Without sync_state, no replica is provably asynchronous while
// synchronous_standby_names is set; with it empty, every one is. The
// replicas' own statistics are readable here (another role on them): a
// replica whose timeline is hidden is set aside while the primary's
// statistics are hidden too (TestHiddenTimeline).
func TestHiddenSyncState(t *testing.T) {
	for _, names := range []bool{true, false} {
		p := hidden(seen("10.0.0.1", false, 0), 0)
		p.SyncNamesSet = names
		p.Standbys = []Standby{{AppName: "r1"}, {AppName: "r2"}} // client_addr and sync_state read NULL
		snap := cluster(p, seen("10.0.0.2", true, 0), seen("10.0.0.3", true, 0))
		c := snap.Clusters[0]
		for _, h := range c.Hosts[1:] {
			if h.Role != RoleReplica || h.Sync != names || h.SyncUnsure != names {
				t.Errorf("synchronous_standby_names set %v: %s is %v, sync %v (unsure %v)", names, h.Addr, h.Role, h.Sync, h.SyncUnsure)
			}
			if names && !strings.Contains(h.Note, "synchronous_standby_names is set") {
				t.Errorf("%s: note %q does not say why it counts as synchronous", h.Addr, h.Note)
			}
		}
	}
}

// A replica whose WAL receiver's timeline is hidden, its lower bound
// below the newest timeline or at it, is answered only while exactly one
// of the primary's WAL senders is provably its own (its slot, which no
// other host shares) and the primary's statistics are readable; a
// writable host on an older timeline streaming to a standby sets it
// aside, and so does any replica no sender is proven to be: other WAL
// senders (pg_receivewal, a backup) prove nothing, and neither does a
// slot two replicas share, nor any slot while the primary's statistics
// are hidden too (review 13a, finding 1: the row on it may be
// pg_receivewal's). A lower bound at the newest timeline proves nothing
// either: the replica may be on a later one pgdns never saw (review 13a,
// finding 3: a cascade under an unlisted relay that a DR drill promoted).
// A replica without a WAL receiver (its lower bound is all anyone could
// know) is set aside below the newest timeline as before.
func TestHiddenTimeline(t *testing.T) {
	primary := seen("10.0.0.1", false, 0)
	primary.Timeline = 2
	primary.StatsHidden = true
	primary.Standbys = []Standby{{AppName: "r2", Slot: "r2"}}
	follower := hidden(seen("10.0.0.2", true, 0), 1)
	follower.SlotName = "r2"
	noReceiver := seen("10.0.0.3", true, 0)
	noReceiver.TimelineExact = false
	noReceiver.StatsHidden = true
	c := cluster(primary, follower, noReceiver).Clusters[0]
	if h := c.Hosts[1]; h.Aside != AsideSuperseded || !strings.Contains(h.Note, "none proves it follows the primary") ||
		!strings.HasSuffix(h.Note, "grant pg_monitor (or pg_read_all_stats) to the probe role") {
		t.Errorf("hidden timeline, lower bound 1, its slot's sender on a primary whose statistics are hidden: %v, aside %v (%s)", h.Role, h.Aside, h.Note)
	}
	if h := c.Hosts[2]; h.Aside != AsideSuperseded {
		t.Errorf("no WAL receiver on timeline 1: %v, aside %v", h.Role, h.Aside)
	}
	// /v1/explain says why and what to do.
	if v := explainName(t, cluster(primary, follower), "replica.db.local.")[1]; v.Selected ||
		!strings.HasPrefix(v.Why, "unknown: timeline hidden from the probe role, at least 1, below the newest 2") ||
		!strings.Contains(v.Why, "grant pg_monitor (or pg_read_all_stats) to the probe role") {
		t.Errorf("explain: selected %v, why %q", v.Selected, v.Why)
	}
	// Its lower bound on the newest timeline: set aside all the same,
	// while the primary's statistics are hidden (before review 13a's
	// finding 3 it was answered whatever the senders showed).
	caughtUp := follower
	caughtUp.Timeline = 2
	if h := cluster(primary, caughtUp).Clusters[0].Hosts[1]; h.Aside != AsideUnproven ||
		!strings.HasPrefix(h.Note, "timeline hidden from the probe role, at least 2 (the newest seen; it may be on a later one pgdns has not seen") ||
		!strings.Contains(h.Note, "none proves it follows the primary") {
		t.Errorf("hidden timeline, lower bound 2, the primary's statistics hidden: %v, aside %v (%s)", h.Role, h.Aside, h.Note)
	}
	if v := explainName(t, cluster(primary, caughtUp), "replica.db.local.")[1]; v.Selected ||
		!strings.HasPrefix(v.Why, "unknown: timeline hidden from the probe role, at least 2 (the newest seen") {
		t.Errorf("explain, lower bound 2: selected %v, why %q", v.Selected, v.Why)
	}
	// The primary's statistics readable (its senders' replay_lsn told
	// pg_receivewal's apart): the row on its slot proves it, whatever
	// its lower bound.
	primary.StatsHidden = false
	c = cluster(primary, follower, noReceiver).Clusters[0]
	if h := c.Hosts[1]; h.Role != RoleReplica || h.Aside != NotAside {
		t.Errorf("hidden timeline, lower bound 1, its slot's sender on the primary: %v, aside %v (%s)", h.Role, h.Aside, h.Note)
	}
	if h := cluster(primary, caughtUp).Clusters[0].Hosts[1]; h.Role != RoleReplica || h.Aside != NotAside {
		t.Errorf("hidden timeline, lower bound 2, its slot's sender on the primary: %v, aside %v (%s)", h.Role, h.Aside, h.Note)
	}
	// A cascade (no row of the primary is its own) on the newest
	// timeline, on timeline 1 too: set aside, saying why.
	cascade := hidden(seen("10.0.0.6", true, 0), 1)
	cascade.SlotName = "r6"
	one := primary
	one.Timeline = 1
	if h := cluster(one, cascade).Clusters[0].Hosts[1]; h.Aside != AsideUnproven ||
		!strings.Contains(h.Note, `the primary has no WAL sender with its slot "r6": it may follow another host`) ||
		!strings.HasSuffix(h.Note, "grant pg_monitor (or pg_read_all_stats) to the probe role") {
		t.Errorf("hidden timeline, lower bound 1 on timeline 1, a cascade: %v, aside %v (%s)", h.Role, h.Aside, h.Note)
	}

	old := seen("10.0.0.4", false, 0)
	old.Standbys = []Standby{{AppName: "walreceiver"}}
	c = cluster(primary, follower, old).Clusters[0]
	if h := c.Hosts[1]; h.Aside != AsideSuperseded || !strings.Contains(h.Note, "10.0.0.4:5432, writable on superseded timeline 1") {
		t.Errorf("hidden timeline while a superseded primary streams: %v, aside %v (%s)", h.Role, h.Aside, h.Note)
	}
	old.Standbys = nil
	c = cluster(primary, follower, old).Clusters[0]
	if h := c.Hosts[1]; h.Role != RoleReplica {
		t.Errorf("hidden timeline, a superseded primary streaming to nobody: %v (%s)", h.Role, h.Note)
	}

	// The orphan streams from no slot: however many WAL senders the
	// primary has (pg_receivewal's, a backup's), none is proven its own.
	orphan := hidden(seen("10.0.0.5", true, 0), 1)
	for _, rows := range [][]Standby{nil, {{AppName: "pg_receivewal"}}, {{AppName: "pg_receivewal"}, {AppName: "n5"}}} {
		p := primary
		p.Standbys = append(rows, primary.Standbys...)
		c = cluster(p, follower, orphan).Clusters[0]
		if h := c.Hosts[2]; h.Aside != AsideSuperseded || !strings.Contains(h.Note, "streams from no replication slot") {
			t.Errorf("an orphan without a slot, the primary's senders %v: %v, aside %v (%s)", p.Standbys, h.Role, h.Aside, h.Note)
		}
		if h := c.Hosts[1]; h.Role != RoleReplica {
			t.Errorf("the follower on its slot, the primary's senders %v: %v (%s)", p.Standbys, h.Role, h.Note)
		}
	}
	// With a slot the primary has no sender on, or one another replica
	// shares, it is set aside too.
	orphan.SlotName = "r5"
	c = cluster(primary, follower, orphan).Clusters[0]
	if h := c.Hosts[2]; h.Aside != AsideSuperseded || !strings.Contains(h.Note, `no WAL sender with its slot "r5"`) {
		t.Errorf("an orphan whose slot has no sender: %v, aside %v (%s)", h.Role, h.Aside, h.Note)
	}
	orphan.SlotName = "r2"
	c = cluster(primary, follower, orphan).Clusters[0]
	for _, h := range c.Hosts[1:] {
		if h.Aside != AsideSuperseded || !strings.Contains(h.Note, `slot "r2" is also`) {
			t.Errorf("two replicas on slot r2: %s is %v, aside %v (%s)", h.Addr, h.Role, h.Aside, h.Note)
		}
	}
	// No primary: none is known to follow the newest timeline.
	c = &Cluster{Name: "main", Hosts: []Host{follower}, NewestTimeline: 2}
	c.Decide(t0, stale, 3)
	if h := c.Hosts[0]; h.Role == RoleReplica && h.Aside == NotAside {
		t.Errorf("no primary: the hidden-timeline replica is answered (%s)", h.Note)
	}
}

// Review R7: two servers promoted independently may both take timeline 2.
// A replica on a timeline above 1 is answered only when history files
// prove its branch is the primary's, or exactly one of the primary's WAL
// senders is its own (its receiver streams from the primary, and a slot,
// else an application name, each unique, ties it; never an address);
// otherwise it is set aside as branch_unproven.
// Timeline 1 is TestUnlistedUpstreamOnTimelineOne's.
func TestUnprovenBranch(t *testing.T) {
	primary := seen("10.0.0.1", false, 0x9000)
	primary.Timeline = 2
	r := seen("10.0.0.2", true, 0x8000)
	r.Timeline, r.AppName = 2, "n2"
	decide := func(p, r Host) Host { return cluster(p, r).Clusters[0].Hosts[1] }

	if h := decide(primary, r); h.Aside != AsideUnproven ||
		h.Note != `its WAL sender is not the primary: on timeline 2 its branch is unproven (the primary has no WAL sender with its application name "n2")` {
		t.Errorf("no WAL sender of the primary: aside %v (%s)", h.Aside, h.Note)
	}
	for _, rows := range [][]Standby{{{AppName: "n2"}}, {{Addr: r.IP, AppName: "n2"}}, {{Slot: "s2"}, {AppName: "n2"}}} {
		p := primary
		p.Standbys = rows
		if h := decide(p, r); h.Aside != NotAside || h.Role != RoleReplica {
			t.Errorf("the primary's rows %v: aside %v (%s)", rows, h.Aside, h.Note)
		}
	}
	// Two rows with its name prove nothing; neither does a slot the
	// primary has no sender on, whatever the name says.
	p := primary
	p.Standbys = []Standby{{AppName: "n2"}, {AppName: "n2"}}
	if h := decide(p, r); h.Aside != AsideUnproven {
		t.Errorf("two rows named n2: aside %v (%s)", h.Aside, h.Note)
	}
	slotted := r
	slotted.SlotName = "s2"
	p.Standbys = []Standby{{AppName: "n2"}}
	if h := decide(p, slotted); h.Aside != AsideUnproven || !strings.Contains(h.Note, `slot "s2"`) {
		t.Errorf("no sender on its slot: aside %v (%s)", h.Aside, h.Note)
	}
	// Histories that agree prove the branch without a WAL sender.
	p = primary
	p.OwnHistory = []TimelineEnd{{Timeline: 1, End: 0x4000}}
	proven := r
	proven.OwnHistory = p.OwnHistory
	if h := decide(p, proven); h.Aside != NotAside {
		t.Errorf("agreeing histories: aside %v (%s)", h.Aside, h.Note)
	}
	// Not on a timeline known forked: two promotions from one point write
	// equal histories; only a WAL sender row proves the branch (review
	// 13, R13b-5).
	fc := &Cluster{Name: "main", Hosts: []Host{p, proven}, ForkedTimelines: []TimelineFork{{Timeline: 2, Note: "two writers"}}}
	fc.Decide(t0, stale, 3)
	if h := fc.Hosts[1]; h.Aside != AsideUnproven {
		t.Errorf("agreeing histories on a forked timeline: aside %v (%s)", h.Aside, h.Note)
	}
	p.Standbys = []Standby{{Addr: r.IP, AppName: "n2"}}
	fc = &Cluster{Name: "main", Hosts: []Host{p, proven}, ForkedTimelines: []TimelineFork{{Timeline: 2, Note: "two writers"}}}
	fc.Decide(t0, stale, 3)
	if h := fc.Hosts[1]; h.Aside != NotAside {
		t.Errorf("a WAL sender row on a forked timeline: aside %v (%s)", h.Aside, h.Note)
	}
	p.Standbys = nil
	// The primary's statistics hidden, the replica's readable: the row on
	// its slot may be pg_receivewal's (every column but the pid reads
	// NULL), and proves nothing.
	hp := primary
	hp.StatsHidden, hp.Standbys = true, []Standby{{Slot: "s2"}}
	if h := decide(hp, slotted); h.Aside != AsideUnproven || !strings.Contains(h.Note, "hidden from the probe role") ||
		!strings.HasSuffix(h.Note, grantStats+")") {
		t.Errorf("the primary's WAL senders hidden, a row on its slot: aside %v (%s)", h.Aside, h.Note)
	}
	// Timeline 1: never set aside for this.
	one, oneR := primary, r
	one.Timeline, oneR.Timeline = 1, 1
	if h := decide(one, oneR); h.Aside != NotAside {
		t.Errorf("timeline 1: aside %v (%s)", h.Aside, h.Note)
	}
}

// pg_receivewal and pg_basebackup -X stream are no standby, and without
// pg_read_all_stats their rows read like a standby's but for the
// application name they give themselves: one on a replica's slot name
// does not prove that replica follows the primary; a standby's row does,
// only while the primary's statistics are readable (the replica's alone
// hidden). While they are hidden too no row proves it, whatever its name
// or the replica's lower bound (review 13a: the orphan of a failover,
// still streaming from the old primary, was answered once pg_receivewal
// -S took its slot on the new one, under any application name; finding
// 3, a lower bound at the newest timeline hides a later one).
func TestHiddenTimelineWALClientOnItsSlot(t *testing.T) {
	for app, follows := range map[string]bool{"pg_receivewal": false, "pg_basebackup": false, "walreceiver": true} {
		for _, statsHidden := range []bool{true, false} {
			primary := seen("10.0.0.1", false, 0)
			primary.Timeline, primary.StatsHidden = 2, statsHidden
			primary.Standbys = []Standby{{AppName: app, Slot: "r2"}}
			for _, tl := range []uint32{1, 2} {
				r := hidden(seen("10.0.0.2", true, 0), tl)
				r.SlotName = "r2"
				h := cluster(primary, r).Clusters[0].Hosts[1]
				want := follows && !statsHidden
				if got := h.Role == RoleReplica && h.Aside == NotAside; got != want {
					t.Errorf("primary's statistics hidden %v, lower bound %d, a WAL sender %q on its slot: answered %v (%v, aside %v: %s), want %v",
						statsHidden, tl, app, got, h.Role, h.Aside, h.Note, want)
				}
				wantNote := "none proves it follows the primary"
				if !statsHidden {
					wantNote = `the primary has no WAL sender with its slot "r2"`
				}
				if !want && !strings.Contains(h.Note, wantNote) {
					t.Errorf("primary's statistics hidden %v, lower bound %d, a WAL sender %q on its slot: aside %v, note %q", statsHidden, tl, app, h.Aside, h.Note)
				}
			}
		}
	}
}
