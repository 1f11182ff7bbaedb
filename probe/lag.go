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
// records (time, pg_current_wal_lsn()). WAL only grows, so each sample
// bounds the primary's position on both sides of it. For a replica sampled
// at time t with replay position r, pgdns computes bounds it can prove,
// never estimates:
//
//   - time lag is at most t - τ, where τ is the last time the primary was
//     seen at a position at or before r: at t the replica had everything
//     the primary had written by τ, so the data it lacks is younger than
//     τ. 0 when τ is after t. On an idle primary τ is its newest sample,
//     so the lag stays small however long ago the last write was (case a);
//     a replica that stopped replaying keeps its τ while t grows, so its
//     lag grows without bound (case c). A replica sampled after the
//     primary's newest sample gets no better than t minus that sample:
//     nothing is known of what the primary wrote since.
//   - byte lag is at most P - r, where P is the position of the first
//     primary sample taken at or after t. A replica sampled after the
//     primary's newest sample has no byte bound yet.
//
// Nothing is interpolated: between two samples the primary may have
// written in one burst at either end. The bounds are as tight as the
// samples are close, so the probe takes them close (rounds.go): each
// probe round starts with the primary, probes the replicas right after it,
// and ends with the primary again.

// replaySample is where a replica's replay was at one probe.
type replaySample struct {
	at     time.Time
	replay zone.LSN
}

// walMark is a run of primary samples that saw the same position.
type walMark struct {
	lsn         zone.LSN
	first, last time.Time
}

// walHistory is the WAL clock of one primary: marks in order, oldest first,
// bounded in length. It belongs to one primary on one timeline and is
// replaced when either changes.
type walHistory struct {
	timeline uint32
	marks    []walMark
}

// maxMarks bounds the history: a busy primary probed every 250ms keeps
// about 17 minutes. A time lag older than the history is not vouched for.
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

// timeLag returns an upper bound of the time lag of a replica sampled at
// t with replay position r. ok is false when r is older than the history.
func (w *walHistory) timeLag(t time.Time, r zone.LSN) (d time.Duration, ok bool) {
	// Marks grow in position and in time: search both ways.
	i := sort.Search(len(w.marks), func(i int) bool { return w.marks[i].lsn > r }) - 1
	if i < 0 {
		return 0, false
	}
	return max(0, t.Sub(w.marks[i].last)), true
}

// byteLag returns an upper bound of the byte lag of a replica sampled at
// t with replay position r. ok is false when no primary sample was taken
// at or after t.
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
