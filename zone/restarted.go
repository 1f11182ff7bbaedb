package zone

import "strconv"

// Restarted timelines. A new server run of a timeline's writer cannot be
// told from its WAL to be the same server restarted rather than a server
// restored in place from an older snapshot (review 6, G5), rebuilt and
// promoted again to the same timeline number while pgdns was away (G2b),
// or a crash that lost asynchronous commits (G10, synchronous_commit =
// off): each starts a run at the writer's address, on the writer's
// timeline, at a position its WAL reaches. A token of a write of the run
// before names a position that the new run may have written anew, with
// other data. So the probe, seeing a new run of a writer, records a
// window on that timeline up to the highest position either run may have
// written before pgdns saw the new one (Cluster.RestartedTimelines): no
// host proves a token in it, the primary included; a token above it is a
// write of the new run, proven by position as ever. Rule 13 in
// docs/decisions.md.

// TimelineRestart is a window of positions on a timeline that a new
// server run of its writer may have written anew.
type TimelineRestart struct {
	Timeline uint32
	// Upto is the highest position of the window: the previous run's last
	// seen insert position or the new run's first seen one, whichever is
	// higher (of the highest window, when the writer restarted more than
	// once).
	Upto LSN
	// Note says what was seen, for people: "10.0.0.11:5432's server
	// restarted at 2026-12-01T19:40:00Z", or "…'s server crashed (WAL
	// back from 0/3005368 to 0/30050A8)" when a crash of one of its
	// processes reinitialised it (its start time stays).
	Note string
}

// RestartOf returns the restart window of timeline tl, or nil.
func (c *Cluster) RestartOf(tl uint32) *TimelineRestart {
	for i := range c.RestartedTimelines {
		if c.RestartedTimelines[i].Timeline == tl {
			return &c.RestartedTimelines[i]
		}
	}
	return nil
}

// tokenRestarted returns the restart window that holds q's LSN, or nil: a
// token on a timeline (-tN) whose writer restarted, at or below the
// window's top. A token without a timeline is taken to be on the newest
// timeline, as its position is compared (rule 9), and is judged against
// that timeline's window, as tokenFork judges it against its fork.
func (c *Cluster) tokenRestarted(q *Query) *TimelineRestart {
	if !q.HasLSN || len(c.RestartedTimelines) == 0 {
		return nil
	}
	tl := q.Timeline
	if tl == 0 {
		tl = c.NewestTimeline
	}
	r := c.RestartOf(tl)
	if r == nil || q.MinLSN > r.Upto {
		return nil
	}
	return r
}

// why is the reason no host proves q's LSN because of r.
func (r *TimelineRestart) why(q *Query) string {
	return q.MinLSN.String() + " on timeline " + strconv.FormatUint(uint64(r.Timeline), 10) + " (<= " + r.Upto.String() +
		") written before " + r.Note + ": a restart cannot be told from a restore or a rebuild"
}

// tokenWithdrawn says why q's LSN is proven by no host for good, or "": a
// window of a restart (tokenRestarted), a write lost in a failover
// (tokenLost), a token of an older timeline that the newest timeline's
// history does not prove (tokenUnproven: until a history file is read), or
// a token without a timeline that may be one (tokenFailedOver).
func (c *Cluster) tokenWithdrawn(q *Query) string {
	if r := c.tokenRestarted(q); r != nil {
		return r.why(q)
	}
	if why := c.tokenLost(q); why != "" {
		return why
	}
	if why := c.tokenUnproven(q); why != "" {
		return why
	}
	return c.tokenFailedOver(q)
}
