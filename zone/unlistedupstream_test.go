package zone

import (
	"net/netip"
	"strings"
	"testing"
)

// TestUnlistedUpstreamOnTimelineOne: on timeline 1 a replica whose WAL
// receiver streams from a server the cluster does not list may replay
// another writer's branch of timeline 1 (a standby started without
// standby.signal): set aside unless one of the primary's WAL senders is
// its own by slot or name (the primary under another address). A cascade
// from a listed replica is answered while that upstream is; one from an
// upstream set aside so is set aside too; so is a replica whose receiver
// is gone after streaming from an unlisted server.
func TestUnlistedUpstreamOnTimelineOne(t *testing.T) {
	p := seen("10.0.0.1", false, 0x9000)
	direct := seen("10.0.0.2", true, 0x8000)
	direct.AppName = "n2"
	viaVIP := seen("10.0.0.3", true, 0x8000)
	viaVIP.AppName, viaVIP.SenderHost = "n3", "10.0.0.100" // the primary's VIP
	listedCascade := seen("10.0.0.4", true, 0x8000)
	listedCascade.AppName, listedCascade.SenderHost = "n4", "10.0.0.2"
	unlisted := seen("10.0.0.5", true, 0x8000)
	unlisted.AppName, unlisted.SenderHost = "n5", "10.0.0.9" // an unlisted writer of timeline 1, or a relay
	cascadeOfUnlisted := seen("10.0.0.6", true, 0x8000)
	cascadeOfUnlisted.AppName, cascadeOfUnlisted.SenderHost = "n6", "10.0.0.5"
	gone := seen("10.0.0.7", true, 0x8000)
	gone.AppName, gone.Receiver, gone.TimelineExact, gone.TimelineWatched, gone.SenderHost = "", "", false, true, "10.0.0.9"
	gone.AppNameWhy = "it has no WAL receiver"
	p.Standbys = []Standby{{Addr: netip.MustParseAddr("10.0.0.2"), AppName: "n2"}, {Addr: netip.MustParseAddr("10.0.0.3"), AppName: "n3"}}
	c := &Cluster{Name: "main", Hosts: []Host{p, direct, viaVIP, listedCascade, unlisted, cascadeOfUnlisted, gone}}
	c.Decide(t0, stale, 3)
	want := []Aside{NotAside, NotAside, NotAside, NotAside, AsideUnproven, AsideUnproven, AsideUnproven}
	for i, w := range want {
		if h := &c.Hosts[i]; h.Aside != w {
			t.Errorf("%s: aside %v (note %q), want %v", h.Addr, h.Aside, h.Note, w)
		}
	}
	if n := c.Hosts[4].Note; !strings.Contains(n, "streams from 10.0.0.9:5432, which the cluster does not list") ||
		!strings.Contains(n, `the primary has no WAL sender with its application name "n5"`) {
		t.Errorf("note %q", n)
	}
	if n := c.Hosts[6].Note; !strings.HasPrefix(n, "its WAL receiver, gone now, last streamed from 10.0.0.9:5432") {
		t.Errorf("note %q", n)
	}

	// The primary down: its last sample's rows still prove who is its
	// own; the unlisted upstream's followers stay aside. A cluster that
	// never saw a writer (replicas only) is left alone.
	c.Hosts[0].Fails = 3
	c.Decide(t0, stale, 3)
	want = []Aside{NotAside, NotAside, NotAside, NotAside, AsideUnproven, AsideUnproven, AsideUnproven}
	for i, w := range want[1:] {
		if h := &c.Hosts[i+1]; h.Aside != w {
			t.Errorf("primary down: %s: aside %v (note %q), want %v", h.Addr, h.Aside, h.Note, w)
		}
	}
	only := &Cluster{Name: "main", Hosts: []Host{unlisted}}
	only.Decide(t0, stale, 3)
	if h := &only.Hosts[0]; h.Aside != NotAside {
		t.Errorf("replicas-only cluster: aside %v (note %q)", h.Aside, h.Note)
	}

	// On timeline 2 the branch rule (history files, WAL senders) decides,
	// as before.
	c.Hosts[0].Fails = 0
	for i := range c.Hosts {
		c.Hosts[i].Timeline = 2
	}
	c.NewestTimeline = 2
	c.Decide(t0, stale, 3)
	if h := &c.Hosts[3]; h.Aside != AsideUnproven || !strings.Contains(h.Note, "on timeline 2 its branch is unproven") {
		t.Errorf("timeline 2, listed cascade: aside %v (note %q), want the branch rule's", h.Aside, h.Note)
	}
}
