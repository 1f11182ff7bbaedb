package zone

import (
	"net/netip"
	"strings"
	"testing"
)

// A replica whose WAL receiver streams from another listed host seen in
// recovery is provably asynchronous: PostgreSQL makes only the primary's
// own WAL senders synchronous (review 5, F8: with one direct standby
// synchronous, "replicas: async" counted every cascading replica sync
// unknown, and replica.db.local was empty). Everything else unknown stays
// unknown, and /v1/resolve says "sync unknown" for it.
func TestCascadingReplicaIsAsync(t *testing.T) {
	cases := []struct {
		name     string
		setup    func(p, up, r *Host)
		sync     bool
		why      string
		resolved string // the /v1/resolve reason of replica.db.local, "" when answered
	}{
		{"cascading from a listed standby", func(p, up, r *Host) {}, false,
			"not a synchronous standby: its WAL receiver streams from 10.0.0.2:5432, a standby", ""},
		{"by the standby's configured name", func(p, up, r *Host) { up.Addr, r.SenderHost = "db2.example:5432", "DB2.example" }, false,
			"not a synchronous standby: its WAL receiver streams from db2.example:5432, a standby", ""},
		{"the standby is down", func(p, up, r *Host) { up.Fails = 3 }, true,
			"sync unknown: its WAL receiver streams from 10.0.0.2:5432, not from the primary",
			"sync unknown: its WAL receiver streams from 10.0.0.2:5432, not from the primary 10.0.0.1:5432; counted as synchronous (replicas: async)"},
		{"another port of the standby's address", func(p, up, r *Host) {
			// The primary's WAL sender on its name: that port may be a
			// proxy to the primary. Without it the replica, on timeline 1,
			// streams from a server the cluster does not list and is set
			// aside (setAsideUnlistedUpstream).
			r.SenderPort = 5433
			p.Standbys = append(p.Standbys, Standby{AppName: "n3"})
		}, true,
			"sync unknown: its WAL receiver streams from 10.0.0.2:5433", ""},
		{"its receiver not streaming", func(p, up, r *Host) { r.Receiver = "waiting" }, true, "sync unknown: its WAL receiver is \"waiting\"", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, up, r := seen("10.0.0.1", false, 0), seen("10.0.0.2", true, 0), seen("10.0.0.3", true, 0)
			p.SyncNamesSet = true
			p.Standbys = []Standby{{Addr: netip.MustParseAddr("10.0.0.2"), AppName: "n2", Sync: true}}
			up.AppName = "n2"
			r.AppName, r.SenderHost = "n3", "10.0.0.2"
			tc.setup(&p, &up, &r)
			c := &Cluster{Name: "main", Hosts: []Host{p, up, r}, AsyncOnly: true}
			c.Decide(t0, stale, 3)
			h := c.Hosts[2]
			if h.Role != RoleReplica || h.Sync != tc.sync || h.SyncUnsure != tc.sync || h.SyncProven || !strings.HasPrefix(h.SyncWhy, tc.why) {
				t.Fatalf("role %v sync %v unsure %v proven %v why %q; want sync %v, why %q", h.Role, h.Sync, h.SyncUnsure, h.SyncProven, h.SyncWhy, tc.sync, tc.why)
			}
			if tc.name == "cascading from a listed standby" && !c.Hosts[1].Sync {
				t.Errorf("the direct synchronous standby is not counted synchronous")
			}
			s := &Snapshot{Ready: true, Clusters: []*Cluster{c}, Default: "main", StaleAfter: stale}
			v := explainName(t, s, "replica.db.local.")[2]
			switch {
			case !tc.sync && !v.Selected:
				t.Errorf("replica.db.local leaves the cascading replica out: %q", v.Why)
			case tc.sync && v.Selected:
				t.Errorf("replica.db.local answers a replica of unknown sync state")
			case tc.sync && !strings.HasPrefix(v.Why, "sync unknown: ") || tc.resolved != "" && v.Why != tc.resolved:
				t.Errorf("its reason is %q, want it to say sync unknown (%q)", v.Why, tc.resolved)
			}
		})
	}
}
