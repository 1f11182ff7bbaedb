package probe

import (
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/zone"
)

// copySnapshot copies s deeply enough to tell later whether anything of
// it was modified: its clusters and their hosts.
func copySnapshot(s *zone.Snapshot) []zone.Cluster {
	var out []zone.Cluster
	for _, c := range s.Clusters {
		cc := *c
		cc.Hosts = slices.Clone(c.Hosts)
		out = append(out, cc)
	}
	return out
}

// A publish shares the clusters nothing changed with the snapshot before,
// builds the others anew, and never modifies a snapshot once published:
// a reader holding one (the DNS fast path, /v1/hosts, the status page)
// reads it while later ones are built (run with -race).
func TestPublishSharesUnchangedClusters(t *testing.T) {
	f := newBenchFleet(t, 3, 3)
	first := f.p.last
	kept := copySnapshot(first)

	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() { // a reader of the first snapshot, as answers read it
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, c := range first.Clusters {
				_ = c.Serial
				for i := range c.Hosts {
					_, _, _, _ = c.Hosts[i].Role, c.Hosts[i].Lag, c.Hosts[i].ReplayLSN, c.Hosts[i].Note
				}
			}
		}
	}()
	for range 50 {
		f.round(1, func(r result) { f.p.take(r) })
		f.p.publish()
	}
	close(stop)
	wg.Wait()

	last := f.p.last
	if last.Clusters[0] != first.Clusters[0] || last.Clusters[2] != first.Clusters[2] {
		t.Error("clusters without a result were built anew, not shared")
	}
	if last.Clusters[1] == first.Clusters[1] {
		t.Fatal("the cluster with results was not built anew")
	}
	if got := last.Clusters[1].Hosts[1].ReplayLSN; got <= kept[1].Hosts[1].ReplayLSN {
		t.Errorf("the new build has replay %v, not past %v", got, kept[1].Hosts[1].ReplayLSN)
	}
	if !reflect.DeepEqual(copySnapshot(first), kept) {
		t.Error("a published snapshot was modified by later publishes")
	}
	if ch := zone.Changes(first, last); len(ch) != 0 {
		t.Errorf("changes between snapshots of steady clusters: %v", ch)
	}
	for ci, c := range last.Clusters {
		if c.Serial != kept[ci].Serial {
			t.Errorf("cluster %s: serial %d, was %d, and its role answers did not change", c.Name, c.Serial, kept[ci].Serial)
		}
	}
}

// A cluster that has no result keeps being shared only while its build
// holds by the clock: once its hosts' last good probes are older than
// StaleAfter, the next publish has them down, as if every cluster were
// built anew (a host whose probes all hang leaves the answers in time).
func TestPublishAgesSharedClusters(t *testing.T) {
	f := newBenchFleet(t, 3, 3)
	later := time.Now().Add(f.p.cfg.StaleAfter() + time.Second)
	f.p.now = func() time.Time { return later }
	f.round(1, func(r result) {
		r.sample.Start, r.sample.End, r.started = later, later, later
		f.p.take(r)
	})
	f.p.publish()
	for ci, c := range f.p.last.Clusters {
		for hi := range c.Hosts {
			h := &c.Hosts[hi]
			if want := ci != 1; (h.Role == zone.RoleDown) != want {
				t.Errorf("cluster %s host %s: %v (%s), want down=%v", c.Name, h.Addr, h.Role, h.Note, want)
			}
		}
	}
	// Down by age, its note counts the time: built again at each publish.
	before := f.p.last.Clusters[0]
	later = later.Add(time.Second)
	f.p.publish()
	if c := f.p.last.Clusters[0]; c == before || c.Hosts[0].Note == before.Hosts[0].Note {
		t.Errorf("a cluster down by age was not built again: note %q, was %q", c.Hosts[0].Note, before.Hosts[0].Note)
	}
}

// A publish after one cluster's round costs that cluster, not the fleet:
// at a thousand clusters every host was copied, decided and compared on
// each publish (about 11,000 allocations; 24 ms at ten thousand hosts).
func TestPublishAllocationsDoNotGrowWithTheFleet(t *testing.T) {
	f := newFleetOnClock(t, 1000, 3, stepClock()) // no host ages while measured, however loaded the machine
	ci := 0
	allocs := testkit.FewestAllocs(50, 40, func() {
		f.p.take(f.result(ci, 1, false))
		f.p.publish()
		ci = (ci + 1) % 1000
	})
	if allocs > 40 {
		t.Fatalf("a publish with one cluster changed allocated %.0f times at 1000 clusters, want at most 40", allocs)
	}
}

