package zone

import (
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
