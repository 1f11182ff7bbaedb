package zone

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"
)

var changesT0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// changeHost is a host of "main" at 10.0.0.<n>:5432, probed at changesT0,
// system identifier 7, timeline tl.
func changeHost(n int, inRecovery bool, tl uint32) Host {
	ip := netip.AddrFrom4([4]byte{10, 0, 0, byte(n)})
	return Host{Cluster: "main", Addr: ip.String() + ":5432", IP: ip, Seen: true, ProbedAt: changesT0,
		InRecovery: inRecovery, Timeline: tl, TimelineExact: true, SystemID: 7}
}

// changeSnap decides hosts as cluster main, carrying what prev's cluster
// had learned (identity, newest timeline), as the probe does.
func changeSnap(prev *Snapshot, hosts ...Host) *Snapshot {
	c := &Cluster{Name: "main", Hosts: hosts}
	if prev != nil {
		if was := prev.clusterNamed("main"); was != nil {
			c.Identity, c.NewestTimeline = was.Identity, was.NewestTimeline
		}
	}
	c.Decide(changesT0, time.Second, 3)
	return &Snapshot{Ready: true, Built: changesT0, Clusters: []*Cluster{c}, Default: "main", StaleAfter: time.Second}
}

func downHost(h Host, fails int, class string) Host {
	h.Fails, h.LastError, h.FailClass = fails, "connect: connection refused", class
	return h
}

func staleHost(h Host) Host {
	h.ProbedAt = changesT0.Add(-time.Minute)
	return h
}

func show(chs []Change) string {
	var out []string
	for _, c := range chs {
		s := fmt.Sprintf("%s %s %s", c.Reason, c.Cluster, c.Host)
		if c.Class != "" {
			s += " class=" + c.Class
		}
		if c.From != "" || c.To != "" {
			s += " " + c.From + "->" + c.To
		}
		out = append(out, strings.TrimSpace(s))
	}
	return strings.Join(out, "; ")
}

const (
	p1 = "10.0.0.1:5432"
	r2 = "10.0.0.2:5432"
)

func TestChanges(t *testing.T) {
	p, r := changeHost(1, false, 1), changeHost(2, true, 1)
	start := changeSnap(nil, p, r)
	notReady := &Snapshot{}
	replicaDown := changeSnap(start, p, downHost(r, 3, "not_serving"))
	primaryStale := changeSnap(replicaDown, staleHost(p), downHost(r, 3, "not_serving"))
	promoted := changeSnap(primaryStale, staleHost(p), changeHost(2, false, 2))
	moved := changeSnap(start, changeHost(1, true, 2), changeHost(2, false, 2))
	split := changeSnap(start, p, changeHost(2, false, 1))

	cases := []struct {
		name       string
		prev, next *Snapshot
		want       string
	}{
		{"next not ready", nil, notReady, ""},
		{"first ready snapshot", notReady, start, "identity_settled main  ->7; primary_appeared main " + p1 + " ->" + p1},
		{"nothing changed", start, changeSnap(start, p, r), ""},
		{"a replica goes down", start, replicaDown, "host_down main " + r2 + " class=not_serving"},
		{"down stays down", replicaDown, changeSnap(replicaDown, p, downHost(r, 4, "not_serving")), ""},
		{"the primary goes stale", replicaDown, primaryStale,
			"host_down main " + p1 + " class=stale; primary_vanished main " + p1 + " " + p1 + "->"},
		{"a replica is promoted", primaryStale, promoted,
			"timeline_superseded main " + r2 + " 1->2; primary_appeared main " + r2 + " ->" + r2 + "; host_up main " + r2 + " ->primary"},
		{"a switchover", start, moved, "timeline_superseded main " + r2 + " 1->2; primary_moved main " + r2 + " " + p1 + "->" + r2},
		{"split brain", start, split, "split_brain_began main; primary_vanished main " + p1 + " " + p1 + "->"},
		{"split brain resolved", split, changeSnap(split, p, r), "primary_appeared main " + p1 + " ->" + p1 + "; split_brain_ended main"},
		// A reload: the same hosts in another order, one more that is up
		// (nothing to say) and one more that is down (said).
		{"a reload reorders and adds hosts", start, changeSnap(start, r, changeHost(3, true, 1), p, downHost(changeHost(4, true, 1), 3, "timeout")),
			"host_down main 10.0.0.4:5432 class=timeout"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := show(Changes(c.prev, c.next)); got != c.want {
				t.Errorf("Changes =\n  %s\nwant\n  %s", got, c.want)
			}
		})
	}
	drained := changeHost(2, true, 1)
	drained.DrainSetting = "on"
	drainedDown := downHost(drained, 3, "not_serving")
	drainedDown.DrainSetting = "on" // a down host keeps what it last showed
	for _, c := range []struct {
		name       string
		prev, next *Snapshot
		want       string
	}{
		{"a drain begins", start, changeSnap(start, p, drained), "drain_began main " + r2 + " ->pgdns.drain"},
		{"a drained host goes down and stays drained", changeSnap(start, p, drained), changeSnap(start, p, drainedDown), "host_down main " + r2 + " class=not_serving"},
		{"a drain ends", changeSnap(start, p, drained), start, "drain_ended main " + r2 + " pgdns.drain->"},
		{"drained at the start", notReady, changeSnap(nil, p, drained),
			"identity_settled main  ->7; primary_appeared main " + p1 + " ->" + p1 + "; drain_began main " + r2 + " ->pgdns.drain"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := show(Changes(c.prev, c.next)); got != c.want {
				t.Errorf("Changes =\n  %s\nwant\n  %s", got, c.want)
			}
		})
	}
	// The split brain's vanished primary says why.
	for _, ch := range Changes(start, split) {
		if ch.Reason == PrimaryVanished && ch.Detail != "split brain: "+p1+","+r2 {
			t.Errorf("primary_vanished detail %q, want the split brain and its hosts", ch.Detail)
		}
	}
}

