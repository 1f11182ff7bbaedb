package zone

import (
	"slices"
	"strconv"
)

// A timeline is a number, and two servers promoted independently (a
// stalled failover manager that acts after another, a promotion during a
// split brain) may both take the next number: one timeline number, two
// branches, whose WAL differs from their fork on. A client that wrote on
// one and took its token there (lsn-…-tN) is then owed a replica of that
// branch, and position proves nothing across branches: a replica of the
// other branch replays past the token's position without the write
// (review 5 F12). pgdns cannot tell which branch a token was taken on, so
// once it has seen two writable servers on timeline N — a split brain on
// it, or another host writable on it than the one it saw writable there
// before (physical replication gives a new primary a new timeline, so the
// same timeline under another host is another branch) — N is forked: no
// replica answers a token on N, nor a token without a timeline while N is
// the newest (fail closed; /v1/resolve says why). The primary still passes
// (it has all the data there is now). What is learned is carried from
// snapshot to snapshot and across a reload (probe/handover.go), and
// forgotten at a restart of pgdns.

// markForks learns c's forked timelines from what Decide found: a split
// brain on the newest timeline, or a primary other than the host last
// seen writable on its timeline.
func (c *Cluster) markForks() {
	if c.SplitBrain {
		c.fork(c.NewestTimeline)
	}
	p := c.PrimaryHost()
	switch {
	case p == nil:
	case p.Timeline != c.WriterTimeline:
		c.Writer, c.WriterTimeline = p.Addr, p.Timeline
	case p.Addr != c.Writer:
		c.fork(p.Timeline)
		c.Writer = p.Addr
	}
}

// fork records timeline tl as forked. Forked may be shared with the
// snapshot before (the probe carries it): it is never appended to in
// place.
func (c *Cluster) fork(tl uint32) {
	if tl == 0 || slices.Contains(c.Forked, tl) {
		return
	}
	c.Forked = append(slices.Clip(c.Forked), tl)
}

// forkedToken reports whether q's LSN is on a forked timeline: its own
// timeline, or the newest one for a token without a timeline.
func (c *Cluster) forkedToken(q *Query) bool {
	tl := q.Timeline
	if tl == 0 {
		tl = c.NewestTimeline
	}
	return len(c.Forked) > 0 && slices.Contains(c.Forked, tl)
}

// forkedWhy says why a replica does not answer q's forked token.
func forkedWhy(q *Query, c *Cluster) string {
	tl := q.Timeline
	if tl == 0 {
		tl = c.NewestTimeline
	}
	return "timeline " + strconv.FormatUint(uint64(tl), 10) + " has two branches (two servers were seen writable on it): " +
		"which one " + q.MinLSN.String() + " was written on is unknown"
}
