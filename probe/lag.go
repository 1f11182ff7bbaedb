package probe

import (
	"sort"
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
// records its insert position pg_current_wal_insert_lsn() (a commit is
// visible only once its record is inserted, so every commit visible at a
// moment lies below the insert position of that moment; the write position
// does not cover asynchronous commits). From it pgdns computes bounds it
// can prove, never estimates.
//
// What a probe proves. Let P(τ) be the primary's insert position at time
// τ and R(τ) the replica's replay position; both only grow. A probe sends
// its query at s and reads the answer at e, and the server read its value
// at some unknown moment in [s, e]: a delay on either path (a proxy, a
// throttled CPU) may put it at either end, so the midpoint proves nothing.
// So:
//
//   - a primary probe (s_i, e_i) that read p_i proves P(s_i) ≤ p_i ≤ P(e_i):
//     at its start the primary was at most at p_i, by its end at least;
//   - a replica probe (rs, re) that read r proves R(re) ≥ r: by its end
//     the replica had replayed at least r.
//
// Both bounds are stated as of re, the end of the replica's probe (the
// host's ProbedAt, from which TXT's age_ms counts):
//
//   - time lag ≤ re − s_i, s_i the latest start of a primary probe that read
//     p_i ≤ r. Every commit the replica lacks at re lies above R(re) ≥ r ≥
//     p_i ≥ P(s_i): its record was inserted, and so the commit became
//     visible, after s_i. 0 when s_i is after re. On an idle primary s_i is
//     its newest probe's start, so the lag stays small however long ago the
//     last write was; a replica that stopped replaying keeps its s_i while
//     re grows, so its lag grows without bound. A replica probed after the
//     primary's newest probe gets no better than re minus that probe's start:
//     nothing is known of what the primary inserted since.
//   - byte lag ≤ p_j − r, p_j read by the first primary probe that started at
//     or after re: P(re) ≤ P(s_j) ≤ p_j and R(re) ≥ r. A primary probe that
//     started earlier, even one that ended after re, may have read its
//     position before re, and proves nothing of P(re). A replica probe with
//     no primary probe started after its end has no byte bound yet; its
//     previous sample's bound would hold as of that sample's end only, so
//     it is not used.
//
// Nothing is interpolated: between two samples the primary may have
// inserted in one burst at either end. The bounds are as tight as the
// samples are close, so the probe takes them close (rounds.go): each
// probe round starts with the primary, probes the replicas right after it,
// and ends with the primary again, whose start follows every replica's end.

// walMark is a run of primary samples that saw the same position: first
// and last are the starts of the first and last of them.
type walMark struct {
	lsn         zone.LSN
	first, last time.Time
}

// walHistory is the WAL clock of one primary: marks in order, oldest first,
// bounded in length. It belongs to one server run (system identifier and
// postmaster start time) on one timeline at one address, and is replaced
// when any of them changes. A mark (x, last) proves that this server had
// inserted at most x at last; it proves nothing of another server given
// the address (a cluster rebuilt elsewhere and moved onto its addresses, a
// server of another branch restarted there), which may have inserted what
// its replicas lack long before: measured from the old server's marks, a
// replica of the new one lacking a commit 19 s old was bounded at 2 s and
// answered by lag-15s (test/newserver_lagclock_e2e_test.go). A restart of
// the same server keeps its WAL, but a run cannot be told from a restore or
// a rebuild (decisions.md, rule 13), so it starts over too: until the
// replicas replay past the new run's first sample their time lag is not
// known, which fails closed for a probe round or two.
type walHistory struct {
	timeline uint32
	system   uint64    // the server's system identifier
	run      time.Time // its postmaster start time
	marks    []walMark
}

// of reports whether w is the clock of server run (system, run) on
// timeline tl.
func (w *walHistory) of(system uint64, run time.Time, tl uint32) bool {
	return w.timeline == tl && w.system == system && w.run.Equal(run)
}

// maxMarks bounds the history: a busy primary probed every 250ms keeps
// about 17 minutes. A time lag older than the history is not vouched for.
const maxMarks = 4096

// add records a primary probe that started at at and read lsn.
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

// timeLag returns an upper bound of the time lag, as of t, of a replica
// whose probe ended at t having read replay position r. ok is false when r
// is older than the history.
func (w *walHistory) timeLag(t time.Time, r zone.LSN) (d time.Duration, ok bool) {
	// Marks grow in position and in time: search both ways.
	i := sort.Search(len(w.marks), func(i int) bool { return w.marks[i].lsn > r }) - 1
	if i < 0 {
		return 0, false
	}
	return max(0, t.Sub(w.marks[i].last)), true
}

// byteLag returns an upper bound of the byte lag, as of t, of a replica
// whose probe ended at t having read replay position r. ok is false when
// no primary probe started at or after t.
func (w *walHistory) byteLag(t time.Time, r zone.LSN) (bytes uint64, ok bool) {
	i := sort.Search(len(w.marks), func(i int) bool { return !w.marks[i].last.Before(t) })
	if i == len(w.marks) {
		return 0, false
	}
	if p := w.marks[i].lsn; r < p {
		return uint64(p - r), true
	}
	return 0, true
}
