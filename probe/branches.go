package probe

import (
	"slices"
	"time"

	"github.com/pgdns/pgdns/zone"
)

// Who wrote each timeline. Two servers promoted without seeing each
// other's history file take the same next timeline number (a failover
// that stalled, then a second promotion; or a primary promoted, dead
// before its history file reached anyone, and another promoted after it):
// two branches of "timeline N" exist, and an lsn- token taken on either
// compares with the other's positions as if they were one WAL (review 5,
// F12). The probe remembers, per timeline, the first server it saw
// writable on it (its configured address and postmaster start time); a
// different server writable on the same timeline, at the same time (a
// split brain) or later, forks it: zone.TimelineFork, which no token on it
// passes, and which is never undone but by -reset-state. The same server
// is the same address (a restart keeps its WAL, and its branch) or the same
// server run under another address (a configured name and the address
// Patroni reports); a server re-cloned at the same address is a replica
// first, and any later promotion of it takes a new timeline number.

// Branch is what is known of who wrote one timeline: the first server
// seen writable on it and, once another was, the fork.
type Branch struct {
	Writer string    // the first writable server's configured address (host:port)
	Run    time.Time // its postmaster start time, as last seen writable (zero: not known)
	At     zone.LSN  // its insert position when first seen writable
	// Forked is "" or what shows the fork, for people: the servers seen
	// writable on the timeline and where (zone.TimelineFork.Note).
	Forked string
}

// equal reports whether a and b say the same.
func (a Branch) equal(b Branch) bool {
	return a.Writer == b.Writer && a.Run.Equal(b.Run) && a.At == b.At && a.Forked == b.Forked
}

// sameServer reports whether writable host h is b's first writer: the
// same configured address, or the same server run.
func (b Branch) sameServer(addr string, run time.Time) bool {
	return b.Writer == addr || (!b.Run.IsZero() && b.Run.Equal(run))
}

// forkNote says how timeline tl of b was forked by server addr, seen
// writable on it at position at.
func (b Branch) forkNote(addr string, at zone.LSN, split bool) string {
	note := b.Writer + " writable on it at " + b.At.String() + ", then " + addr + " at " + at.String()
	if split {
		note += "; split brain seen"
	}
	return note
}

// writableOurs reports whether h, in cluster c as Decide left it, is a
// live writable server of c's identity: the primary, or one set aside
// for its timeline, a split brain or Patroni's leader key (not another
// cluster's, nor a second entry of one server).
func writableOurs(c *zone.Cluster, h *zone.Host) bool {
	if c.Identity == 0 || !h.Seen || h.InRecovery || h.SystemID != c.Identity {
		return false
	}
	switch h.Aside {
	case zone.NotAside:
		return h.Role == zone.RolePrimary
	case zone.AsideSplitBrain, zone.AsideSuperseded, zone.AsideAbandoned, zone.AsideNotLeader:
		return true
	}
	return false
}

// watchBranches folds into what cluster ci knows of its timelines'
// writers the writable hosts of c, just decided, and gives c the forked
// timelines. A fork is logged once, at ERROR.
func (p *Prober) watchBranches(ci int, c *zone.Cluster) {
	known := p.branches[ci]
	for i := range c.Hosts {
		h := &c.Hosts[i]
		if !writableOurs(c, h) {
			continue
		}
		b, ok := known[h.Timeline]
		switch {
		case !ok:
			known[h.Timeline] = Branch{Writer: h.Addr, Run: h.StartedAt, At: h.InsertLSN}
		case b.Forked == "" && b.Writer == h.Addr && !b.Run.Equal(h.StartedAt):
			// Restarted: the same server, whose newest run another
			// address of it (Patroni's) would show.
			b.Run = h.StartedAt
			known[h.Timeline] = b
		case b.Forked != "" || b.sameServer(h.Addr, h.StartedAt):
		default:
			b.Forked = b.forkNote(h.Addr, h.InsertLSN, c.SplitBrain)
			known[h.Timeline] = b
			if p.active.Load() {
				p.log.Error("timeline forked: two servers were writable on it (promoted without seeing each other's "+
					"history file); no lsn- token on it is answered from now on, nor one without a timeline while it is the newest",
					"cluster", c.Name, "timeline", h.Timeline, "seen", b.Forked)
			}
		}
	}
	c.ForkedTimelines = p.forkList(ci)
}

// forkList returns cluster ci's forked timelines, in timeline order, as
// the snapshot carries them: the same slice while none is added (a
// published one is never modified), nil while there are none.
func (p *Prober) forkList(ci int) []zone.TimelineFork {
	n := 0
	for _, b := range p.branches[ci] {
		if b.Forked != "" {
			n++
		}
	}
	if n == len(p.forks[ci]) {
		return p.forks[ci]
	}
	list := make([]zone.TimelineFork, 0, n)
	for tl, b := range p.branches[ci] {
		if b.Forked != "" {
			list = append(list, zone.TimelineFork{Timeline: tl, Note: b.Forked})
		}
	}
	slices.SortFunc(list, func(a, b zone.TimelineFork) int { return int(a.Timeline) - int(b.Timeline) })
	p.forks[ci] = list
	return list
}

// mergeBranches folds old, what a predecessor (or the state file, or an
// orphan) knew of a cluster's timelines' writers, into mine: old's first
// writer stands (it was seen first); a fork either knew stays; two
// different first writers of one timeline are a fork.
func mergeBranches(mine, old map[uint32]Branch) {
	for tl, b := range old {
		cur, ok := mine[tl]
		switch {
		case !ok:
		case b.Forked == "" && cur.Forked != "":
			b.Forked = cur.Forked
		case b.Forked == "" && !b.sameServer(cur.Writer, cur.Run):
			b.Forked = b.forkNote(cur.Writer, cur.At, false)
		}
		mine[tl] = b
	}
}
