package probe

import (
	"errors"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/zone"
)

// A publish made while a cluster's round is under way (another cluster's
// result, the hold's end) leaves that cluster as the last snapshot has it
// when only steady results marked it, and builds it once the round has
// closed, with every sample of the round: one build a round, not one per
// publish the round spans (at ten thousand hosts every 1s, 1.8 builds a
// round, three quarters of the bytes pgdns allocated: issue 28). A round
// that does not close is built once holdMax has passed since its first
// result was taken, and a result that is not steady (a failure) is built
// at the next publish, as before.
func TestPublishBuildsARoundOnce(t *testing.T) {
	f := slowFleet(t)
	round := func(publishBetween func()) {
		f.round(0, func(r result) {
			f.p.take(r)
			publishBetween()
		})
	}
	// Results of cluster 1 keep coming, each followed by a publish, as
	// at a fleet whose publishes fall inside every round.
	other := func() {
		f.p.take(f.result(1, 1, false))
		f.p.publish()
	}
	round(other) // the first round opens on a snapshot that knows the primary
	for range 3 {
		before := f.p.last.Clusters[0]
		built := f.p.dirty.built
		var seen []uint64
		round(func() {
			other()
			seen = append(seen, uint64(f.p.state[0].Hosts[0].InsertLSN))
		})
		// Each publish built cluster 1; cluster 0 once, at the end.
		if n := f.p.dirty.built - built; n != 4+1 {
			t.Fatalf("a round of 4 results with a publish after each built %d clusters, want 4 of cluster 1 and 1 of cluster 0", n)
		}
		c := f.p.last.Clusters[0]
		if c == before {
			t.Fatal("the round was never built")
		}
		for hi := range c.Hosts {
			if got, want := c.Hosts[hi].ReplayLSN, f.p.state[0].Hosts[hi].ReplayLSN; got != want {
				t.Errorf("host %d published at %v, its last sample at %v", hi, got, want)
			}
		}
		if f.p.rounds[0] != nil {
			t.Fatal("the round did not close")
		}
	}

	// What a round costs the heap: one build (a cluster of 3 with its
	// hosts, 2,304 bytes) and the publishes' own few bytes, not a build
	// for each publish. The fewest of a few trials: the process's other
	// goroutines only add to a trial.
	aRound := func() { round(func() { f.p.publish() }) }
	if n := testkit.FewestAllocs(20, 14, aRound); n > 14 {
		t.Errorf("a round with a publish after each of its 4 results allocated %.0f times, want at most 14 (one build and the publishes' own; a build a publish is 17)", n)
	}
	fewest := uint64(1 << 62)
	for range testkit.AllocTrials {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		const rounds = 20
		for range rounds {
			aRound()
		}
		runtime.ReadMemStats(&m1)
		fewest = min(fewest, (m1.TotalAlloc-m0.TotalAlloc)/rounds)
	}
	if fewest >= 2*2304 {
		t.Errorf("a round with a publish after each of its 4 results allocated %d bytes, want less than two builds' (4,608)", fewest)
	}

	// A round that does not close: built holdMax after its first result.
	before := f.p.last.Clusters[0]
	f.p.take(f.result(0, 0, true))
	f.p.publish()
	if f.p.last.Clusters[0] != before {
		t.Fatal("a round just opened was built at once")
	}
	if d := f.p.deferredUntil; d.IsZero() || d.After(f.p.markedAt[0].Add(f.p.holdMax())) {
		t.Fatalf("a deferred build is due at %v, want by %v", d, f.p.markedAt[0].Add(f.p.holdMax()))
	}
	time.Sleep(time.Until(f.p.deferredUntil) + time.Millisecond)
	f.p.publish()
	if f.p.last.Clusters[0] == before {
		t.Fatal("a round open for holdMax was still not built")
	}

	// A failure in the middle of a round is built at the next publish.
	f.p.take(f.result(0, 0, true))
	f.p.publish()
	before = f.p.last.Clusters[0]
	r := f.result(0, 1, false)
	r.sample, r.err = Sample{}, errors.New("probe query: timed out (probe.timeout)")
	f.p.take(r)
	f.p.publish()
	if c := f.p.last.Clusters[0]; c == before || c.Hosts[1].Fails == 0 {
		t.Fatal("a failure in a round under way was not built at the next publish")
	}
}

