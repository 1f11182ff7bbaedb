package probe

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/pgdns/pgdns/zone"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// lag returns both bounds, for the tests.
func (w *walHistory) lag(t time.Time, r zone.LSN) (uint64, time.Duration, bool, bool) {
	d, okT := w.timeLag(t, r)
	b, okB := w.byteLag(t, r)
	return b, d, okT, okB
}

// Case (a): the primary has been idle for a long time. A replica that has
// replayed everything has no lag, however old the last commit is.
func TestLagIdlePrimary(t *testing.T) {
	var w walHistory
	w.add(at(0), 0x1000) // the last write
	for ms := 250; ms <= 360_000; ms += 250 {
		w.add(at(ms), 0x1000)
	}
	bytes, d, okT, okB := w.lag(at(360_000), 0x1000)
	if !okT || !okB || bytes != 0 || d != 0 {
		t.Fatalf("idle primary: lag = %d bytes, %v, ok %v %v; want 0, 0, true", bytes, d, okT, okB)
	}
	if len(w.marks) != 1 {
		t.Fatalf("an idle primary grew the history to %d marks", len(w.marks))
	}
}

// Case (b): the primary writes 1000 bytes every 100ms. A replica 300ms
// behind has replayed the position the primary had 300ms ago.
func TestLagSteadyWrites(t *testing.T) {
	var w walHistory
	for ms := 0; ms <= 2000; ms += 100 {
		w.add(at(ms), zone.LSN(0x10000+ms*10))
	}
	replay := zone.LSN(0x10000 + 1700*10) // where the primary was at 1700ms
	bytes, d, okT, okB := w.lag(at(2000), replay)
	if !okT || !okB || bytes != 3000 || d != 300*time.Millisecond {
		t.Fatalf("lag = %d bytes %v (ok %v %v), want 3000 bytes, 300ms", bytes, d, okT, okB)
	}
	// Between two samples nothing is interpolated: a replica halfway
	// between the positions at 1600ms and 1700ms is only known to have
	// what the primary had at 1600ms, and to lack at most what it had at
	// the next sample after its own.
	bytes, d, okT, okB = w.lag(at(1950), zone.LSN(0x10000+16500))
	if !okT || !okB || d != 350*time.Millisecond || bytes != 20000-16500 {
		t.Fatalf("between samples: %d bytes %v (ok %v %v), want 3500 bytes, 350ms", bytes, d, okT, okB)
	}
}

// The case: a replica sampled after the primary's newest sample
// once got lag 0 because the newest known position stood in for every
// later moment. Its time lag is only known to be at most the time since
// that sample, and its byte lag is not known at all.
func TestLagPastNewestPrimarySample(t *testing.T) {
	var w walHistory
	for ms := 0; ms <= 1000; ms += 250 {
		w.add(at(ms), zone.LSN(0x10000+ms*100))
	}
	bytes, d, okT, okB := w.lag(at(1150), zone.LSN(0x10000+1000*100))
	if !okT || d != 150*time.Millisecond {
		t.Fatalf("time lag past the newest sample = %v (ok %v), want 150ms", d, okT)
	}
	if okB {
		t.Fatalf("byte lag past the newest sample was vouched for: %d", bytes)
	}
	// A delayed replica (200ms behind, steady writes) sampled 150ms after
	// the primary: at most 150ms + what the samples prove.
	_, d, okT, _ = w.lag(at(1150), zone.LSN(0x10000+800*100))
	if !okT || d != 400*time.Millisecond {
		t.Fatalf("delayed replica past the newest sample: %v (ok %v), want 400ms", d, okT)
	}
}

// Case (c): the replica stopped replaying at 1000ms; the primary keeps
// writing. Its lag grows with the clock.
func TestLagStoppedReplica(t *testing.T) {
	var w walHistory
	var last time.Duration
	for ms := 0; ms <= 10_000; ms += 250 {
		w.add(at(ms), zone.LSN(0x10000+ms))
		if ms < 2000 || ms%1000 != 0 {
			continue
		}
		_, d, ok, _ := w.lag(at(ms), zone.LSN(0x10000+1000))
		if !ok || d <= last {
			t.Fatalf("at %dms lag %v ok %v, previous %v: must grow", ms, d, ok, last)
		}
		if want := time.Duration(ms-1000) * time.Millisecond; d != want {
			t.Fatalf("at %dms lag %v, want %v", ms, d, want)
		}
		last = d
	}
}

