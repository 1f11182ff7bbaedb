package zone

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	type hostCase struct {
		role  Role
		aside Aside
		note  string // a part of the explanation for people
	}
	cases := []struct {
		name    string
		hosts   func() []Host
		primary int
		split   bool
		want    []hostCase
	}{
		{
			name: "one primary two replicas",
			hosts: func() []Host {
				return []Host{seen("10.0.0.1", false, 0), seen("10.0.0.2", true, 0), seen("10.0.0.3", true, 0)}
			},
			primary: 0,
			want:    []hostCase{{RolePrimary, NotAside, ""}, {RoleReplica, NotAside, ""}, {RoleReplica, NotAside, ""}},
		},
		{
			name: "never seen, failed, stale",
			hosts: func() []Host {
				a, b, c := seen("10.0.0.1", false, 0), seen("10.0.0.2", true, 0), seen("10.0.0.3", true, 0)
				a.Seen = false
				b.Fails = 3
				c.ProbedAt = t0.Add(-time.Hour)
				return []Host{a, b, c}
			},
			primary: -1,
			want:    []hostCase{{RoleUnknown, NotAside, ""}, {RoleDown, NotAside, ""}, {RoleDown, NotAside, "no successful probe"}},
		},
		{
			name: "promoted replica on a higher timeline wins",
			hosts: func() []Host {
				old, promoted := seen("10.0.0.1", false, 0), seen("10.0.0.2", false, 0)
				promoted.Timeline = 2
				return []Host{old, promoted}
			},
			primary: 1,
			want:    []hostCase{{RoleUnknown, AsideSuperseded, "superseded by timeline 2"}, {RolePrimary, NotAside, ""}},
		},
		{
			name: "split brain on one timeline answers no primary, nor its replicas",
			hosts: func() []Host {
				return []Host{seen("10.0.0.1", false, 0), seen("10.0.0.2", false, 0), seen("10.0.0.3", true, 0)}
			},
			primary: -1,
			split:   true,
			want: []hostCase{{RoleUnknown, AsideSplitBrain, "split brain"}, {RoleUnknown, AsideSplitBrain, "split brain"},
				{RoleUnknown, AsideSplitBrain, "split brain on timeline 1: its branch may be lost"}},
		},
		{
			name: "a host of another cluster is set aside",
			hosts: func() []Host {
				foreign := seen("10.0.0.9", false, 0)
				foreign.SystemID = 99
				return []Host{foreign, seen("10.0.0.1", false, 0), seen("10.0.0.2", true, 0)}
			},
			primary: 1,
			want:    []hostCase{{RoleUnknown, AsideForeign, "system identifier 99"}, {RolePrimary, NotAside, ""}, {RoleReplica, NotAside, ""}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &Cluster{Name: "main", Hosts: tc.hosts()}
			c.Decide(t0, stale, 3)
			if c.SplitBrain != tc.split {
				t.Errorf("SplitBrain = %v, want %v", c.SplitBrain, tc.split)
			}
			if c.Primary != tc.primary {
				t.Errorf("primary = %d, want %d", c.Primary, tc.primary)
			}
			for i, w := range tc.want {
				h := c.Hosts[i]
				if h.Role != w.role || h.Aside != w.aside || !strings.Contains(h.Note, w.note) || (w.note == "" && h.Note != "") {
					t.Errorf("host %d: role %v aside %v note %q, want %v %v %q", i, h.Role, h.Aside, h.Note, w.role, w.aside, w.note)
				}
			}
		})
	}
}

