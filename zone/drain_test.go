package zone

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// drainCluster is a primary 10.0.0.1 and replicas .2 (east), .3 (east) and
// .4 (west), all caught up at 0x5000 with small lags, with changes applied
// to each host before the cluster is decided.
func drainCluster(change func(i int, h *Host)) *Snapshot {
	p := seen("10.0.0.1", false, 0x5000)
	p.InsertLSN = 0x5000
	hosts := []Host{p, seen("10.0.0.2", true, 0x5000), seen("10.0.0.3", true, 0x5000), seen("10.0.0.4", true, 0x5000)}
	for i := range hosts {
		hosts[i].Location = "east"
		if i == 3 {
			hosts[i].Location = "west"
		}
		if hosts[i].InRecovery {
			hosts[i].Lag, hosts[i].LagBytes = 5*time.Millisecond, 0
		}
		if change != nil {
			change(i, &hosts[i])
		}
	}
	return cluster(hosts...)
}

func sorted(ips []string) []string {
	slices.Sort(ips)
	return ips
}

// A drained replica leaves every replica name, whatever the filters; the
// others keep answering as before.
func TestDrainedReplicaLeavesEveryReplicaName(t *testing.T) {
	s := drainCluster(func(i int, h *Host) {
		if i == 2 {
			h.DrainSetting = "on"
		}
	})
	if h := s.Clusters[0].Hosts[2]; !h.Drained || h.DrainedBy != DrainBySetting || h.Role != RoleReplica {
		t.Fatalf("host .3: drained %v by %q role %v, want drained by the setting, still a replica", h.Drained, h.DrainedBy, h.Role)
	}
	for name, want := range map[string][]string{
		"replica.db.local.":                         {"10.0.0.2", "10.0.0.4"},
		"prefer-replica.db.local.":                  {"10.0.0.2", "10.0.0.4"},
		"any.db.local.":                             {"10.0.0.1", "10.0.0.2", "10.0.0.4"},
		"lag-50ms.replica.db.local.":                {"10.0.0.2", "10.0.0.4"},
		"bytes-1kb.replica.db.local.":               {"10.0.0.2", "10.0.0.4"},
		"lsn-0-5000.replica.db.local.":              {"10.0.0.2", "10.0.0.4"},
		"dc-east.replica.db.local.":                 {"10.0.0.2"},
		"dc-east.lag-1s.any.db.local.":              {"10.0.0.1", "10.0.0.2"},
		"offline.db.local.":                         {"10.0.0.2", "10.0.0.4"},
		"primary.db.local.":                         {"10.0.0.1"},
		"lsn-0-5000.dc-east.offline.db.local.":      {"10.0.0.2"},
		"lag-1s.bytes-1mb.prefer-replica.db.local.": {"10.0.0.2", "10.0.0.4"},
	} {
		if got := sorted(selectIPs(t, s, name, t0, 0)); !slices.Equal(got, want) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

// A drain is about reads: a drained primary is still answered by primary,
// any and prefer-replica's fallback. When every replica is drained,
// prefer-replica answers the primary and replica nothing.
func TestDrainNeverTakesThePrimaryAway(t *testing.T) {
	s := drainCluster(func(i int, h *Host) { h.DrainSetting = "on" })
	if p := s.Clusters[0].PrimaryHost(); p == nil || !p.Drained {
		t.Fatalf("primary %+v: want a drained primary", p)
	}
	for name, want := range map[string][]string{
		"primary.db.local.":                 {"10.0.0.1"},
		"any.db.local.":                     {"10.0.0.1"},
		"prefer-replica.db.local.":          {"10.0.0.1"},
		"lag-50ms.prefer-replica.db.local.": {"10.0.0.1"},
		"replica.db.local.":                 {},
		"offline.db.local.":                 {},
		"dc-west.replica.db.local.":         {},
	} {
		if got := sorted(selectIPs(t, s, name, t0, 0)); !slices.Equal(got, want) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	// Every replica drained, the primary not: the same answers.
	s = drainCluster(func(i int, h *Host) {
		if h.InRecovery {
			h.DrainSetting = "TRUE"
		}
	})
	if got := selectIPs(t, s, "prefer-replica.db.local.", t0, 0); !slices.Equal(got, []string{"10.0.0.1"}) {
		t.Errorf("prefer-replica with every replica drained = %v, want the primary", got)
	}
	if got := selectIPs(t, s, "replica.db.local.", t0, 0); len(got) != 0 {
		t.Errorf("replica with every replica drained = %v, want none", got)
	}
}

// The setting reads what PostgreSQL takes as a boolean (on, off, yes, no,
// true, false, 1, 0, unambiguous prefixes) in any case; anything
// else counts as off and is said in the host's note. The Patroni tag
// drains too, and a host drained both ways says both.
func TestDrainSettingValues(t *testing.T) {
	for v, want := range map[string]bool{
		"on": true, "ON": true, " true ": true, "1": true, "yes": true, "t": true, "off": false, "False": false, "0": false, "no": false, "": false,
	} {
		s := drainCluster(func(i int, h *Host) {
			if i == 1 {
				h.DrainSetting = v
			}
		})
		if h := s.Clusters[0].Hosts[1]; h.Drained != want || h.Note != "" {
			t.Errorf("pgdns.drain = %q: drained %v note %q, want %v and no note", v, h.Drained, h.Note, want)
		}
	}
	for _, v := range []string{"maybe", "onn", "2", "o", "\x00"} {
		s := drainCluster(func(i int, h *Host) {
			if i == 1 {
				h.DrainSetting, h.OfflineSetting = v, v
			}
		})
		h := s.Clusters[0].Hosts[1]
		if h.Drained || h.Offline || !strings.Contains(h.Note, `pgdns.drain is "`) || !strings.Contains(h.Note, `pgdns.offline is "`) ||
			!strings.Contains(h.Note, "counted as off") {
			t.Errorf("pgdns.drain = %q: drained %v offline %v note %q, want off and both said in the note", v, h.Drained, h.Offline, h.Note)
		}
		if got := sorted(selectIPs(t, s, "replica.db.local.", t0, 0)); !slices.Equal(got, []string{"10.0.0.2", "10.0.0.3", "10.0.0.4"}) {
			t.Errorf("pgdns.drain = %q: replica = %v, want every replica", v, got)
		}
	}
	s := drainCluster(func(i int, h *Host) {
		switch i {
		case 1:
			h.TagNoLoadBalance = true
		case 2:
			h.TagNoLoadBalance, h.DrainSetting = true, "on"
		case 3:
			h.TagNote = `Patroni tag noloadbalance is "no" (a string, not a boolean)`
		}
	})
	c := s.Clusters[0]
	if h := c.Hosts[1]; !h.Drained || h.DrainedBy.String() != "noloadbalance" {
		t.Errorf("tagged host: drained %v by %q", h.Drained, h.DrainedBy)
	}
	if h := c.Hosts[2]; !h.Drained || h.DrainedBy.String() != "pgdns.drain,noloadbalance" {
		t.Errorf("host drained both ways: drained %v by %q", h.Drained, h.DrainedBy)
	}
	if h := c.Hosts[3]; h.Drained || !strings.Contains(h.Note, "noloadbalance") {
		t.Errorf("host with a tag note: drained %v note %q", h.Drained, h.Note)
	}
	if got := selectIPs(t, s, "replica.db.local.", t0, 0); !slices.Equal(got, []string{"10.0.0.4"}) {
		t.Errorf("replica = %v, want only the untagged host", got)
	}
}

// Offline replicas answer only offline, first; the other replicas only
// when no offline one fits; a drained offline replica neither.
func TestOfflineReplicas(t *testing.T) {
	s := drainCluster(func(i int, h *Host) {
		switch i {
		case 2:
			h.OfflineSetting = "on"
			h.Lag = 2 * time.Second
		case 3:
			h.OfflineSetting, h.DrainSetting = "on", "on"
		}
	})
	c := s.Clusters[0]
	if !c.Hosts[2].Offline || c.Hosts[3].Offline || !c.Hosts[3].Drained {
		t.Fatalf("offline %v/%v drained %v: want .3 offline, .4 drained only", c.Hosts[2].Offline, c.Hosts[3].Offline, c.Hosts[3].Drained)
	}
	for name, want := range map[string][]string{
		"offline.db.local.":          {"10.0.0.3"},
		"dc-east.offline.db.local.":  {"10.0.0.3"},
		"lag-50ms.offline.db.local.": {"10.0.0.2"}, // the offline one is too far behind: the others
		"dc-west.offline.db.local.":  {},           // the only west replica is drained
		"replica.db.local.":          {"10.0.0.2"},
		"prefer-replica.db.local.":   {"10.0.0.2"},
		"any.db.local.":              {"10.0.0.1", "10.0.0.2"},
		"primary.db.local.":          {"10.0.0.1"},
	} {
		if got := sorted(selectIPs(t, s, name, t0, 0)); !slices.Equal(got, want) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	// No replica at all fits: offline answers nothing, never the primary.
	s = drainCluster(func(i int, h *Host) { h.Fails = map[bool]int{true: 3}[h.InRecovery] })
	if got := selectIPs(t, s, "offline.db.local.", t0, 0); len(got) != 0 {
		t.Errorf("offline with every replica down = %v, want none", got)
	}
}

// The sync filter passes only replicas proven synchronous by their own
// row, and the primary; anything pgdns cannot tell fails closed with a
// reason.
func TestSyncFilter(t *testing.T) {
	syncRows := func(i int, h *Host) {
		switch i {
		case 0:
			h.SyncNamesSet = true
			h.Standbys = []Standby{{AppName: "n2", Sync: true}, {AppName: "n3"}, {AppName: "n4", Sync: true}}
		default:
			h.AppName = "n" + string(rune('1'+i))
		}
	}
	s := drainCluster(syncRows)
	for name, want := range map[string][]string{
		"sync.replica.db.local.":                {"10.0.0.2", "10.0.0.4"},
		"sync.dc-east.replica.db.local.":        {"10.0.0.2"},
		"sync.lag-50ms.any.db.local.":           {"10.0.0.1", "10.0.0.2", "10.0.0.4"},
		"sync.offline.db.local.":                {"10.0.0.2", "10.0.0.4"},
		"replica.db.local.":                     {"10.0.0.2", "10.0.0.3", "10.0.0.4"},
		"sync.dc-west.prefer-replica.db.local.": {"10.0.0.4"},
	} {
		if got := sorted(selectIPs(t, s, name, t0, 0)); !slices.Equal(got, want) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	whyOf := func(s *Snapshot, name string, host int) string {
		t.Helper()
		return explainName(t, s, name)[host].Why
	}
	if got := whyOf(s, "sync.replica.db.local.", 2); !strings.HasPrefix(got, "not a synchronous standby") {
		t.Errorf("async standby: why %q", got)
	}

	cases := []struct {
		name   string
		change func(i int, h *Host)
		why    string
	}{
		{"two replicas share an application name", func(i int, h *Host) {
			syncRows(i, h)
			if i == 3 {
				h.AppName = "n2"
			}
		}, `sync unknown: its application name "n2" is also`},
		{"the rows are hidden from the probe role", func(i int, h *Host) {
			syncRows(i, h)
			if i == 0 {
				h.StatsHidden = true
			}
		}, "sync unknown: the probe role cannot read the primary's sync_state"},
		{"no primary", func(i int, h *Host) {
			syncRows(i, h)
			if i == 0 {
				h.Fails = 3
			}
		}, "sync unknown: no live primary"},
		{"synchronous_standby_names is empty", func(i int, h *Host) {
			syncRows(i, h)
			if i == 0 {
				h.SyncNamesSet = false
			}
		}, "not a synchronous standby: synchronous_standby_names is empty"},
		{"no row is its own", func(i int, h *Host) {
			syncRows(i, h)
			if i == 1 {
				h.AppName = "elsewhere"
			}
		}, `sync unknown: the primary has no WAL sender with its application name "elsewhere"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := drainCluster(tc.change)
			got := selectIPs(t, s, "sync.replica.db.local.", t0, 0)
			if slices.Contains(got, "10.0.0.2") {
				t.Errorf("sync.replica = %v: .2 answered", got)
			}
			if why := whyOf(s, "sync.replica.db.local.", 1); !strings.HasPrefix(why, tc.why) {
				t.Errorf("why %q, want it to start with %q", why, tc.why)
			}
		})
	}
	// A primary that is stale at the moment of the query: no live primary.
	s = drainCluster(syncRows)
	if got := selectIPs(t, s, "sync.replica.db.local.", t0.Add(time.Hour), 0); len(got) != 0 {
		t.Errorf("sync.replica without a live primary = %v", got)
	}
}

// Why a drained or offline host is left out, for /v1/resolve.
func TestExplainDrainAndOffline(t *testing.T) {
	s := drainCluster(func(i int, h *Host) {
		switch i {
		case 1:
			h.TagNoLoadBalance = true
		case 2:
			h.OfflineSetting = "1"
		}
	})
	for name, want := range map[string][]string{
		"replica.db.local.": {"primary: not a replica", "drained (noloadbalance)", "offline (pgdns.offline): answered only by offline names", ""},
		"offline.db.local.": {"primary: not a replica", "drained (noloadbalance)", "", "not offline: offline replicas fit"},
	} {
		expectVerdicts(t, s, name, want)
	}
}

// A drain or undrain, an offline mark or a standby turning synchronous
// changes the serial; a drained primary does not (its answers are the
// same).
func TestSerialFollowsDrains(t *testing.T) {
	base := drainCluster(nil)
	base.Built = t0
	base.StampSerials(nil)
	for name, change := range map[string]func(i int, h *Host){
		"drain":   func(i int, h *Host) { h.DrainSetting = map[bool]string{true: "on"}[i == 1] },
		"tag":     func(i int, h *Host) { h.TagNoLoadBalance = i == 2 },
		"offline": func(i int, h *Host) { h.OfflineSetting = map[bool]string{true: "on"}[i == 3] },
		"sync": func(i int, h *Host) {
			if i == 0 {
				h.SyncNamesSet, h.Standbys = true, []Standby{{AppName: "n2", Sync: true}}
			}
			if i == 1 {
				h.AppName = "n2"
			}
		},
	} {
		next := drainCluster(change)
		next.Built = t0.Add(time.Second)
		next.StampSerials(base)
		if next.Clusters[0].Serial == base.Clusters[0].Serial {
			t.Errorf("%s: serial stayed %d", name, base.Clusters[0].Serial)
		}
	}
	next := drainCluster(func(i int, h *Host) { h.DrainSetting = map[bool]string{true: "on"}[i == 0] })
	next.Built = t0.Add(time.Second)
	next.StampSerials(base)
	if next.Clusters[0].Serial != base.Clusters[0].Serial {
		t.Errorf("a drained primary changed the serial")
	}
}
