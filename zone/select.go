package zone

import (
	"time"
)

// Errors returned by Select and LookupCluster, each with its Outcome.
var (
	ErrNotReady       error = &Error{NotReady, "the first probe round has not finished"}
	ErrUnknownCluster error = &Error{NoSuchName, "no such cluster"}
)

// Reason says why a replica is or is not fit for a query.
type Reason uint8

// Reasons returned by Cluster.Check.
const (
	Fits          Reason = iota
	NotLive              // down, unknown, set aside, or its last good probe is too old
	NotReplica           // a live host that is not a replica
	SyncStandby          // a synchronous standby in a cluster that answers async ones only
	LagUnknown           // a lag filter was asked and the lag cannot be vouched for
	LagTooHigh           // time lag above the filter's bound
	BytesTooHigh         // byte lag above the filter's bound
	NotReplayed          // has not replayed the LSN yet
	OtherTimeline        // the LSN is not part of this host's timeline history
)

// live reports whether h may be answered at all: a primary or replica whose
// last good probe is recent enough to vouch for it. Decide already drops
// hosts that failed; this also catches a snapshot that was not rebuilt
// because every probe hangs.
func live(h *Host, now time.Time, staleAfter time.Duration) bool {
	return (h.Role == RolePrimary || h.Role == RoleReplica) && now.Sub(h.ProbedAt) <= staleAfter
}

// Live reports whether h may be answered at time now: the rule DNS
// selection applies, for the HTTP API and the metrics to show.
func (s *Snapshot) Live(h *Host, now time.Time) bool { return live(h, now, s.StaleAfter) }

// LivePrimary returns the primary if it may be answered now, else nil.
func (c *Cluster) LivePrimary(now time.Time, staleAfter time.Duration) *Host {
	p := c.PrimaryHost()
	if p == nil || !live(p, now, staleAfter) {
		return nil
	}
	return p
}

// Check decides whether replica h fits q. primary is the live primary or
// nil; without one no lag can be vouched for, so lag and byte filters fail
// closed. The LSN filter needs no primary: replay position is the
// replica's own.
func (c *Cluster) Check(h *Host, q *Query, primary *Host, now time.Time, staleAfter time.Duration) Reason {
	if !live(h, now, staleAfter) {
		return NotLive
	}
	if h.Role != RoleReplica {
		return NotReplica
	}
	if c.AsyncOnly && h.Sync {
		return SyncStandby
	}
	if (q.HasLag && (primary == nil || !h.LagKnown)) || (q.HasBytes && (primary == nil || !h.BytesKnown)) {
		return LagUnknown
	}
	if q.HasLag && h.Lag > q.MaxLag {
		return LagTooHigh
	}
	if q.HasBytes && h.LagBytes > q.MaxBytes {
		return BytesTooHigh
	}
	if q.HasLSN {
		if q.Timeline != 0 && !h.hasHistory(q.Timeline, q.MinLSN) {
			return OtherTimeline
		}
		if h.ReplayLSN < q.MinLSN {
			return NotReplayed
		}
	}
	return Fits
}

// Select appends to dst the hosts that answer q at time now and returns
// the extended slice. Replicas come in an order rotated by turn, so that
// successive answers spread clients across them. The primary fits every
// filter: it has all the data there is.
//
// An empty result with a nil error is a valid name with no fitting host.
func (s *Snapshot) Select(q *Query, now time.Time, turn uint64, dst []*Host) ([]*Host, error) {
	if !s.Ready {
		return dst, ErrNotReady
	}
	c := s.Cluster(q.Cluster)
	if c == nil {
		return dst, ErrUnknownCluster
	}
	primary := c.LivePrimary(now, s.StaleAfter)
	if q.Target == TargetPrimary || q.Target == TargetAny {
		if primary != nil {
			dst = append(dst, primary)
		}
		if q.Target == TargetPrimary {
			return dst, nil
		}
	}

	start := len(dst)
	for i := range c.Hosts {
		h := &c.Hosts[i]
		if h.Role == RoleReplica && c.Check(h, q, primary, now, s.StaleAfter) == Fits {
			dst = append(dst, h)
		}
	}
	if n := len(dst) - start; n > 1 {
		rotate(dst[start:], int(turn%uint64(n)))
	}
	if q.Target == TargetPreferReplica && len(dst) == start && primary != nil {
		dst = append(dst, primary)
	}
	return dst, nil
}

// rotate moves the first k elements of s to its end, in place.
func rotate(s []*Host, k int) {
	if k == 0 {
		return
	}
	reverse(s[:k])
	reverse(s[k:])
	reverse(s)
}

func reverse(s []*Host) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}
