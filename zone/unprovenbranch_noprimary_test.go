package zone_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/zone"
	"github.com/pgdns/pgdns/zone/zonetest"
)

// A replica on timeline 2 or later whose branch nothing proves the
// primary's (no history file readable, no WAL sender row of the primary
// its own: a probe role with pg_monitor but without pg_read_file, and a
// replica of another writer pgdns never saw, streaming from an unlisted
// upstream) is set aside as branch_unproven while the primary is
// answered, and stays aside while no primary is answered: the primary
// shutting down (smart, sessions lingering) or down. Before, the branch
// rule did nothing without a primary, and replica answered it the moment
// the primary stopped being answered (helper 01's finding).
func TestUnprovenBranchStaysAsideWithoutAPrimary(t *testing.T) {
	build := func(mod func(p, own, other *zone.Host)) *zone.Cluster {
		p := zonetest.Host("10.0.0.1", false, 0x9000, zonetest.T0)
		own := zonetest.Host("10.0.0.2", true, 0x9000, zonetest.T0)
		other := zonetest.Host("10.0.0.3", true, 0x8000, zonetest.T0)
		p.Timeline, own.Timeline, other.Timeline = 2, 2, 2
		own.AppName, own.Receiver, own.SenderHost, own.SenderPort = "n2", "streaming", "10.0.0.1", 5432
		other.AppName, other.Receiver, other.SenderHost, other.SenderPort = "n3", "streaming", "10.0.0.9", 5432
		p.Standbys = []zone.Standby{{Addr: own.IP, AppName: "n2"}}
		if mod != nil {
			mod(&p, &own, &other)
		}
		c := zonetest.Cluster("main", p, own, other)
		c.Identity, c.NewestTimeline = zonetest.SystemID, 2 // remembered: a down primary's, or a replica's receiver's, lost since
		return c
	}
	replicas := func(t *testing.T, c *zone.Cluster) []string {
		t.Helper()
		s := zonetest.Ready(zonetest.T0, 1750*time.Millisecond, c)
		q, err := zone.Parse("replica.db.local.", "db.local.")
		if err != nil {
			t.Fatal(err)
		}
		hosts, err := zone.View{Snap: s, Now: zonetest.T0}.Select(&q, nil)
		if err != nil {
			t.Fatal(err)
		}
		ips := []string{}
		for _, h := range hosts {
			ips = append(ips, h.IP.String())
		}
		slices.Sort(ips)
		return ips
	}
	for _, tc := range []struct {
		name, why string
		mod       func(p, own, other *zone.Host)
	}{
		{"primary answered", "", nil},
		{"primary stopping", "no primary is answered to prove it; 10.0.0.1:5432, the last writer of timeline 2, is shutting down",
			func(p, _, _ *zone.Host) { p.Stopping = true }},
		{"primary down, its replica still streaming from it", "no primary is answered to prove it; 10.0.0.1:5432, the last writer of timeline 2, is down",
			func(p, _, _ *zone.Host) { p.Fails = 3 }},
		// Receivers gone (each seen streaming timeline 2 in this server
		// run: TimelineWatched): the one that streamed from the down
		// primary is its replica; the one that streamed from the unlisted
		// upstream is not, nor is one the probe never saw stream.
		{"primary down, its replica's receiver gone", "no primary is answered to prove it; 10.0.0.1:5432, the last writer of timeline 2, is down",
			func(p, own, _ *zone.Host) { p.Fails = 3; receiverGone(own, true) }},
		{"primary down, both receivers gone", "no primary is answered to prove it; 10.0.0.1:5432, the last writer of timeline 2, is down",
			func(p, own, other *zone.Host) { p.Fails = 3; receiverGone(own, true); receiverGone(other, true) }},
		{"primary down, both receivers gone, the other's never seen streaming", "",
			func(p, own, other *zone.Host) { p.Fails = 3; receiverGone(own, true); receiverGone(other, false) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := build(tc.mod)
			got := replicas(t, c)
			if want := []string{"10.0.0.2"}; !slices.Equal(got, want) {
				t.Errorf("replica.db.local answered %v, want %v", got, want)
			}
			h := c.Hosts[2]
			if h.Aside != zone.AsideUnproven || tc.why != "" && (!strings.Contains(h.Note, "its branch is unproven") ||
				!strings.Contains(h.Note, "10.0.0.9:5432") && h.Receiver != "") || !strings.Contains(h.Note, tc.why) {
				t.Errorf("10.0.0.3: %v, aside %v (%s)", h.Role, h.Aside, h.Note)
			}
			if h := c.Hosts[1]; h.Aside != zone.NotAside || h.Role != zone.RoleReplica {
				t.Errorf("10.0.0.2, the primary's own: %v, aside %v (%s)", h.Role, h.Aside, h.Note)
			}
		})
	}

	// Proven replicas of a down primary stay answered: history files that
	// agree with its last sample's, or its receiver still streaming from
	// it. One of a writer on no timeline of its own (never seen since
	// pgdns started) is judged by its upstream: a listed host may be that
	// writer, an unlisted one is a server pgdns never saw.
	proven := build(func(p, own, other *zone.Host) {
		p.Fails, p.Standbys = 3, nil
		p.OwnHistory = []zone.TimelineEnd{{Timeline: 1, End: 0x4000}}
		other.OwnHistory, other.SenderHost = p.OwnHistory, "10.0.0.8"
	})
	if got := replicas(t, proven); !slices.Equal(got, []string{"10.0.0.2", "10.0.0.3"}) {
		t.Errorf("proven replicas of a down primary: replica answered %v (%s; %s)", got, proven.Hosts[1].Note, proven.Hosts[2].Note)
	}
	unseen := build(func(p, _, _ *zone.Host) { *p = zone.Host{Addr: p.Addr, IP: p.IP, Port: p.Port} })
	unseen.Identity, unseen.NewestTimeline = zonetest.SystemID, 2
	if got := replicas(t, unseen); !slices.Equal(got, []string{"10.0.0.2"}) {
		t.Errorf("primary never seen: replica answered %v (%s)", got, unseen.Hosts[2].Note)
	}
	if h := unseen.Hosts[2]; h.Aside != zone.AsideUnproven || !strings.Contains(h.Note, "which the cluster does not list") {
		t.Errorf("primary never seen, 10.0.0.3: aside %v (%s)", h.Aside, h.Note)
	}
	// Its receiver gone since, the timeline watched: it last streamed from
	// the unlisted host, and nothing tells more now. Before, it was
	// answered the moment its receiver stopped (the unlisted upstream, a
	// DR site's writer, went down), on that server's branch.
	unseenGone := build(func(p, _, other *zone.Host) {
		*p = zone.Host{Addr: p.Addr, IP: p.IP, Port: p.Port}
		receiverGone(other, true)
	})
	unseenGone.Identity, unseenGone.NewestTimeline = zonetest.SystemID, 2
	if got := replicas(t, unseenGone); !slices.Equal(got, []string{"10.0.0.2"}) {
		t.Errorf("primary never seen, the other's receiver gone: replica answered %v (%s)", got, unseenGone.Hosts[2].Note)
	}
	if h := unseenGone.Hosts[2]; h.Aside != zone.AsideUnproven || !strings.Contains(h.Note, "last streamed from 10.0.0.9:5432, which the cluster does not list") {
		t.Errorf("primary never seen, 10.0.0.3's receiver gone: aside %v (%s)", h.Aside, h.Note)
	}
	// A replica that last streamed from a listed host (the writer, or a
	// relay) is answered, its receiver gone or not.
	listedGone := build(func(p, own, _ *zone.Host) {
		*p = zone.Host{Addr: p.Addr, IP: p.IP, Port: p.Port}
		receiverGone(own, true)
	})
	listedGone.Identity, listedGone.NewestTimeline = zonetest.SystemID, 2
	if got := replicas(t, listedGone); !slices.Equal(got, []string{"10.0.0.2"}) {
		t.Errorf("primary never seen, its replica's receiver gone: replica answered %v (%s)", got, listedGone.Hosts[1].Note)
	}
}

// receiverGone makes h a replica whose WAL receiver stopped (its timeline
// a lower bound, its application name unknown), watched streaming it
// earlier in the same server run from where its receiver was connected
// when watched is true.
func receiverGone(h *zone.Host, watched bool) {
	h.Receiver, h.TimelineExact, h.TimelineWatched = "", false, watched
	if !watched {
		h.SenderHost, h.SenderPort = "", 0
	}
	h.AppName, h.AppNameWhy = "", "it has no WAL receiver"
}