// What a publish looks at after one cluster's round is that cluster, not
// the fleet: at ten thousand hosts (3,334 clusters) every publish went
// through every cluster four times (building, flux, the two logs, and in
// zone the serials and changes), 173 us a publish against 22 at a
// thousand hosts (BenchmarkAggregator), so the aggregator's cost per probe
// grew with the fleet. The looks are counted (dirtyClusters.looked); a
// publish made to look at every cluster, as each did before, counts them
// all, which is what this test fails on.
func TestPublishLooksAtWhatChanged(t *testing.T) {
	for _, clusters := range []int{100, 3334} {
		f := newFleetOnClock(t, clusters, 3, stepClock())
		looked, built := f.p.dirty.looked, f.p.dirty.built
		const publishes = 30
		for i := range publishes {
			f.round(i*7%clusters, func(r result) { f.p.take(r) })
			f.p.publish()
		}
		perLook := float64(f.p.dirty.looked-looked) / publishes
		perBuild := float64(f.p.dirty.built-built) / publishes
		if perBuild != 1 || perLook > 4 {
			t.Errorf("%d clusters: a publish after one cluster's round built %.1f clusters and looked at %.1f, want 1 and at most 4 (building, flux, two logs)",
				clusters, perBuild, perLook)
		}
		if changed, ok := f.p.last.ChangedSince(nil); ok || changed != nil {
			t.Errorf("a snapshot says it was built on none: %v", changed)
		}
		// The full look, as after an adoption, is the fleet: the count
		// above would show a publish that made it every time.
		looked = f.p.dirty.looked
		f.p.dirty.all = true
		f.p.publish()
		if n := f.p.dirty.looked - looked; n < clusters {
			t.Errorf("%d clusters: a publish that looks at all of them counted %d", clusters, n)
		}
	}
}

// With a state file (Hooks.Learned), what p remembers is compared after
// a publish with the last report for the clusters built since, not for
// the fleet: every publish compared every cluster's timelines, branches
// and forks (3,334 clusters looked at a publish at 3,334 clusters, which
// this test fails on). Running writers' positions still go out once
// positionsEvery has passed, those of the clusters whose writers moved
// looked at then; and another change is reported at once.
func TestReportLooksAtWhatWasBuilt(t *testing.T) {
	const clusters = 3334
	f := newFleetOnClock(t, clusters, 3, stepClock())
	var reports []map[string]Remembered
	f.p.cfg.Hooks.Learned = func(r map[string]Remembered) { reports = append(reports, r) }
	f.p.active.Store(true)
	t0 := time.Now()
	f.p.report(false, t0) // the first report: everything
	if len(reports) != 1 || len(reports[0]) != clusters {
		t.Fatalf("the first report: %d reports", len(reports))
	}
	looks := f.p.dirty.looks
	const publishes = 30
	for i := range publishes {
		f.round(i*7%clusters, func(r result) { f.p.take(r) })
		f.p.publish()
		f.p.report(false, t0.Add(time.Duration(i)*time.Millisecond))
	}
	if per := float64(f.p.dirty.looks-looks) / publishes; per > 2 {
		t.Errorf("a report after one cluster's round looked at %.1f clusters, want at most 2", per)
	}
	if len(reports) != 1 {
		t.Fatalf("rounds moving running writers only were reported %d times within positionsEvery", len(reports)-1)
	}
	// positionsEvery later: the writers that moved are reported.
	looks = f.p.dirty.looks
	f.p.report(false, t0.Add(f.p.positionsEvery()))
	if len(reports) != 2 {
		t.Fatalf("positionsEvery after the first report, the moved writers' positions were not reported (%d reports)", len(reports))
	}
	if n := f.p.dirty.looks - looks; n > publishes {
		t.Errorf("the positions' report looked at %d clusters, want at most the %d that moved", n, publishes)
	}
	for tl, b := range f.p.branches[7] {
		if got := reports[1]["c7"].Branches[tl]; got.Last != b.Last || got.Insert != b.Insert {
			t.Errorf("c7's timeline %d reported at %v/%v, its writer is at %v/%v", tl, got.Last, got.Insert, b.Last, b.Insert)
		}
	}
	// A forgotten timeline history is what a cluster remembers: at once.
	f.p.timelines[11][1] = timelineHistory{ends: []zone.TimelineEnd{{Timeline: 1}}}
	f.p.markRebuild(11)
	f.p.publish()
	f.p.report(false, t0.Add(f.p.positionsEvery()+time.Millisecond))
	if len(reports) != 3 {
		t.Errorf("a cluster's changed timeline history was not reported (%d reports)", len(reports))
	}
}