// Synchronous standbys are found by their own pg_stat_replication row:
// the replica's WAL receiver streams from the primary, and its slot, else
// its application name, picks exactly one row. An address proves nothing.
// Whatever is not proven is unknown both ways: no sync answer, and
// counted as synchronous for "replicas: async" (review 2, R2, R7, R16);
// it is surely asynchronous only by its own row, or when no commit waits
// for any standby.
func TestSyncStandbyRows(t *testing.T) {
	ip := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	loop := ip("127.0.0.1")
	cases := []struct {
		name              string
		rows              []Standby
		replica           func(h *Host)
		sync, amb, proven bool
		why               string
	}{
		{"slot decides though names and addresses are shared",
			[]Standby{{Addr: loop, AppName: "walreceiver", Sync: true, Slot: "a"}, {Addr: loop, AppName: "walreceiver", Slot: "b"}},
			func(h *Host) { h.AppName, h.SlotName = "walreceiver", "b" }, false, false, false, "not a synchronous standby"},
		{"its slot's row is sync",
			[]Standby{{Addr: loop, AppName: "walreceiver", Sync: true, Slot: "a"}, {Addr: loop, AppName: "walreceiver", Slot: "b"}},
			func(h *Host) { h.AppName, h.SlotName = "walreceiver", "a" }, true, false, true, ""},
		{"a unique address does not decide",
			[]Standby{{Addr: ip("10.0.0.2"), AppName: "walreceiver", Sync: true}, {Addr: ip("10.0.0.3"), AppName: "walreceiver"}},
			func(h *Host) { h.AppName = "walreceiver" }, true, true, false, `sync unknown: the primary has 2 WAL senders with its application name "walreceiver"`},
		{"unique application name decides",
			[]Standby{{Addr: loop, AppName: "db 2", Sync: true}, {Addr: loop, AppName: "db 3"}},
			func(h *Host) { h.AppName = "db 3" }, false, false, false, "not a synchronous standby"},
		{"indistinct rows that disagree lean sync",
			[]Standby{{Addr: loop, AppName: "walreceiver", Sync: true}, {Addr: loop, AppName: "walreceiver"}},
			func(h *Host) { h.AppName = "walreceiver" }, true, true, false, "sync unknown: the primary has 2 WAL senders"},
		{"no row is sync: no commit waits for any standby",
			[]Standby{{Addr: loop, AppName: "walreceiver"}, {Addr: loop, AppName: "walreceiver"}},
			func(h *Host) { h.AppName = "walreceiver" }, false, false, false, "sync unknown: the primary has 2 WAL senders"},
		{"not among the rows while one is sync: unknown",
			[]Standby{{Addr: loop, AppName: "other", Sync: true}},
			func(h *Host) { h.AppName = "walreceiver" }, true, true, false, `sync unknown: the primary has no WAL sender with its application name "walreceiver"`},
		{"R2: cascading from another standby, a sync row has its name",
			[]Standby{{Addr: ip("10.0.0.9"), AppName: "s3", Sync: true}},
			func(h *Host) { h.AppName, h.SenderHost = "s3", "10.0.0.2" }, true, true, false,
			"sync unknown: its WAL receiver streams from 10.0.0.2:5432, not from the primary 10.0.0.1:5432"},
		{"streaming from the primary's port elsewhere",
			[]Standby{{Addr: loop, AppName: "s3", Sync: true}},
			func(h *Host) { h.AppName, h.SenderPort = "s3", 6432 }, true, true, false,
			"sync unknown: its WAL receiver streams from 10.0.0.1:6432, not from the primary"},
		{"the primary by its configured name",
			[]Standby{{Addr: loop, AppName: "s3", Sync: true}},
			func(h *Host) { h.AppName, h.SenderHost = "s3", "DB1.example" }, true, false, true, ""},
		{"R7: no WAL receiver, a sync row from its address",
			[]Standby{{Addr: ip("10.0.0.3"), AppName: "pg_receivewal", Sync: true}},
			func(h *Host) {
				h.Receiver, h.SenderHost, h.SenderPort, h.AppName, h.AppNameWhy = "", "", 0, "", "it has no WAL receiver"
			},
			true, true, false, "sync unknown: it has no WAL receiver"},
		{"a receiver not streaming",
			[]Standby{{Addr: ip("10.0.0.3"), AppName: "s3", Sync: true}},
			func(h *Host) { h.Receiver, h.AppName = "waiting", "s3" }, true, true, false, `sync unknown: its WAL receiver is "waiting", not streaming`},
		{"R16: an application name that cannot be read",
			[]Standby{{Addr: loop, AppName: "my standby", Sync: true}},
			func(h *Host) { h.AppName, h.AppNameWhy = "", "its WAL receiver's conninfo cannot be read" }, true, true, false,
			"sync unknown: its WAL receiver's conninfo cannot be read"},
		{"R16: an application name with a space, read whole",
			[]Standby{{Addr: loop, AppName: "my standby", Sync: true}, {Addr: loop, AppName: "my"}},
			func(h *Host) { h.AppName = "my standby" }, true, false, true, ""},
		{"review 14a, finding 1: synchronous since a position it has not replayed",
			[]Standby{{Addr: loop, AppName: "s3", Sync: true, SyncFrom: 0x3000100}},
			func(h *Host) { h.AppName, h.ReplayLSN = "s3", 0x3000000 }, true, true, false,
			"sync unknown: synchronous only since the primary was at 0/3000100, which it has not replayed yet (replayed to 0/3000000)"},
		{"review 14a, finding 1: synchronous since the primary's latest probe",
			[]Standby{{Addr: loop, AppName: "s3", Sync: true, SyncFrom: SyncPending}},
			func(h *Host) { h.AppName, h.ReplayLSN = "s3", 0x3000000 }, true, true, false,
			"sync unknown: synchronous only since the primary's latest probe"},
		{"review 14a, finding 1: synchronous since a position it has replayed",
			[]Standby{{Addr: loop, AppName: "s3", Sync: true, SyncFrom: 0x3000100}},
			func(h *Host) { h.AppName, h.ReplayLSN = "s3", 0x3000100 }, true, false, true, ""},
		{"synchronous_standby_names empty: surely async",
			nil, func(h *Host) { h.AppName = "s3" }, false, false, false, "not a synchronous standby: synchronous_standby_names is empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, r := seen("10.0.0.1", false, 0), seen("10.0.0.3", true, 0)
			if tc.name == "the primary by its configured name" {
				p.Addr = "db1.example:5432"
			}
			p.Standbys, p.SyncNamesSet = tc.rows, tc.rows != nil
			tc.replica(&r)
			c := &Cluster{Name: "main", Hosts: []Host{p, r}}
			c.Decide(t0, stale, 3)
			h := c.Hosts[1]
			if h.Role != RoleReplica || h.Sync != tc.sync || h.SyncUnsure != tc.amb || (h.Note != "") != tc.amb || h.SyncProven != tc.proven {
				t.Fatalf("role %v sync %v unsure %v proven %v note %q, want sync %v unsure %v proven %v",
					h.Role, h.Sync, h.SyncUnsure, h.SyncProven, h.Note, tc.sync, tc.amb, tc.proven)
			}
			if !strings.HasPrefix(h.SyncWhy, tc.why) || (tc.amb && !strings.HasPrefix(h.Note, tc.why)) {
				t.Errorf("why %q, note %q, want them to start with %q", h.SyncWhy, h.Note, tc.why)
			}
		})
	}
}

