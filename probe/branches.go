package probe

import (
	"cmp"
	"slices"
	"strconv"
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
// is the same server run under another address (a configured name and the
// address Patroni reports), or a later run at the same address whose WAL
// provably continues the last one's (continues): a restart keeps its WAL,
// and its branch. Every address a run of the first writer was seen
// writable under is its address from then on (Aliases): a server relisted
// by a reload (an IP moved to a DNS name, a second IP, a forwarder) and
// then restarted is the writer restarted, under the same check (review 6,
// G6). A new run at such an address is just as often another server
// (review 6, G2): a node rebuilt from a surviving standby, a data
// directory restored from a backup, a VM or pod given the old address;
// promoted again without the first branch's history file, it takes the
// same timeline number. A new run under an address the writer was never
// seen under is another server, whatever its WAL: nothing ties it to the
// writer (a pgdns restarted with hosts renamed while the server restarted
// too forks the timeline, failing closed).

// Branch is what is known of who wrote one timeline: the first server
// seen writable on it and, once another was, the fork.
type Branch struct {
	Writer string // the first writable server's configured address (host:port)
	// Aliases are the other addresses a run of the writer was seen
	// writable under (at most maxAliases, the latest): its later runs
	// there are its restarts, if their WAL continues.
	Aliases []string
	Run     time.Time // its postmaster start time, as last seen writable (zero: not known)
	At      zone.LSN  // its insert position when first seen writable
	// Last is the writer's flush position on the timeline as last seen
	// (pg_current_wal_flush_lsn(), 0: not known): WAL on disk, which any
	// later run of the same server starts past, a crash included.
	Last zone.LSN
	// Insert is the highest insert position of the writer on the
	// timeline as last seen (pg_current_wal_insert_lsn(), 0: not known):
	// what a token of its writes may name, flushed or not.
	Insert zone.LSN
	// Replicated is the highest position on the timeline a replica of the
	// cluster was seen to have received or replayed while its WAL receiver
	// streamed the timeline (0: none seen past Insert's run): WAL that only the
	// timeline's writer wrote, so that writer reached it, whether or not
	// the probe saw it insert there (its last probe came before a write
	// that reached one replica, and the writer died or was cut off from
	// pgdns). It widens the reach of a timeline-less token's window
	// (reachList) alone: the writer's own positions judge its restarts
	// and crashes, and a replica read after the writer can be ahead of it.
	Replicated zone.LSN
	// ReplicatedBy is the configured address of the replica that showed
	// Replicated, for people.
	ReplicatedBy string
	// Possible is the highest position a replica of the cluster without
	// a WAL receiver was seen to hold (received or replayed) while its
	// timeline was known only to be at least PossibleFloor, at or below
	// this one (the greater of its control file's checkpoint and minimum
	// recovery timelines): WAL of this timeline, which its writer wrote,
	// or of a later one. Past where this timeline ended it may be a write
	// the later timelines lack (a replica first probed after its upstream
	// died, review 12a 4c), so it widens the window of a timeline-less
	// token there, failing closed (zone.TimelineReach.Possible).
	// PossibleBy is that replica's configured address, for people.
	Possible      zone.LSN
	PossibleBy    string
	PossibleFloor uint32
	// StatsReset is the statistics' reset time of the writer's run Run as
	// last seen (Sample.StatsReset, in µs; 0: not known): another in that
	// run is a crash recovery, or a reset, pgdns saw no other sign of,
	// however long it was away (statsreset.go).
	StatsReset int64
	// Upto is the top of the timeline's restart window (zone.TimelineRestart),
	// 0 while the writer was never seen in a new run: no lsn- token on
	// the timeline at or below it is answered. Restarted says, for people,
	// which restart set it.
	Upto      zone.LSN
	Restarted string
	// Forked is "" or what shows the fork, for people: the servers seen
	// writable on the timeline and where (zone.TimelineFork.Note).
	Forked string
}

// equal reports whether a and b say the same, but for Last and Insert,
// which move with every probe of the writer (remembersAsReported).
func (a Branch) equal(b Branch) bool {
	return a.Writer == b.Writer && slices.Equal(a.Aliases, b.Aliases) && a.Run.Equal(b.Run) && a.At == b.At && a.Forked == b.Forked &&
		a.Upto == b.Upto && a.Restarted == b.Restarted && a.StatsReset == b.StatsReset
}

// restart returns b with its restart window raised to what a new run of
// its writer, seen at addr, started at run and first seen at insert
// position pos, may have written anew: up to the higher of the previous
// run's last seen position (Insert, or Last) and pos. A restart cannot be
// told from a restore in place or a rebuild promoted to the same timeline
// (review 6, G2b, G5), and a crash loses asynchronous commits whose tokens
// the new run then writes anew (G10): every token of the run before fails
// closed, and the new run's writes above the window are proven by
// position.
func (b Branch) restart(addr string, run time.Time, pos zone.LSN) Branch {
	return b.window(max(b.Insert, b.Last, pos), addr+"'s server restarted at "+run.UTC().Format(time.RFC3339))
}

// window returns b with its restart window raised to upto, which note
// explains, unless it reaches that far already.
func (b Branch) window(upto zone.LSN, note string) Branch {
	if upto > b.Upto {
		b.Upto, b.Restarted = upto, note
	}
	return b
}

// maxAliases bounds a writer's remembered addresses beside its first.
const maxAliases = 8

// writerAt reports whether addr is an address b's first writer was seen
// writable under.
func (b Branch) writerAt(addr string) bool {
	return b.Writer == addr || slices.Contains(b.Aliases, addr)
}

// alias returns b with addr among its writer's addresses. The slice is
// new: a Branch is copied by value into what is reported and handed over.
func (b Branch) alias(addr string) Branch {
	if b.writerAt(addr) {
		return b
	}
	keep := b.Aliases[max(0, len(b.Aliases)+1-maxAliases):]
	b.Aliases = append(slices.Clone(keep), addr)
	return b
}

// writableRun is what the probe saw of the current server run of a host
// while it was writable: whether that run was promoted (it was seen in
// recovery before, or its last checkpoint is on an older timeline than
// the one it writes) and its flush position at its last sample.
type writableRun struct {
	run      time.Time
	promoted string // "" or how the run shows that it was promoted
	flush    zone.LSN
	// crashed is "" or what showed that the run went through crash
	// recovery since it was last seen writable (watchCrash): the first
	// writer's run, seen writable again, was reinitialised.
	crashed string
	// statsReset is the run's statistics' reset time at its last sample
	// (Sample.StatsReset; 0: not read): another in the same run is a crash
	// recovery, or a reset (watchStatsReset).
	statsReset int64
}

// watchCrash keeps, of host h's server run as its last sample showed it
// (h still holds it), what showed the server in crash recovery since: a
// probe that failed with a session refused so (crashRecovery), or a
// session ended with the server's crash notice (Sample.Crashed). When the
// run was writable then, and is seen writable again, a crash of one of its
// processes reinitialised it (classify.go), and whatever WAL it had not
// written out is lost.
func (p *Prober) watchCrash(h *zone.Host, why string) {
	r, ok := p.runs[h]
	if !ok || r.crashed != "" || !h.Seen || h.InRecovery || !r.run.Equal(h.StartedAt) {
		return
	}
	r.crashed = why
	p.runs[h] = r
}

// crashTaken forgets that the server run of host i of cluster ci went
// through crash recovery: its window is set.
func (p *Prober) crashTaken(ci, i int) {
	if ci < len(p.state) && i < len(p.state[ci].Hosts) {
		k := &p.state[ci].Hosts[i]
		if r, ok := p.runs[k]; ok {
			r.crashed = ""
			p.runs[k] = r
		}
	}
}

// watchRun keeps what sample s of host h tells of its server run while it
// is writable; h still holds its previous sample. A server that starts
// writable on timeline N has its last checkpoint on N (the shutdown
// checkpoint of its last run, or the one that ends its crash recovery
// before it accepts a session); one promoted in this run was in recovery,
// and its last checkpoint stays on the timeline it left until the one that
// the promotion requests completes (spread over checkpoint_timeout's
// completion target: seconds at least).
func (p *Prober) watchRun(h *zone.Host, s Sample) {
	if s.InRecovery {
		if len(p.runs) > 0 {
			delete(p.runs, h)
		}
		return
	}
	r, ok := p.runs[h]
	if !ok || !r.run.Equal(s.StartedAt) {
		r = writableRun{run: s.StartedAt}
		if h.Seen && h.InRecovery && h.StartedAt.Equal(s.StartedAt) {
			r.promoted = "seen in recovery in that run"
		}
	}
	r.watchStatsReset(s)
	if r.promoted == "" && s.CheckpointTimeline < s.Timeline {
		r.promoted = "its last checkpoint is on timeline " + strconv.FormatUint(uint64(s.CheckpointTimeline), 10)
	}
	r.flush = s.FlushLSN
	p.runs[h] = r
}

// runOf is what watchRun kept of the server run of host i of cluster ci,
// as decided in h: nothing (not promoted, no flush position known) when it
// kept nothing of that run.
func (p *Prober) runOf(ci, i int, h *zone.Host) writableRun {
	if ci < len(p.state) && i < len(p.state[ci].Hosts) {
		if r, ok := p.runs[&p.state[ci].Hosts[i]]; ok && r.run.Equal(h.StartedAt) {
			return r
		}
	}
	return writableRun{run: h.StartedAt}
}

// continues says why writable run r of the host at b's writer's address,
// writable on b's timeline at insert position pos, is not b's branch
// continued, or "": a restart starts past every position the last run
// flushed (Last), and is not promoted again to a timeline it already
// wrote; a server rebuilt or restored at that address and promoted has its
// own WAL on the timeline from the point it was promoted at.
func (b Branch) continues(r writableRun, pos zone.LSN) string {
	switch {
	case r.promoted != "":
		return "promoted to it in its own run: " + r.promoted
	case pos < b.Last:
		return "at " + pos.String() + ", below " + b.Last.String() + " that the run before flushed"
	}
	return ""
}

// sameServer reports whether writable host h is b's first writer: an
// address it was seen under, or the same server run.
func (b Branch) sameServer(addr string, run time.Time) bool {
	return b.writerAt(addr) || (!b.Run.IsZero() && b.Run.Equal(run))
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
// for its timeline, a split brain or Patroni's leader key, or stopping
// while other sessions on it write on (not another cluster's, nor a
// second entry of one server).
func writableOurs(c *zone.Cluster, h *zone.Host) bool {
	if c.Identity == 0 || !h.Seen || h.InRecovery || h.SystemID != c.Identity {
		return false
	}
	switch h.Aside {
	case zone.NotAside:
		return h.Role == zone.RolePrimary
	case zone.AsideSplitBrain, zone.AsideSuperseded, zone.AsideAbandoned, zone.AsideNotLeader, zone.AsideStopping:
		return true
	}
	return false
}

// watchBranches folds into what cluster ci knows of its timelines'
// writers the writable hosts of c, just decided, and gives c the forked
// timelines. A fork is logged once, at ERROR.
func (p *Prober) watchBranches(ci int, c *zone.Cluster) {
	known := p.branches[ci]
	if ci >= len(p.writing) {
		p.writing = append(p.writing, make([]map[uint32]bool, ci+1-len(p.writing))...)
	}
	if p.writing[ci] == nil {
		p.writing[ci] = map[uint32]bool{}
	}
	writing := p.writing[ci]
	clear(writing)
	for i := range c.Hosts {
		h := &c.Hosts[i]
		if !writableOurs(c, h) {
			continue
		}
		r := p.runOf(ci, i, h)
		b, ok := known[h.Timeline]
		why := ""
		switch {
		case !ok:
			known[h.Timeline] = Branch{Writer: h.Addr, Run: h.StartedAt, At: h.InsertLSN, Last: r.flush, Insert: h.InsertLSN, StatsReset: r.statsReset}
			writing[h.Timeline] = true
			continue
		case b.Forked != "":
			continue
		case b.writerAt(h.Addr) && b.Run.Equal(h.StartedAt):
			// The first writer's run: its flush position moves on. Its
			// insert position never moves back in one postmaster run but
			// when a crash of one of its processes reinitialised the
			// server (the start time stays): the WAL it had not flushed
			// is lost, asynchronous commits included, as in a restart.
			// The run refused a session in crash recovery meanwhile, or
			// its WAL is back: the window of a restart (review 7, H5:
			// clients write past the lost position before the first
			// probe after, on a busy primary). Or its statistics were reset
			// since b kept their reset time (statsreset.go).
			r.crashed = cmp.Or(r.crashed, b.statsMoved(r))
			switch {
			case r.crashed != "":
				b = p.crashWindow(ci, i, c, h, b, r.crashed)
				known[h.Timeline] = b
			case h.InsertLSN < b.Insert:
				b = b.window(b.Insert, h.Addr+"'s server crashed (WAL back from "+b.Insert.String()+" to "+h.InsertLSN.String()+")")
				known[h.Timeline] = b
			}
			if r.flush > b.Last || h.InsertLSN > b.Insert || b.statsMoved(r) != "" || b.StatsReset == 0 && r.statsReset != 0 {
				b.Last, b.Insert = max(b.Last, r.flush), max(b.Insert, h.InsertLSN)
				b.StatsReset = cmp.Or(r.statsReset, b.StatsReset)
				known[h.Timeline] = b
			}
			writing[h.Timeline] = true
			continue
		case !b.Run.IsZero() && b.Run.Equal(h.StartedAt):
			// The first writer's run under another address: that
			// address is the writer's too, for its later runs.
			b = b.alias(h.Addr)
			if r.crashed = cmp.Or(r.crashed, b.statsMoved(r)); r.crashed != "" {
				b = p.crashWindow(ci, i, c, h, b, r.crashed)
			}
			b.Last, b.Insert = max(b.Last, r.flush), max(b.Insert, h.InsertLSN)
			b.StatsReset = cmp.Or(r.statsReset, b.StatsReset)
			known[h.Timeline] = b
			writing[h.Timeline] = true
			continue
		case b.writerAt(h.Addr):
			if why = b.continues(r, h.InsertLSN); why == "" {
				// Restarted: the same server, whose newest run another
				// address of it (Patroni's) would show, or one restored
				// or rebuilt there: its WAL cannot tell. The tokens of
				// the run before fail closed (restart).
				was := b.Upto
				b = b.restart(h.Addr, h.StartedAt, h.InsertLSN)
				b.Run, b.Last, b.Insert = h.StartedAt, max(b.Last, r.flush), max(b.Insert, h.InsertLSN)
				b.StatsReset = r.statsReset // the new run's
				known[h.Timeline] = b
				if b.Upto != was && p.active.Load() && p.log != nil { // (a test's prober may have none)
					p.log.Warn("a new server run of a timeline's writer: it cannot be told from a server restored or rebuilt "+
						"there, so no lsn- token on the timeline at or below the window is answered (rule 13)",
						"cluster", c.Name, "timeline", h.Timeline, "host", h.Addr, "window_upto", b.Upto.String(), "seen", b.Restarted)
				}
				writing[h.Timeline] = true
				continue
			}
		}
		// Another server: the timeline has two branches.
		b.Forked = b.forkNote(h.Addr, h.InsertLSN, c.SplitBrain)
		if why != "" {
			b.Forked += " in another server run (" + why + ")"
		}
		known[h.Timeline] = b
		if p.active.Load() {
			p.log.Error("timeline forked: two servers were writable on it (promoted without seeing each other's "+
				"history file); no lsn- token on it is answered from now on, nor one without a timeline while it is the newest",
				"cluster", c.Name, "timeline", h.Timeline, "seen", b.Forked)
		}
	}
	p.watchReplicated(ci, c)
	c.ForkedTimelines = p.forkList(ci)
	// What the siblings saw is merged once for both windows (a scan of
	// every configured cluster: sharedBranches).
	shared := p.sharedBranches(ci)
	c.RestartedTimelines = p.restartList(ci, shared)
	c.Reached = p.reachList(ci, c.NewestTimeline, shared)
}

// watchReplicated raises each timeline's Replicated with the received and
// replayed positions of cluster ci's replicas whose WAL receiver streams
// that timeline (an exact timeline: the receiver's, read on both sides of
// those positions), for timelines whose writer the probe knows. Such WAL
// was written by the timeline's writer (a replica of another branch of
// the timeline only widens the window, failing closed). A replica paused
// or delayed (recovery_min_apply_delay) holds WAL it has not replayed.
// A replica without a WAL receiver (or whose receiver's timeline is not
// known) has only a lower bound of its timeline: its position raises
// Possible of every such timeline at or above that bound, since it may
// be WAL of any of them.
func (p *Prober) watchReplicated(ci int, c *zone.Cluster) {
	known := p.branches[ci]
	for i := range c.Hosts {
		h := &c.Hosts[i]
		if c.Identity == 0 || !h.Seen || !h.InRecovery || h.SystemID != c.Identity {
			continue
		}
		held := max(h.ReceiveLSN, h.ReplayLSN)
		if !h.TimelineExact {
			for tl, b := range known {
				if tl >= h.Timeline && held > b.Possible {
					b.Possible, b.PossibleBy, b.PossibleFloor = held, h.Addr, h.Timeline
					known[tl] = b
				}
			}
			continue
		}
		if b, ok := known[h.Timeline]; ok && held > b.Replicated {
			b.Replicated, b.ReplicatedBy = held, h.Addr
			known[h.Timeline] = b
		}
	}
}

// reach is how far b's timeline was seen written: its writer's highest
// insert or flush position, or a replica's received or replayed WAL past
// both.
func (b Branch) reach() zone.TimelineReach {
	r := zone.TimelineReach{Insert: max(b.Insert, b.Last)}
	if b.Replicated > r.Insert {
		r.Insert, r.Replica = b.Replicated, b.ReplicatedBy
	}
	if b.Possible > r.Insert {
		// A receiver-less replica's position, which may be this
		// timeline's: the window past the timeline's end (zone).
		r.Possible, r.PossibleBy, r.PossibleFloor = b.Possible, b.PossibleBy, b.PossibleFloor
	}
	return r
}

// reachList returns, from branches (ci's with its siblings':
// sharedBranches), how far the writer of each of cluster ci's timelines
// below newest was seen to write (zone.Cluster.Reached: a token without a
// timeline past where such a timeline ended and at or below that may be a
// write lost in the failover), in timeline order: the same slice while
// none changed (a published one is never modified), nil while there are
// none. Of a writer seen only as the state file has it, its position there.
func (p *Prober) reachList(ci int, newest uint32, branches map[uint32]Branch) []zone.TimelineReach {
	if ci >= len(p.reached) {
		p.reached = append(p.reached, make([][]zone.TimelineReach, ci+1-len(p.reached))...)
	}
	was := p.reached[ci]
	n, same := 0, true
	for tl, b := range branches {
		if reach := b.reach(); tl < newest && reach.Insert != 0 {
			n++
			reach.Timeline = tl
			if i := slices.IndexFunc(was, func(r zone.TimelineReach) bool { return r.Timeline == tl }); i < 0 || was[i] != reach {
				same = false
			}
		}
	}
	if same && n == len(was) {
		return was
	}
	var list []zone.TimelineReach
	for tl, b := range branches {
		if reach := b.reach(); tl < newest && reach.Insert != 0 {
			reach.Timeline = tl
			list = append(list, reach)
		}
	}
	slices.SortFunc(list, func(a, b zone.TimelineReach) int { return int(a.Timeline) - int(b.Timeline) })
	p.reached[ci] = list
	return list
}

// crashWindow returns b, the branch of writable host i of cluster c (ci),
// with the window of a restart (restart) up to the higher of the insert
// position last seen of the run and where it is seen now: the run went
// through crash recovery (crashed says how it showed), so the WAL it had
// not written out is lost and its positions are written anew. Said once,
// at WARN.
func (p *Prober) crashWindow(ci, i int, c *zone.Cluster, h *zone.Host, b Branch, crashed string) Branch {
	p.crashTaken(ci, i)
	was := b.Upto
	b = b.window(max(b.Insert, b.Last, h.InsertLSN), h.Addr+"'s server reinitialised after a crash ("+crashed+")")
	if b.Upto != was && p.active.Load() && p.log != nil {
		p.log.Warn("a timeline's writer went through crash recovery (a crash of one of its processes reinitialised it, "+
			"its start time unchanged): WAL it had not written out is lost, asynchronous commits included, so no lsn- token "+
			"on the timeline at or below the window is answered (rule 13)",
			"cluster", c.Name, "timeline", h.Timeline, "host", h.Addr, "window_upto", b.Upto.String(), "seen", b.Restarted)
	}
	return b
}

// restartList returns cluster ci's restart windows, from branches (ci's
// with its siblings': sharedBranches), in timeline order, as
// the snapshot carries them: the same slice while none changed (a
// published one is never modified), nil while there are none.
func (p *Prober) restartList(ci int, branches map[uint32]Branch) []zone.TimelineRestart {
	if ci >= len(p.restarts) {
		p.restarts = append(p.restarts, make([][]zone.TimelineRestart, ci+1-len(p.restarts))...)
	}
	n, same := 0, true
	was := zone.Cluster{RestartedTimelines: p.restarts[ci]}
	for tl, b := range branches {
		if b.Upto == 0 {
			continue
		}
		n++
		if r := was.RestartOf(tl); r == nil || r.Upto != b.Upto || r.Note != b.Restarted {
			same = false
		}
	}
	if same && n == len(p.restarts[ci]) {
		return p.restarts[ci]
	}
	var list []zone.TimelineRestart
	for tl, b := range branches {
		if b.Upto != 0 {
			list = append(list, zone.TimelineRestart{Timeline: tl, Upto: b.Upto, Note: b.Restarted})
		}
	}
	slices.SortFunc(list, func(a, b zone.TimelineRestart) int { return int(a.Timeline) - int(b.Timeline) })
	p.restarts[ci] = list
	return list
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
// different first writers of one timeline are a fork. A writer's later run
// at its address is left to watchBranches, which compares it with old's
// run (continues); of one run the higher flush position is kept.
func mergeBranches(mine, old map[uint32]Branch) {
	for tl, b := range old {
		cur, ok := mine[tl]
		if ok && cur.Writer == b.Writer && cur.Run.Equal(b.Run) {
			b.Last, b.Insert = max(b.Last, cur.Last), max(b.Insert, cur.Insert)
		}
		if ok && cur.Replicated > b.Replicated {
			b.Replicated, b.ReplicatedBy = cur.Replicated, cur.ReplicatedBy
		}
		if ok && cur.Possible > b.Possible {
			b.Possible, b.PossibleBy, b.PossibleFloor = cur.Possible, cur.PossibleBy, cur.PossibleFloor
		}
		if ok && cur.Upto > b.Upto {
			// The highest window either saw stands.
			b.Upto, b.Restarted = cur.Upto, cur.Restarted
		}
		if ok && !b.Run.IsZero() && cur.Run.Equal(b.Run) && cur.Forked == "" {
			// One run: what either saw it under is its address.
			for _, addr := range append([]string{cur.Writer}, cur.Aliases...) {
				b = b.alias(addr)
			}
		}
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
