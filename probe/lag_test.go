package probe

import (
	"testing"
	"time"

	"github.com/pgdns/pgdns/zone"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// Case (a): the primary has been idle for a long time. A replica that has
// replayed everything has no lag, however old the last commit is.
func TestLagIdlePrimary(t *testing.T) {
	var w walHistory
	w.add(at(0), 0x1000) // the last write
	for ms := 250; ms <= 360_000; ms += 250 {
		w.add(at(ms), 0x1000)
	}
	bytes, d, ok := w.lag(at(360_000), 0x1000)
	if !ok || bytes != 0 || d != 0 {
		t.Fatalf("idle primary: lag = %d bytes, %v, ok %v; want 0, 0, true", bytes, d, ok)
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
	bytes, d, ok := w.lag(at(2000), replay)
	if !ok || bytes != 3000 {
		t.Fatalf("bytes = %d ok %v, want 3000", bytes, ok)
	}
	if d < 290*time.Millisecond || d > 310*time.Millisecond {
		t.Fatalf("time lag = %v, want about 300ms", d)
	}

	// Between samples the position is interpolated: at 1950ms the primary
	// was at about 0x10000+19500.
	p, ok := w.positionAt(at(1950))
	if !ok || p != zone.LSN(0x10000+19500) {
		t.Fatalf("positionAt(1950ms) = %v, %v", p, ok)
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
		_, d, ok := w.lag(at(ms), zone.LSN(0x10000+1000))
		if !ok || d <= last {
			t.Fatalf("at %dms lag %v ok %v, previous %v: must grow", ms, d, ok, last)
		}
		if want := time.Duration(ms-1000) * time.Millisecond; d < want-10*time.Millisecond || d > want+10*time.Millisecond {
			t.Fatalf("at %dms lag %v, want about %v", ms, d, want)
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
	_, d, ok := w.lag(at(9000), 0x1000)
	if !ok || d < 3750*time.Millisecond || d > 4000*time.Millisecond {
		t.Fatalf("lag = %v ok %v, want 3.75s..4s", d, ok)
	}
}

func TestLagOlderThanHistoryIsNotVouched(t *testing.T) {
	var w walHistory
	w.add(at(0), 0x5000)
	w.add(at(250), 0x6000)
	bytes, d, ok := w.lag(at(250), 0x1000)
	if ok {
		t.Fatalf("lag of a replica older than the history was vouched for: %d bytes %v", bytes, d)
	}
	if bytes != 0x5000 || d != 250*time.Millisecond {
		t.Fatalf("lower bounds = %d bytes %v", bytes, d)
	}
	if _, _, ok := w.lag(at(-10), 0x4000); ok {
		t.Fatal("a sample before the history, behind its first position, was vouched for")
	}
	// Before the history but at or past its first position: the primary
	// cannot have been further then.
	if bytes, d, ok := w.lag(at(-10), 0x5000); !ok || bytes != 0 || d != 0 {
		t.Fatalf("sample before the history at its first position: %d %v %v", bytes, d, ok)
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