// A deferred build stays listed for a later publish; made since all the
// same (build.go's publish builds a cluster whose timeline a sibling
// raised, whatever its list), it is not made again, and a cluster marked
// again meanwhile is listed once.
func TestDeferredBuildListedOnce(t *testing.T) {
	f := slowFleet(t)
	f.p.take(f.result(0, 0, true)) // a round opens, its build deferred
	f.p.take(f.result(1, 1, false))
	f.p.publish()
	if !slices.Equal(f.p.dirty.marked, []int{0}) {
		t.Fatalf("listed after the publish: %v, want the deferred cluster 0", f.p.dirty.marked)
	}
	f.p.build(0, f.p.now(), f.p.cfg.StaleAfter(), false) // as for a raised timeline
	if got := f.p.dirty.take(f.p, f.p.now()); len(got) != 0 {
		t.Fatalf("a deferred build made since is listed again: %v", got)
	}
	f.p.take(f.result(0, 1, false))
	f.p.publish() // deferred again
	f.p.build(0, f.p.now(), f.p.cfg.StaleAfter(), false)
	f.p.take(f.result(0, 2, false)) // marked anew while still listed
	if got := f.p.dirty.take(f.p, f.p.now()); !slices.Equal(got, []int{0}) {
		t.Fatalf("listed %v, want cluster 0 once", got)
	}
}

// slowFleet is a fleet of two clusters of three probed every 2s, so that
// a deferred build is held for 500 ms (holdMax): on the default 250 ms a
// loaded machine (make test's -race, -parallel 4, 2 cores) could stall a
// test longer than the 62 ms hold between a take and its publish, and
// the hold's end then rightly built the round twice.
func slowFleet(t *testing.T) *benchFleet {
	f := newBenchFleet(t, 2, 3)
	f.p.cfg.Interval = 2 * time.Second
	return f
}

// A round whose hops through the aggregator (the primary's result, each
// replica's, the closing probe's) each take less than holdMax is built
// once, at its close, however long it spans in all, up to deferCap: at
// ten thousand hosts every 1s a round took 250-500 ms against a holdMax
// of 250 ms, and a deferral counted from the round's first result alone
// built most clusters twice a round (1.8 builds a round, issue 28). A
// round still moving is built deferCap after its first result all the
// same. The test moves the round's times back itself, rather than wait.
func TestDeferredBuildFollowsTheRound(t *testing.T) {
	f := newBenchFleet(t, 2, 3)
	f.p.cfg.Interval = time.Minute // holdMax 15 s: no stall of the machine ends a hold here
	holdMax := f.p.holdMax()
	f.round(0, func(r result) { f.p.take(r) }) // a round on a snapshot that knows the primary
	f.p.publish()
	// elapse has d pass for cluster 0's marks and its round.
	elapse := func(d time.Duration) {
		f.p.markedAt[0] = f.p.markedAt[0].Add(-d)
		if rd := f.p.rounds[0]; rd != nil {
			rd.started, rd.moved, rd.closed = rd.started.Add(-d), rd.moved.Add(-d), rd.closed.Add(-d)
		}
	}
	hop := holdMax * 8 / 10
	take := func(hi int, ticked bool) *zone.Cluster {
		f.p.take(f.result(0, hi, ticked))
		f.p.publish()
		return f.p.last.Clusters[0]
	}

	before, built := f.p.last.Clusters[0], f.p.dirty.built
	take(0, true) // the primary's tick opens the round
	elapse(hop)
	if take(1, false) != before {
		t.Fatal("a round's build was made before its close, 0.8 holdMax after its first result")
	}
	elapse(hop)
	if take(2, false) != before {
		t.Fatalf("a round whose every hop took 0.8 holdMax was built at its last replica's result, %v after its first, before its closing probe", 2*hop)
	}
	elapse(hop)
	c := take(0, false) // the closing probe
	if c == before {
		t.Fatal("the round was not built at its close")
	}
	if n := f.p.dirty.built - built; n != 1 {
		t.Errorf("a round spanning %v, a hop every %v (holdMax %v), was built %d times, want once", 3*hop, hop, holdMax, n)
	}
	for hi := range c.Hosts {
		if got, want := c.Hosts[hi].ReplayLSN, f.p.state[0].Hosts[hi].ReplayLSN; got != want {
			t.Errorf("host %d published at %v, its last sample at %v", hi, got, want)
		}
	}

	// Still moving, but deferCap after its first result: built.
	before = c
	take(0, true)
	elapse(f.p.deferCap() - holdMax/2)
	if take(1, false) != before {
		t.Fatal("a moving round's build was made before deferCap")
	}
	elapse(holdMax)
	if take(2, false) == before {
		t.Fatalf("a round open for more than deferCap (%v) after its first result was still not built", f.p.deferCap())
	}
}