// A cluster built by the clock (its build stopped holding, no result
// came) is built at the publish after its moment and not before; a result
// of it meanwhile rebuilds it once.
func TestPublishBuildsByTheClockOnly(t *testing.T) {
	f := newBenchFleet(t, 50, 3)
	at := time.Now()
	f.p.now = func() time.Time { return at }
	built := f.p.dirty.built
	f.p.publish()
	if n := f.p.dirty.built - built; n != 0 {
		t.Fatalf("a publish with nothing changed and nothing aged built %d clusters", n)
	}
	at = at.Add(f.p.cfg.StaleAfter() + time.Second)
	f.round(3, func(r result) {
		r.sample.Start, r.sample.End, r.started = at, at, at
		f.p.take(r)
	})
	built = f.p.dirty.built
	f.p.publish()
	if n := f.p.dirty.built - built; n != 50 {
		t.Errorf("every cluster aged or had a result: %d of 50 built", n)
	}
	for ci, c := range f.p.last.Clusters {
		if down := c.Hosts[1].Role == zone.RoleDown; down != (ci != 3) {
			t.Errorf("cluster %s: host %s %v (%s)", c.Name, c.Hosts[1].Addr, c.Hosts[1].Role, c.Hosts[1].Note)
		}
	}
}

// A result is held for the round under way only when it changes no
// answer: a drain or offline setting that changed, or one now hidden by a
// role or database setting, and a host back from down by age, are
// published at once, as the other changes of an answer's membership are.
func TestSteadyResults(t *testing.T) {
	f := newBenchFleet(t, 2, 3)
	if r := f.result(0, 1, false); !f.p.steady(r) {
		t.Fatal("a replica's newer position is not steady")
	}
	for name, change := range map[string]func(*Sample){
		"drain":    func(s *Sample) { s.DrainSetting = "on" },
		"offline":  func(s *Sample) { s.OfflineSetting = "on" },
		"shadowed": func(s *Sample) { s.SettingShadowed = "ALTER ROLE pgdns SET pgdns.drain" },
	} {
		r := f.result(0, 1, false)
		change(&r.sample)
		if f.p.steady(r) {
			t.Errorf("%s: a changed setting held as steady", name)
		}
	}
	later := time.Now().Add(f.p.cfg.StaleAfter() + time.Second)
	f.p.now = func() time.Time { return later }
	f.p.publish()
	if h := f.p.last.Clusters[1].Hosts[2]; h.Role != zone.RoleDown {
		t.Fatalf("host not down by age: %v", h.Role)
	}
	if r := f.result(1, 2, false); f.p.steady(r) {
		t.Error("a host back from down by age held as steady")
	}
}

// The expiries' heap gives its entries back earliest first, whatever the
// order they came in, equal moments included.
func TestExpiryHeapGivesTheEarliestFirst(t *testing.T) {
	base := time.Unix(1_000_000, 0)
	var h expiryHeap
	offsets := []int{5, 3, 9, 3, 0, 7, 1, 8, 2, 6, 4, 9, 0}
	for i, o := range offsets {
		h.push(expiry{until: base.Add(time.Duration(o) * time.Second), cluster: i})
	}
	var got []int
	for len(h) > 0 {
		got = append(got, int(h.pop().until.Sub(base)/time.Second))
	}
	want := slices.Sorted(slices.Values(offsets))
	if !slices.Equal(got, want) {
		t.Fatalf("popped %v, want %v", got, want)
	}
}

// Building a cluster for a publish (build.go) allocates the cluster with
// its hosts' array in one piece (newBuilt), and nothing else when nothing
// of it changed but its positions: a cluster is built about once a round,
// at a thousand hosts every 250 ms some 1,300 builds a second. It was two
// allocations (the cluster, then a copy of its hosts).
func TestBuildAllocatesOnce(t *testing.T) {
	f := newFleetOnClock(t, 4, 3, stepClock())
	stale := f.p.cfg.StaleAfter()
	var c *zone.Cluster
	allocs := testing.AllocsPerRun(100, func() { c = f.p.build(1, f.p.now(), stale, false) })
	if allocs != 1 {
		t.Fatalf("a build of a cluster of 3 allocated %.0f times, want 1", allocs)
	}
	if len(c.Hosts) != 3 || c.Primary != 0 || c.Hosts[0].Addr != f.p.state[1].Hosts[0].Addr || c.Hosts[2].Role != zone.RoleReplica {
		t.Fatalf("the build is not the cluster's: %d hosts, primary %d, %+v", len(c.Hosts), c.Primary, c.Hosts)
	}
}