// A replica stopped while the primary was idle, then the primary wrote
// once: the replica lacks data as old as that write, and its lag grows.
func TestLagAfterOneWriteOnIdlePrimary(t *testing.T) {
	var w walHistory
	for ms := 0; ms <= 5000; ms += 250 {
		w.add(at(ms), 0x1000)
	}
	for ms := 5250; ms <= 9000; ms += 250 {
		w.add(at(ms), 0x2000)
	}
	_, d, ok, _ := w.lag(at(9000), 0x1000)
	if !ok || d != 4000*time.Millisecond {
		t.Fatalf("lag = %v ok %v, want 4s (since the last sample at 0x1000)", d, ok)
	}
}

func TestLagOlderThanHistoryIsNotVouched(t *testing.T) {
	var w walHistory
	w.add(at(0), 0x5000)
	w.add(at(250), 0x6000)
	if _, d, ok, _ := w.lag(at(250), 0x1000); ok {
		t.Fatalf("time lag of a replica older than the history was vouched for: %v", d)
	}
	// Sampled before the history began: the primary was then at most
	// where it was first seen.
	if bytes, _, _, ok := w.lag(at(-10), 0x4000); !ok || bytes != 0x1000 {
		t.Fatalf("byte lag before the history: %d %v, want 0x1000", bytes, ok)
	}
	if bytes, d, okT, okB := w.lag(at(-10), 0x5000); !okT || !okB || bytes != 0 || d != 0 {
		t.Fatalf("sample before the history at its first position: %d %v %v %v", bytes, d, okT, okB)
	}
}

func TestHistoryIsBounded(t *testing.T) {
	var w walHistory
	for i := 0; i < maxMarks+100; i++ {
		w.add(at(i), zone.LSN(i+1))
	}
	if len(w.marks) != maxMarks || w.marks[0].lsn != 101 {
		t.Fatalf("history holds %d marks from %v", len(w.marks), w.marks[0].lsn)
	}
	w.add(at(5), 1<<40) // out of order
	if w.marks[len(w.marks)-1].lsn == 1<<40 {
		t.Fatal("an out-of-order sample was recorded")
	}
}

// Issue 22, case 2: a probe's values were read at an unknown moment of its
// round trip, so the bounds take its safe ends: a replica had its replay
// position by its probe's end, the primary was at most at its position at
// its probe's start, and a byte bound needs a primary probe that started
// after the replica's ended. A one-sided delay (1.5 s on the replica's
// request path) made the midpoints vouch for a lag of about 1 s.
func TestLagFromConservativeEnds(t *testing.T) {
	table := zone.NewTable()
	cfg := Config{Interval: 100 * time.Millisecond, Timeout: 5 * time.Second, MaxFails: 3,
		Clusters: []ClusterConfig{{Name: "main", Hosts: []string{"p:1", "r:1"}}}}
	p := New(cfg, table, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), "main")
	base := time.Now()
	ms := func(n int) time.Time { return base.Add(time.Duration(n) * time.Millisecond) }
	probe := func(host int, start, end int, recovery bool, lsn zone.LSN) *zone.Host {
		s := Sample{Start: ms(start), End: ms(end), InRecovery: recovery, ReplayLSN: lsn,
			Timeline: 1, CheckpointTimeline: 1, SystemID: 7, StartedAt: run1.Add(time.Duration(host) * time.Hour)}
		if !recovery {
			s.InsertLSN = lsn
		}
		p.record(result{cluster: 0, host: host, started: ms(start), sample: s})
		p.now = func() time.Time { return ms(end) }
		p.publish()
		return &p.last.Clusters[0].Hosts[1]
	}
	probe(0, 0, 1, false, 0x1000)
	probe(0, 200, 201, false, 0x2000) // the primary inserted past 0x1000 after 0
	// The replica's probe waited 1.5 s on its way there: it read 0x1000 at
	// some moment of [300, 1800] ms, all the primary had by 0 at least.
	r := probe(1, 300, 1800, true, 0x1000)
	if r.Role != zone.RoleReplica || !r.LagKnown || r.Lag != 1800*time.Millisecond {
		t.Fatalf("time lag %v (known %v, role %v %s), want 1.8s: from the replica probe's end to the last primary probe's start at or before its position", r.Lag, r.LagKnown, r.Role, r.Note)
	}
	if r.BytesKnown {
		t.Fatalf("byte lag %d vouched for without a primary probe started after the replica's ended", r.LagBytes)
	}
	// A primary probe that started before the replica's ended, although
	// it ended after, may have read its position before: still no bound.
	if r = probe(0, 1000, 2500, false, 0x3000); r.BytesKnown {
		t.Fatalf("byte lag %d vouched for by a primary probe that started before the replica's ended", r.LagBytes)
	}
	if r = probe(0, 2600, 2601, false, 0x3000); !r.BytesKnown || r.LagBytes != 0x2000 {
		t.Fatalf("byte lag %d (known %v), want 0x2000 from the probe started after the replica's ended", r.LagBytes, r.BytesKnown)
	}
	// Its next probe, with no primary probe started after it, has a time
	// bound from the primary's last start at or before its position and
	// no byte bound: the previous sample's would hold as of its end only.
	if r = probe(1, 2700, 2710, true, 0x3000); !r.LagKnown || r.Lag != 110*time.Millisecond || r.BytesKnown {
		t.Fatalf("next sample: lag %v (known %v), bytes known %v; want 110ms, no byte bound", r.Lag, r.LagKnown, r.BytesKnown)
	}
	if h := &p.last.Clusters[0].Hosts[1]; !h.ProbeStart.Equal(ms(2700)) || !h.ProbedAt.Equal(ms(2710)) {
		t.Fatalf("probe frame %v–%v, want the sample's start and end", h.ProbeStart.Sub(base), h.ProbedAt.Sub(base))
	}
}

