package zone

import "strconv"

// Forked timelines. A timeline is a number and a history: two servers
// promoted without seeing each other's history file (a failover that
// stalled, then a second promotion) both take the next number, and two
// branches of "timeline N" exist, their WAL different from where each
// began. The probe records a timeline as forked once two different
// servers were seen writable on it, at once (a split brain) or one after
// the other (Cluster.ForkedTimelines). A position on it then names two histories:
// an lsn- token taken on it says nothing of which branch its write is on,
// so no host proves it, the primary included (it may be on the other
// branch). Rule "Forked timelines" in docs/decisions.md.

// TimelineFork is a timeline seen written by two servers.
type TimelineFork struct {
	Timeline uint32
	// Note says what is known, for people: the servers seen writable on
	// it and where, e.g. "10.0.0.2:5432 writable on it at 0/5004FF8, then
	// 10.0.0.3:5432 at 0/5005178; split brain seen".
	Note string
}

// ForkOf returns the fork of timeline tl, or nil when tl is not known to be
// forked.
func (c *Cluster) ForkOf(tl uint32) *TimelineFork {
	for i := range c.ForkedTimelines {
		if c.ForkedTimelines[i].Timeline == tl {
			return &c.ForkedTimelines[i]
		}
	}
	return nil
}

// tokenFork returns the fork that makes q's LSN unprovable on every host,
// or nil: a token on a forked timeline (-tN), or one without a timeline
// while the newest timeline is forked. A token without a timeline is
// taken to be on the newest timeline, as its position is compared (rule
// 9: it cannot tell a write lost in a failover, which a later timeline
// makes of a forked one's other branch); while that timeline has two
// branches, it names a position on either.
func (c *Cluster) tokenFork(q *Query) *TimelineFork {
	if !q.HasLSN || len(c.ForkedTimelines) == 0 {
		return nil
	}
	if q.Timeline == 0 {
		return c.ForkOf(c.NewestTimeline)
	}
	return c.ForkOf(q.Timeline)
}

// hostFork returns the fork that keeps host h from proving q's LSN, or
// nil: tokenFork, or h's own timeline forked while q's token is on an
// earlier one. Which branch of its timeline h is on, and so where the
// timelines before it ended in h's history, is not known: the cluster's
// history of that timeline may be the other branch's.
func (c *Cluster) hostFork(h *Host, q *Query) *TimelineFork {
	if f := c.tokenFork(q); f != nil || !q.HasLSN || len(c.ForkedTimelines) == 0 {
		return f
	}
	if q.Timeline != 0 && h.Timeline > q.Timeline {
		return c.ForkOf(h.Timeline)
	}
	return nil
}

// TokenUnprovable says why q's LSN is proven by no host of its cluster at
// all (a forked timeline), or had by none (a write lost in a failover,
// lost.go), or "": the reason TXT and /v1/resolve give for an empty
// answer, which no refresh of the replay positions changes.
func (s *Snapshot) TokenUnprovable(q *Query) string {
	c := s.Cluster(q.Cluster)
	if c == nil {
		return ""
	}
	if f := c.tokenFork(q); f != nil {
		return f.why()
	}
	return c.tokenWithdrawn(q)
}

// why is the reason a host does not prove a token because of f.
func (f *TimelineFork) why() string {
	return "timeline " + strconv.FormatUint(uint64(f.Timeline), 10) + " forked (" + f.Note + "): the token's branch is unknown"
}