// The cluster's identity: a tie fails closed, a stray never takes over an
// established identity while one of its hosts lives, a rebuilt cluster is
// recognised by a majority of all configured hosts, and a pinned identity
// never changes.
func TestIdentity(t *testing.T) {
	stray, primary, replica := seen("10.0.0.9", false, 0), seen("10.0.0.1", false, 0), seen("10.0.0.2", true, 0)
	stray.SystemID = 99
	c := &Cluster{Name: "main", Hosts: []Host{stray, primary, replica}}
	c.Hosts[2].Fails = 3 // the replica is down: one host each
	c.Decide(t0, stale, 3)
	if c.Identity != 0 || c.Primary != -1 || c.Hosts[0].Aside != AsideUnsettled || c.Hosts[1].Aside != AsideUnsettled {
		t.Fatalf("tie: identity %d primary %d asides %v %v", c.Identity, c.Primary, c.Hosts[0].Aside, c.Hosts[1].Aside)
	}
	c.Hosts[2].Fails = 0
	c.Decide(t0, stale, 3)
	if c.Identity != 7 || c.Primary != 1 {
		t.Fatalf("majority: identity %d primary %d", c.Identity, c.Primary)
	}
	c.Hosts[2].Fails = 3
	c.Decide(t0, stale, 3)
	if c.Identity != 7 || c.Primary != 1 {
		t.Fatalf("established identity not kept on a tie: identity %d primary %d", c.Identity, c.Primary)
	}
	c.Hosts[1].Fails = 3 // only the stray lives
	c.Decide(t0, stale, 3)
	if c.Identity != 7 || c.Primary != -1 {
		t.Fatalf("a lone stray took over: identity %d primary %d", c.Identity, c.Primary)
	}
	// Rebuilt: every host comes back with a new identity.
	for i := range c.Hosts {
		c.Hosts[i].Fails, c.Hosts[i].SystemID = 0, 42
	}
	c.Hosts[0].InRecovery = true
	c.Decide(t0, stale, 3)
	if c.Identity != 42 || c.Primary == -1 {
		t.Fatalf("rebuilt cluster: identity %d primary %d", c.Identity, c.Primary)
	}

	pinned := &Cluster{Name: "main", Identity: 99, IdentityPinned: true, Hosts: []Host{seen("10.0.0.1", false, 0), seen("10.0.0.2", true, 0)}}
	pinned.Decide(t0, stale, 3)
	if pinned.Identity != 99 || pinned.Primary != -1 {
		t.Fatalf("pinned identity moved: %d primary %d", pinned.Identity, pinned.Primary)
	}
}

