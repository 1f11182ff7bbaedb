package probe

import (
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/zone"
)

// What keeps a large fleet's aggregator from falling behind for good
// (issue 28): a change seen at every cluster at once puts only a few in
// flux, and clusters whose hosts all aged out are not built again at every
// publish.

// A primary lost at every cluster at once (as when pgdns itself stalled
// and its hosts aged out together) puts the clusters in flux only up to
// fluxMaxHosts hosts: every cluster's hosts probed a hundred times a
// second was a hundredfold the configured rate.
func TestFluxAcrossTheFleetIsBounded(t *testing.T) {
	f := newFleetOnClock(t, 100, 3, stepClock())
	for ci := range 100 {
		r := f.result(ci, 0, true)
		r.err = ErrNotServing
		f.p.take(r)
	}
	f.p.publish()
	changed, inFlux, hosts := 0, 0, 0
	for ci, c := range f.p.last.Clusters {
		if c.Primary < 0 {
			changed++
		}
		if f.p.flux[ci].active {
			inFlux++
			hosts += len(c.Hosts)
		}
	}
	if changed != 100 {
		t.Fatalf("%d of 100 clusters lost their primary, want all", changed)
	}
	if inFlux == 0 || hosts > fluxMaxHosts+3 {
		t.Errorf("%d clusters (%d hosts) in flux at once, want some and at most %d hosts", inFlux, hosts, fluxMaxHosts+3)
	}
	if f.p.fluxActive != inFlux || f.p.fluxHosts != hosts {
		t.Errorf("counted %d clusters, %d hosts in flux; there are %d, %d", f.p.fluxActive, f.p.fluxHosts, inFlux, hosts)
	}
}

// Clusters whose hosts all aged out are built again an interval later or
// at their next result, not at every publish: with every host of a
// thousand clusters down by age, a publish after one cluster's result
// rebuilt all thousand (about 11,000 allocations).
func TestPublishWithTheFleetDownByAge(t *testing.T) {
	f := newFleetOnClock(t, 1000, 3, stepClock())
	later := time.Now().Add(f.p.cfg.StaleAfter() + time.Hour)
	f.p.now = func() time.Time { return later }
	f.p.publish()
	for _, c := range f.p.last.Clusters {
		for hi := range c.Hosts {
			if c.Hosts[hi].Role != zone.RoleDown {
				t.Fatalf("cluster %s host %s: %v, want down by age", c.Name, c.Hosts[hi].Addr, c.Hosts[hi].Role)
			}
		}
	}
	ci := 0
	allocs := testkit.FewestAllocs(50, 40, func() {
		f.p.take(f.result(ci, 1, false))
		f.p.publish()
		ci = (ci + 1) % 1000
	})
	if allocs > 40 {
		t.Fatalf("a publish with one cluster changed allocated %.0f times at 1000 clusters down by age, want at most 40", allocs)
	}
	// An interval on, their notes say the time since: built again.
	before := f.p.last.Clusters[500]
	later = later.Add(f.p.cfg.Interval + time.Millisecond)
	f.p.publish()
	if c := f.p.last.Clusters[500]; c == before || c.Hosts[0].Note == before.Hosts[0].Note {
		t.Errorf("a cluster down by age was not built again an interval later: note %q, was %q", c.Hosts[0].Note, before.Hosts[0].Note)
	}
}