// A round waited for every replica it kicked, and one busy with an older
// probe (slow, or hung) cannot answer a newer round before it is done:
// such rounds never closed, so the other replicas' samples went without a
// primary probe after them, and so without a byte bound, until the
// primary's next tick. A round no longer waits for a replica still busy
// with an earlier round's probe.
func TestRoundDoesNotWaitForABusyReplica(t *testing.T) {
	table := zone.NewTable()
	cfg := Config{Interval: 100 * time.Millisecond, Timeout: 5 * time.Second, MaxFails: 3,
		Clusters: []ClusterConfig{{Name: "main", Hosts: []string{"p:1", "prompt:1", "slow:1"}}}}
	p := New(cfg, table, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), "main")
	// Rounds read the clock when they open; probes here start when
	// asked, a moment later.
	now := func() time.Time { time.Sleep(time.Millisecond); return time.Now() }
	take := func(host int, start time.Time, ticked bool) {
		s := Sample{Start: start, End: start.Add(time.Microsecond), InRecovery: host != 0, ReplayLSN: 0x1000,
			Timeline: 1, CheckpointTimeline: 1, SystemID: 7, StartedAt: run1.Add(time.Duration(host) * time.Hour)}
		if host == 0 {
			s.InsertLSN = 0x1000
		}
		p.take(result{cluster: 0, host: host, started: start, ticked: ticked, sample: s})
		p.publish()
	}
	kicked := func(flat int) bool {
		select {
		case <-p.kicks[flat]:
			return true
		default:
			return false
		}
	}
	open := func() {
		t.Helper()
		take(0, now(), true)
		if !kicked(1) || !kicked(2) {
			t.Fatal("the round kicked not every replica")
		}
	}
	for host := range 3 {
		take(host, now(), false)
	}
	if c := p.last.Clusters[0]; c.Primary != 0 || c.Hosts[1].Role != zone.RoleReplica || c.Hosts[2].Role != zone.RoleReplica {
		t.Fatalf("roles %v %v %v", c.Hosts[0].Role, c.Hosts[1].Role, c.Hosts[2].Role)
	}
	open()
	slowStarted := now()  // the slow replica's probe for this round
	take(1, now(), false) // the prompt replica answers; the slow one does not
	if kicked(0) {
		t.Fatal("the round closed with a replica still to answer")
	}
	open() // the next round: the slow replica is still busy
	take(1, now(), false)
	if !kicked(0) {
		t.Fatal("the round waits for the replica busy with the previous round's probe: no closing probe of the primary")
	}
	take(0, now(), false)       // the closing probe
	take(2, slowStarted, false) // the slow replica answers the first round
	open()                      // the second round's kick is not answered: still busy
	take(1, now(), false)
	if !kicked(0) {
		t.Fatal("the round waits for the replica that has not answered the previous round's kick: no closing probe of the primary")
	}
	take(0, now(), false)
	take(2, now(), false) // its answer to the last kick
	open()                // not busy any more: the round waits for it
	take(1, now(), false)
	if kicked(0) {
		t.Fatal("the round closed without the replica that is no longer busy")
	}
	take(2, now(), false)
	if !kicked(0) {
		t.Fatal("the round did not close when both replicas answered")
	}
}
