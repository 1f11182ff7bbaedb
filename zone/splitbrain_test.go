package zone

import (
	"strings"
	"testing"
	"time"
)

// Review 7, H10: while two writable hosts split timeline N, every
// replica on N (known exactly or as a lower bound) follows one of the two
// branches, one of which the operator will throw away: none is answered
// by a name without a token, nor with one. Replicas on older timelines
// are superseded as before. Once one writer is gone or in recovery, the
// fork proofs of rules 1 and 12 decide: the kept branch's replicas come
// back, the other's stay aside where a proof shows it.
func TestSplitBrainSetsItsReplicasAside(t *testing.T) {
	const splitNote = "split brain on timeline 2: its branch may be lost"
	// a and b are both writable on timeline 2 (two promotions that never
	// saw each other's history file); ra streams from a, rb from b, rl
	// followed b but its WAL receiver stopped (timeline 2 a lower bound),
	// old is still on timeline 1, hidden's timeline is hidden from the
	// probe role (at least 1), da was proven past a's position (the probe's
	// DivergedFrom: it is on b's branch).
	a, b := seen("10.0.0.1", false, 0x9000), seen("10.0.0.3", false, 0x9100)
	a.Timeline, b.Timeline = 2, 2
	a.Standbys = []Standby{{AppName: "ra"}}
	b.Standbys = []Standby{{AppName: "rb"}, {AppName: "da"}}
	ra := seen("10.0.0.2", true, 0x9000)
	ra.Timeline, ra.AppName = 2, "ra"
	rb := seen("10.0.0.4", true, 0x9100)
	rb.Timeline, rb.AppName, rb.SenderHost = 2, "rb", "10.0.0.3"
	rl := seen("10.0.0.5", true, 0x9080)
	rl.Timeline, rl.TimelineExact, rl.Receiver, rl.AppName = 2, false, "", "rl"
	old := seen("10.0.0.6", true, 0x8000)
	hidden := seen("10.0.0.7", true, 0x8000)
	hidden.TimelineHidden, hidden.TimelineExact, hidden.StatsHidden = true, false, true
	da := seen("10.0.0.8", true, 0x9100)
	da.Timeline, da.AppName, da.SenderHost = 2, "da", "10.0.0.3"
	da.DivergedFrom, da.DivergedNote = a.Addr, "another branch of timeline 2: replayed to 0/9100, past 0/9000 where 10.0.0.1:5432 was read after it"

	type want struct {
		aside Aside
		note  string // a part of the note; "" for an answered replica
	}
	down := func(h Host) Host { h.Fails = 3; return h }
	cases := []struct {
		name    string
		hosts   []Host
		split   bool
		primary string
		want    map[string]want // by address; hosts not listed are not checked
		answers map[string][]string
	}{
		{
			name:  "during the split brain no replica on its timeline is answered",
			hosts: []Host{a, ra, b, rb, rl, old, hidden, da},
			split: true,
			want: map[string]want{
				a.Addr: {AsideSplitBrain, "split brain: 2 writable hosts on timeline 2"}, b.Addr: {AsideSplitBrain, "split brain: 2 writable"},
				ra.Addr: {AsideSplitBrain, splitNote}, rb.Addr: {AsideSplitBrain, splitNote}, rl.Addr: {AsideSplitBrain, splitNote},
				da.Addr:  {AsideSplitBrain, splitNote},
				old.Addr: {AsideSuperseded, "replica on timeline 1, superseded by timeline 2"}, hidden.Addr: {AsideSuperseded, "no primary"},
			},
			answers: map[string][]string{
				"replica.db.local.": {}, "prefer-replica.db.local.": {}, "any.db.local.": {}, "lag-10s.replica.db.local.": {},
				"primary.db.local.": {}, "lsn-0-8000-t2.prefer-replica.db.local.": {}, "lsn-0-8000.any.db.local.": {},
				"lsn-0-8000-t1.replica.db.local.": {},
			},
		},
		{
			name:  "a split brain on timeline 1 (a copy started writable) sets its replicas aside too",
			hosts: func() []Host { a, b, r := a, b, old; a.Timeline, b.Timeline = 1, 1; return []Host{a, b, r} }(),
			split: true,
			want:  map[string]want{old.Addr: {AsideSplitBrain, "split brain on timeline 1: its branch may be lost"}},
			answers: map[string][]string{
				"replica.db.local.": {}, "any.db.local.": {}, "lsn-0-10.replica.db.local.": {},
			},
		},
		{
			name:    "b stops: a's replica comes back, b's stay aside by rule 12's proofs",
			hosts:   []Host{a, ra, down(b), func() Host { h := rb; h.Receiver = ""; h.TimelineExact = false; return h }(), rl, old, da},
			primary: a.Addr,
			want: map[string]want{
				ra.Addr: {NotAside, ""},
				rb.Addr: {AsideUnproven, "its WAL sender is not the primary: on timeline 2 its branch is unproven"},
				rl.Addr: {AsideUnproven, "its WAL sender is not the primary"},
				da.Addr: {AsideForked, "another branch of timeline 2"},
			},
			answers: map[string][]string{
				"replica.db.local.": {"10.0.0.2"}, "any.db.local.": {"10.0.0.1", "10.0.0.2"}, "primary.db.local.": {"10.0.0.1"},
			},
		},
		{
			name: "b cut off from pgdns but not from rb, histories agreeing: rb streams from the other writer, forked",
			hosts: func() []Host {
				a, b, rb := a, b, rb
				a.OwnHistory = []TimelineEnd{{Timeline: 1, End: 0x6000}}
				b.OwnHistory, rb.OwnHistory = a.OwnHistory, a.OwnHistory // forked at the same point
				return []Host{a, ra, down(b), rb}
			}(),
			primary: a.Addr,
			want: map[string]want{
				ra.Addr: {NotAside, ""},
				rb.Addr: {AsideForked, "its WAL receiver streams from 10.0.0.3:5432, last seen writable on timeline 2 too"},
			},
			answers: map[string][]string{"replica.db.local.": {"10.0.0.2"}, "any.db.local.": {"10.0.0.1", "10.0.0.2"}},
		},
		{
			name: "the primary listed twice: a replica streaming from its other address is no other writer's",
			hosts: func() []Host {
				a, alias, r := a, a, rb
				a.StartedAt = t0.Add(-time.Hour)
				alias.Addr, alias.IP, alias.StartedAt = "10.0.0.3:5432", b.IP, a.StartedAt
				a.Standbys = []Standby{{AppName: "rb"}}
				return []Host{a, alias, r}
			}(),
			primary: a.Addr,
			want:    map[string]want{"10.0.0.3:5432": {AsideDuplicate, ""}, rb.Addr: {AsideUnproven, "not from the primary 10.0.0.1:5432"}},
		},
		{
			name:    "a stops: b's replicas come back (da's proof names a), a's stays aside",
			hosts:   []Host{down(a), func() Host { h := ra; h.Receiver = ""; h.TimelineExact = false; return h }(), b, rb, old, da},
			primary: b.Addr,
			want: map[string]want{
				ra.Addr: {AsideUnproven, "its WAL sender is not the primary"},
				rb.Addr: {NotAside, ""}, da.Addr: {NotAside, ""},
			},
			answers: map[string][]string{"replica.db.local.": {"10.0.0.4", "10.0.0.8"}},
		},
		{
			name: "b demoted (in recovery on timeline 2, not streaming): no split brain, b aside, a's replica back",
			hosts: []Host{a, ra, func() Host {
				h := b
				h.InRecovery, h.Receiver, h.TimelineExact, h.AppName = true, "", false, "b"
				return h
			}(), rb},
			primary: a.Addr,
			want:    map[string]want{ra.Addr: {NotAside, ""}, b.Addr: {AsideUnproven, ""}, rb.Addr: {AsideUnproven, ""}},
			answers: map[string][]string{"replica.db.local.": {"10.0.0.2"}},
		},
		{
			name: "two writable hosts below a witness: superseded, no split brain, the witness abandoned (rule 1)",
			hosts: func() []Host {
				a, b, w := a, b, rl
				a.Timeline, b.Timeline, w.Timeline = 1, 1, 2
				return []Host{a, b, w}
			}(),
			want: map[string]want{
				a.Addr: {AsideSuperseded, "superseded by timeline 2"}, b.Addr: {AsideSuperseded, "superseded by timeline 2"},
				rl.Addr: {AsideAbandoned, "above the cluster's newest proven timeline 1"},
			},
			answers: map[string][]string{"primary.db.local.": {}, "replica.db.local.": {}, "any.db.local.": {}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := cluster(tc.hosts...)
			c := s.Clusters[0]
			if c.SplitBrain != tc.split {
				t.Errorf("SplitBrain = %v, want %v", c.SplitBrain, tc.split)
			}
			if p := c.PrimaryHost(); (p == nil) != (tc.primary == "") || p != nil && p.Addr != tc.primary {
				t.Errorf("primary %v, want %q", p, tc.primary)
			}
			for _, h := range c.Hosts {
				w, ok := tc.want[h.Addr]
				if !ok {
					continue
				}
				if h.Aside != w.aside || !strings.Contains(h.Note, w.note) || (w.aside == NotAside && h.Role != RoleReplica && h.Role != RolePrimary) {
					t.Errorf("%s: role %v aside %v note %q, want aside %v note containing %q", h.Addr, h.Role, h.Aside, h.Note, w.aside, w.note)
				}
			}
			for name, ips := range tc.answers {
				if got := selectIPs(t, s, name, t0, 0); strings.Join(got, ",") != strings.Join(ips, ",") {
					t.Errorf("%s answered %v, want %v", name, got, ips)
				}
			}
		})
	}
}

// splitHosts (the split_brain_began change's detail, and the log's list)
// names the writers only, not the replicas set aside with them.
func TestSplitHostsNamesTheWriters(t *testing.T) {
	a, b, r := seen("10.0.0.1", false, 0x9000), seen("10.0.0.3", false, 0x9100), seen("10.0.0.2", true, 0x9000)
	c := cluster(a, b, r).Clusters[0]
	if r := c.Hosts[2]; r.Aside != AsideSplitBrain {
		t.Fatalf("the replica: aside %v (%s), want split_brain", r.Aside, r.Note)
	}
	if got := splitHosts(c); got != "10.0.0.1:5432,10.0.0.3:5432" {
		t.Errorf("splitHosts = %q, want the two writers", got)
	}
}
