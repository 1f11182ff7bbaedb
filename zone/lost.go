package zone

import "strconv"

// Writes lost in a failover. A token lsn-…-tN names a write on timeline N.
// When the cluster has moved on to a later timeline whose history file
// says that timeline N ended before the token (or that the later timeline
// does not descend from N at all), the write was lost in the failover: the
// new primary and every replica following it lack it, provably. No name
// answers such a token, prefer-replica's fallback and any included: an
// lsn- name promises a host that has the write, and the client is better
// served by an empty answer (and the reason, in TXT and /v1/resolve) than
// by a read that silently misses its write (review 6, G4; the same
// principle as a forked timeline's, forked.go).
//
// Only a history read from a file proves it: a switch the probe watched
// gives a lower bound of where the timeline ended (probe/timelines.go), and
// a token past a lower bound may still be in the history. Such a token, or
// one merely not replayed yet, falls back to the primary as before.

// tokenLost says why q's LSN is proven lost in a failover, or "": q
// carries a timeline older than the cluster's newest, and the history file
// of the newest timeline, as an answerable host on it has it, says the
// token's timeline ended before the token (or is not among its ancestors).
// Every host on the newest timeline has that one history (the probe
// attaches the cluster's history of a timeline to every host on it); a
// forked newest timeline has two, so nothing is proven on it (forked.go
// says why instead).
func (c *Cluster) tokenLost(q *Query) string {
	if !q.HasLSN || q.Timeline == 0 || q.Timeline >= c.NewestTimeline || c.ForkOf(c.NewestTimeline) != nil {
		return ""
	}
	for i := range c.Hosts {
		h := &c.Hosts[i]
		if (h.Role != RolePrimary && h.Role != RoleReplica) || h.Timeline != c.NewestTimeline ||
			!h.TimelineExact || !h.HistoryFromFile || len(h.History) == 0 {
			continue
		}
		return h.lostWhy(q)
	}
	return ""
}

// lostWhy says why h's history file proves q's LSN lost, or "" when the
// token is in h's history.
func (h *Host) lostWhy(q *Query) string {
	want := h.token(q.MinLSN)
	if h.hasHistory(q.Timeline, want) {
		return ""
	}
	tl := "timeline " + strconv.FormatUint(uint64(q.Timeline), 10)
	token := q.MinLSN.String() + " on " + tl
	own := "timeline " + strconv.FormatUint(uint64(h.Timeline), 10) + "'s history file"
	for i, e := range h.History {
		if e.Timeline != q.Timeline {
			continue
		}
		next := h.Timeline
		if i+1 < len(h.History) {
			next = h.History[i+1].Timeline
		}
		return token + " lost in the failover to timeline " + strconv.FormatUint(uint64(next), 10) + " at " +
			e.End.String() + ": " + own + " says " + tl + " ended there, before the token"
	}
	return token + " lost in a failover: " + own + " does not descend from " + tl
}
