package probe

import (
	"time"

	"github.com/pgdns/pgdns/zone"
)

// How lag is computed, and why.
//
// PostgreSQL's own time lag, now() - pg_last_xact_replay_timestamp(), is
// the age of the last transaction the replica replayed. On an idle primary
// that grows forever although the replica has everything (this is the false
// lag pg-status reports), and it says nothing about WAL that carries no
// commit timestamp.
//
// pgdns instead keeps the primary's WAL clock: every probe of the primary
// records (time, pg_current_wal_lsn()). From that history it knows when the
// primary passed any position. For a replica sampled at time t with replay
// position r:
//
//   - byte lag is P(t) - r, where P(t) is the primary's position at the same
//     moment t (interpolated between the two primary samples around t), so
//     that replicas are not compared with a primary position one interval
//     older or newer than their own sample;
//   - time lag is 0 when r >= P(t): the replica has all the data there is,
//     however long the primary has been idle (case a);
//   - otherwise it is t - t*, where t* is when the primary passed r: the
//     oldest data the replica lacks was written just after t*, so the
//     replica's view of the database is t - t* old. With steady writes this
//     is how far behind the newest data it has is (case b); a replica that
//     stopped replaying keeps r while t grows, so its lag grows without
//     bound (case c).
//
// All probes start on the same tick, so a replica's sample usually has a
// primary sample within milliseconds; lags are recomputed whenever a
// snapshot is built, so a primary sample that arrives after the replica's
// still refines it.

// walMark is a run of primary samples that saw the same position.
type walMark struct {
	lsn         zone.LSN
	first, last time.Time
}

// walHistory is the WAL clock of one primary: marks in order, oldest first,
// bounded in length. It belongs to one primary on one timeline and is
// replaced when either changes.
type walHistory struct {
	owner    string // addr of the primary
	timeline uint32
	marks    []walMark
}

// maxMarks bounds the history: a busy primary probed every 250ms keeps
// about 17 minutes. Lag older than the history is reported as a lower
// bound and not vouched for.
const maxMarks = 4096

// add records that the primary was at lsn at time at.
func (w *walHistory) add(at time.Time, lsn zone.LSN) {
	if n := len(w.marks); n > 0 {
		last := &w.marks[n-1]
		if !at.After(last.last) {
			return // out of order: a late result adds nothing
		}
		if lsn <= last.lsn {
			last.last = at
			return
		}
	}
	if len(w.marks) == maxMarks {
		copy(w.marks, w.marks[1:])
		w.marks = w.marks[:maxMarks-1]
	}
	w.marks = append(w.marks, walMark{lsn: lsn, first: at, last: at})
}

// positionAt estimates the primary's position at time t. ok is false when t
// is before the history starts.
func (w *walHistory) positionAt(t time.Time) (zone.LSN, bool) {
	n := len(w.marks)
	if n == 0 || t.Before(w.marks[0].first) {
		return 0, false
	}
	for i := n - 1; i >= 0; i-- {
		m := w.marks[i]
		if t.Before(m.first) {
			continue
		}
		if !t.After(m.last) || i == n-1 {
			// Inside a run, or after the newest sample: the newest known
			// position. A write since then is seen on the next build.
			return m.lsn, true
		}
		next := w.marks[i+1]
		return interpolateLSN(m.lsn, m.last, next.lsn, next.first, t), true
	}
	return 0, false
}

// passedAt estimates when the primary moved past position r. ok is false
// when r is older than the history (lower is then the oldest time known).
func (w *walHistory) passedAt(r zone.LSN) (t time.Time, ok bool) {
	for i, m := range w.marks {
		if m.lsn <= r {
			continue
		}
		if i == 0 {
			return m.first, false
		}
		prev := w.marks[i-1]
		return interpolateTime(prev.lsn, prev.last, m.lsn, m.first, r), true
	}
	return time.Time{}, false // r is at or past the newest position
}

// lag computes a replica's byte and time lag for a sample at time t with
// replay position r. ok is false when the history cannot vouch for it.
func (w *walHistory) lag(t time.Time, r zone.LSN) (bytes uint64, d time.Duration, ok bool) {
	p, ok := w.positionAt(t)
	if !ok {
		// t is before the history starts. WAL only grows, so the primary
		// was then at most where it was first seen: a replica at or past
		// that point had everything.
		if len(w.marks) > 0 && r >= w.marks[0].lsn {
			return 0, 0, true
		}
		return 0, 0, false
	}
	if r >= p {
		return 0, 0, true
	}
	bytes = uint64(p - r)
	passed, ok := w.passedAt(r)
	if passed.IsZero() {
		return bytes, 0, false
	}
	if d = t.Sub(passed); d < 0 {
		d = 0
	}
	return bytes, d, ok
}

// interpolateLSN returns the position at t on the line from (t1, l1) to
// (t2, l2), with t1 <= t <= t2.
func interpolateLSN(l1 zone.LSN, t1 time.Time, l2 zone.LSN, t2 time.Time, t time.Time) zone.LSN {
	span := t2.Sub(t1)
	if span <= 0 || l2 <= l1 {
		return l2
	}
	frac := float64(t.Sub(t1)) / float64(span)
	return l1 + zone.LSN(frac*float64(l2-l1))
}

// interpolateTime returns when the line from (t1, l1) to (t2, l2) reaches
// r, with l1 <= r < l2: the moment the primary passed r.
func interpolateTime(l1 zone.LSN, t1 time.Time, l2 zone.LSN, t2 time.Time, r zone.LSN) time.Time {
	span := t2.Sub(t1)
	if span <= 0 || l2 <= l1 {
		return t2
	}
	frac := float64(r-l1) / float64(l2-l1)
	return t1.Add(time.Duration(frac * float64(span)))
}
