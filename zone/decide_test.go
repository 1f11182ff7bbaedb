package zone

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	type hostCase struct {
		role Role
		note string
	}
	cases := []struct {
		name    string
		hosts   func() []Host
		primary int
		want    []hostCase
	}{
		{
			name: "one primary two replicas",
			hosts: func() []Host {
				return []Host{seen("10.0.0.1", false, 0), seen("10.0.0.2", true, 0), seen("10.0.0.3", true, 0)}
			},
			primary: 0,
			want:    []hostCase{{RolePrimary, ""}, {RoleReplica, ""}, {RoleReplica, ""}},
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
			want:    []hostCase{{RoleUnknown, ""}, {RoleDown, ""}, {RoleDown, "no successful probe"}},
		},
		{
			name: "promoted replica on a higher timeline wins",
			hosts: func() []Host {
				old, promoted := seen("10.0.0.1", false, 0), seen("10.0.0.2", false, 0)
				promoted.Timeline = 2
				return []Host{old, promoted}
			},
			primary: 1,
			want:    []hostCase{{RoleUnknown, "superseded by timeline 2"}, {RolePrimary, ""}},
		},
		{
			name: "split brain on one timeline answers no primary",
			hosts: func() []Host {
				return []Host{seen("10.0.0.1", false, 0), seen("10.0.0.2", false, 0), seen("10.0.0.3", true, 0)}
			},
			primary: -1,
			want:    []hostCase{{RoleUnknown, "split brain"}, {RoleUnknown, "split brain"}, {RoleReplica, ""}},
		},
		{
			name: "a host of another cluster is set aside",
			hosts: func() []Host {
				foreign := seen("10.0.0.9", false, 0)
				foreign.SystemID = 99
				return []Host{foreign, seen("10.0.0.1", false, 0), seen("10.0.0.2", true, 0)}
			},
			primary: 1,
			want:    []hostCase{{RoleUnknown, "system identifier 99"}, {RolePrimary, ""}, {RoleReplica, ""}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &Cluster{Name: "main", Hosts: tc.hosts()}
			c.Decide(t0, stale, 3)
			if c.SplitBrain != strings.HasPrefix(tc.name, "split brain") {
				t.Errorf("SplitBrain = %v", c.SplitBrain)
			}
			if c.Primary != tc.primary {
				t.Errorf("primary = %d, want %d", c.Primary, tc.primary)
			}
			for i, w := range tc.want {
				h := c.Hosts[i]
				if h.Role != w.role || !strings.Contains(h.Note, w.note) || (w.note == "" && h.Note != "") {
					t.Errorf("host %d: role %v note %q, want %v %q", i, h.Role, h.Note, w.role, w.note)
				}
			}
		})
	}
}

// Synchronous standbys are found by their own pg_stat_replication row: by
// slot, else a unique address, else a unique application name. Rows that
// cannot be told apart and disagree count as synchronous.
func TestSyncStandbyRows(t *testing.T) {
	ip := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	loop := ip("127.0.0.1")
	cases := []struct {
		name      string
		rows      []Standby
		replica   func(h *Host)
		sync, amb bool
	}{
		{"slot decides though names and addresses are shared",
			[]Standby{{Addr: loop, AppName: "walreceiver", Sync: true, Slot: "a"}, {Addr: loop, AppName: "walreceiver", Slot: "b"}},
			func(h *Host) { h.AppName, h.SlotName = "walreceiver", "b" }, false, false},
		{"unique address decides",
			[]Standby{{Addr: ip("10.0.0.2"), AppName: "walreceiver", Sync: true}, {Addr: ip("10.0.0.3"), AppName: "walreceiver"}},
			func(h *Host) { h.AppName = "walreceiver" }, false, false},
		{"unique application name decides",
			[]Standby{{Addr: loop, AppName: "db 2", Sync: true}, {Addr: loop, AppName: "db 3"}},
			func(h *Host) { h.AppName = "db 3" }, false, false},
		{"indistinct rows that disagree lean sync",
			[]Standby{{Addr: loop, AppName: "walreceiver", Sync: true}, {Addr: loop, AppName: "walreceiver"}},
			func(h *Host) { h.AppName = "walreceiver" }, true, true},
		{"indistinct rows that agree are sure",
			[]Standby{{Addr: loop, AppName: "walreceiver"}, {Addr: loop, AppName: "walreceiver"}},
			func(h *Host) { h.AppName = "walreceiver" }, false, false},
		{"not among the rows: cascading, never sync",
			[]Standby{{Addr: loop, AppName: "other", Sync: true}},
			func(h *Host) { h.AppName = "walreceiver" }, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, r := seen("10.0.0.1", false, 0), seen("10.0.0.3", true, 0)
			p.Standbys = tc.rows
			tc.replica(&r)
			c := &Cluster{Name: "main", Hosts: []Host{p, r}}
			c.Decide(t0, stale, 3)
			h := c.Hosts[1]
			if h.Role != RoleReplica || h.Sync != tc.sync || (h.Note != "") != tc.amb {
				t.Fatalf("role %v sync %v note %q, want sync %v ambiguous %v", h.Role, h.Sync, h.Note, tc.sync, tc.amb)
			}
		})
	}
}