// A cluster whose identity is replaced says both.
func TestChangesIdentityReplaced(t *testing.T) {
	prev := changeSnap(nil, changeHost(1, false, 1))
	next := changeSnap(nil, changeHost(1, false, 1))
	next.Clusters[0].Identity = 9
	chs := Changes(prev, next)
	if len(chs) != 1 || chs[0].Reason != IdentitySettled || chs[0].From != "7" || chs[0].To != "9" || chs[0].Detail == "" {
		t.Fatalf("Changes = %+v, want one identity_settled 7->9 saying it was replaced", chs)
	}
}

// BenchmarkChanges compares two snapshots of a thousand hosts that did
// not change: the probe does it on every publish.
func BenchmarkChanges(b *testing.B) {
	var hosts []Host
	hosts = append(hosts, changeHost(1, false, 1))
	for i := 2; i <= 1000; i++ {
		h := changeHost(i%250+2, true, 1)
		h.Addr = fmt.Sprintf("10.0.%d.%d:5432", i/250, i%250)
		hosts = append(hosts, h)
	}
	prev := changeSnap(nil, hosts...)
	next := changeSnap(prev, hosts...)
	b.ReportAllocs()
	for b.Loop() {
		if len(Changes(prev, next)) != 0 {
			b.Fatal("changes between equal snapshots")
		}
	}
}

// An offline mark and a proven synchronous standby change role answers
// (and the serial), so each beginning and end is a change (review S6:
// neither was reported).
func TestChangesOfflineAndSync(t *testing.T) {
	p, r := changeHost(1, false, 1), changeHost(2, true, 1)
	r.AppName = "r2"
	r.Receiver, r.SenderHost, r.SenderPort = "streaming", p.IP.String(), 5432 // streams from the primary
	start := changeSnap(nil, p, r)
	offline := r
	offline.OfflineSetting = "on"
	offlineDown := downHost(offline, 3, "not_serving")
	drainedOffline := offline
	drainedOffline.DrainSetting = "on"
	syncP := p
	syncP.SyncNamesSet, syncP.Standbys = true, []Standby{{AppName: "r2", Sync: true}}
	asyncP := syncP
	asyncP.Standbys = []Standby{{AppName: "r2"}}
	synced := changeSnap(start, syncP, r)
	for _, c := range []struct {
		name       string
		prev, next *Snapshot
		want       string
	}{
		{"a replica is marked offline", start, changeSnap(start, p, offline), "offline_began main " + r2},
		{"offline goes down and stays offline", changeSnap(start, p, offline), changeSnap(start, p, offlineDown), "host_down main " + r2 + " class=not_serving"},
		{"the offline mark ends", changeSnap(start, p, offline), start, "offline_ended main " + r2},
		{"a drain wins over offline", changeSnap(start, p, offline), changeSnap(start, p, drainedOffline),
			"drain_began main " + r2 + " ->pgdns.drain; offline_ended main " + r2},
		{"offline at the start", &Snapshot{}, changeSnap(nil, p, offline),
			"identity_settled main  ->7; primary_appeared main " + p1 + " ->" + p1 + "; offline_began main " + r2},
		{"a replica becomes a synchronous standby", start, synced, "sync_began main " + r2},
		{"nothing changed in sync", synced, changeSnap(start, syncP, r), ""},
		{"the standby turns asynchronous", synced, changeSnap(start, asyncP, r), "sync_ended main " + r2},
		{"the sync standby goes down", synced, changeSnap(start, syncP, downHost(r, 3, "not_serving")),
			"host_down main " + r2 + " class=not_serving; sync_ended main " + r2},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := show(Changes(c.prev, c.next)); got != c.want {
				t.Errorf("Changes =\n  %s\nwant\n  %s", got, c.want)
			}
		})
	}
	for _, ch := range Changes(synced, changeSnap(start, asyncP, r)) {
		if ch.Detail != "not a synchronous standby: its WAL sender's sync_state is neither sync nor quorum" {
			t.Errorf("sync_ended detail %q, want the replica's SyncWhy", ch.Detail)
		}
	}
}