// A writable host on a timeline older than the newest one seen is never
// the primary, even once the newest timeline's hosts are gone; a host
// whose timeline is only a lower bound never vouches for a timeline token.
func TestNewestTimelineIsRemembered(t *testing.T) {
	old, promoted := seen("10.0.0.1", false, 0), seen("10.0.0.2", false, 0)
	promoted.Timeline = 2
	c := &Cluster{Name: "main", Hosts: []Host{old, promoted}}
	c.Decide(t0, stale, 3)
	if c.Primary != 1 || c.NewestTimeline != 2 {
		t.Fatalf("primary %d newest %d", c.Primary, c.NewestTimeline)
	}
	c.Hosts[1].Fails = 3
	c.Decide(t0, stale, 3)
	if c.Primary != -1 || c.Hosts[0].Aside != AsideSuperseded {
		t.Fatalf("the superseded primary came back: primary %d aside %v", c.Primary, c.Hosts[0].Aside)
	}

	r := seen("10.0.0.3", true, 0x9000)
	r.Timeline, r.History = 2, []TimelineEnd{{Timeline: 1, End: 0x8000}}
	if !r.hasHistory(1, 0x7000) {
		t.Fatal("an exact timeline with history did not vouch for a token before the fork")
	}
	r.TimelineExact = false
	if r.hasHistory(1, 0x7000) || r.hasHistory(2, 0x7000) {
		t.Fatal("a lower-bound timeline vouched for a timeline token")
	}
}

// Two live hosts that agree establish the identity once every host has
// been probed, though most configured hosts are down; one alone does not.
func TestIdentityFromLiveHosts(t *testing.T) {
	hosts := []Host{seen("10.0.0.1", false, 0), seen("10.0.0.2", true, 0), seen("10.0.0.3", true, 0),
		seen("10.0.0.4", true, 0), seen("10.0.0.5", true, 0)}
	for i := 2; i < 5; i++ {
		hosts[i].Seen, hosts[i].Fails = false, 3
	}
	c := &Cluster{Name: "main", Hosts: hosts}
	c.Decide(t0, stale, 3)
	if c.Identity != 7 || c.Primary != 0 {
		t.Fatalf("two of five live: identity %d primary %d", c.Identity, c.Primary)
	}
	lone := &Cluster{Name: "main", Hosts: []Host{seen("10.0.0.1", false, 0), hosts[2], hosts[3]}}
	lone.Decide(t0, stale, 3)
	if lone.Identity != 0 || lone.Primary != -1 {
		t.Fatalf("one of three live: identity %d primary %d", lone.Identity, lone.Primary)
	}
}
