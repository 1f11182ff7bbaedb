package probe

import (
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
