package probe

import (
	"maps"
	"slices"
	"time"

	"github.com/pgdns/pgdns/zone"
)

// What a prober remembers across restarts of pgdns: the part of its
// Knowledge a trust rule needs and that stays true while pgdns is not
// running. The caller keeps it (internal/state writes it to state.path),
// hands it to the next run in Config.Remembered, and hears of every change
// through Hooks.Learned. WAL clocks are left out: they move on every probe
// of a primary and only bound the lag of replicas, which new probes measure
// again within a few intervals.

// Remembered is what pgdns keeps of one cluster across a restart.
type Remembered struct {
	Identity       uint64 // the established system identifier; 0: none yet
	NewestTimeline uint32 // the highest timeline proven on a host of Identity
	// Timelines are what is known of each timeline's history, by timeline.
	Timelines map[uint32]TimelineHistory
	// Forks are the replicas proven to be on another branch of a writable
	// host's timeline (forks.go), by the address the replica was last
	// listed under: a proof that holds for the replica's server (its
	// later runs at that address, its run under any address), which may
	// outlive a restart of pgdns.
	Forks map[string]Fork
	// Serial is the cluster's SOA serial (0: none known). A burst of
	// changes runs the serial ahead of the clock (zone.NextSerial), and
	// a restart that started from the clock gave a lower one (review 5,
	// F5): the next run's first serial follows this one instead.
	Serial uint32
	// Branches says, by timeline, the first server seen writable on it
	// and whether another was too (branches.go): a fork, and the memory
	// that would see one, must outlive a restart of pgdns between the two
	// promotions.
	Branches map[uint32]Branch
	// Witnessed is the timeline above NewestTimeline that a replica's
	// lower bound showed (zone.Cluster.Witnessed; 0: none), WitnessedBy
	// that replica's address and WitnessedRun its server run then: the
	// promotion it proves supersedes every writable host below it, and a
	// pgdns restarted while that replica is down must still know it
	// (review 6, G1d).
	Witnessed    uint32
	WitnessedBy  string
	WitnessedRun time.Time
	// Members are the addresses of hosts seen live with Identity
	// (zone.Host.OfIdentity): after a restart only they may vote it
	// replaced, so that another cluster's hosts listed by mistake never
	// outvote it while its own are down (review 7, H6), and a configured
	// cluster that lists one of them and none of its own name's takes
	// this knowledge (a blue/green swap: review 7, H13). nil: not known
	// (a file written before them): every host the cluster lists at the
	// start counts as seen with it.
	Members []string
	// Runs are the server runs (postmaster start times) of those hosts
	// as last seen, by address: a host moved out of the cluster in the
	// config of a restart and respelt (its other network's address, a
	// DNS name) is still known, by its run, for one of its servers, as
	// at a reload (a replica streaming from a superseded primary stays
	// aside under its new cluster: review 14b, finding 3). nil: none
	// known (a file written before them): such a host is known by its
	// address only.
	Runs map[string]time.Time
}

// Fork is a replica proven to be on another branch than writable host
// From; Run is the postmaster start time of the replica's run last seen
// with it (a later run at the same address keeps the proof: review 6,
// G7b).
type Fork struct {
	Run  time.Time
	From string
	// FromRun is From's server run when it was last seen (zero: not
	// known, as in a file written before it): the proof holds against
	// that run under any address.
	FromRun time.Time
	Note    string // the proof, for people
}

// TimelineHistory is what is known of one timeline's history: where the
// timelines it descends from ended.
type TimelineHistory struct {
	Ends     []zone.TimelineEnd
	FromFile bool // read from the timeline's history file: exact; else lower bounds the probe watched
}

// seed folds what a previous run of pgdns learned into the state of a
// prober not yet running, by the rules of adopt: an entry whose identity
// differs from a pinned one is not applied (said at WARN), and one under
// a name no longer configured waits for a cluster of its identity
// (orphans.go). A fork is restored at the sample of a host that the same
// server run answers, under any address (restoreFork).
func (p *Prober) seed(remembered map[string]Remembered) {
	if len(remembered) == 0 {
		return
	}
	k := Knowledge{clusters: map[string]clusterKnowledge{}}
	for name, r := range remembered {
		if r.Identity == 0 {
			continue // nothing learned: timelines belong to an identity
		}
		ck := clusterKnowledge{identity: r.Identity, newest: r.NewestTimeline, timelines: map[uint32]timelineHistory{},
			branches: maps.Clone(r.Branches)}
		if r.Members != nil { // nil: a file written before them, who was seen with it is not known
			ck.members = make(map[string]bool, len(r.Members))
			for _, a := range r.Members {
				ck.members[a] = true
			}
		}
		ck.runs = maps.Clone(r.Runs)
		if r.Witnessed > r.NewestTimeline {
			ck.witnessed, ck.witnessedBy, ck.witnessedRun = r.Witnessed, r.WitnessedBy, r.WitnessedRun
		}
		for tl, h := range r.Timelines {
			ck.timelines[tl] = timelineHistory{ends: slices.Clone(h.Ends), fromFile: h.FromFile}
		}
		for addr, f := range r.Forks {
			if ck.forks == nil {
				ck.forks = map[string]fork{}
			}
			ck.forks[addr] = fork{run: f.Run, fromRun: f.FromRun, from: f.From, note: f.Note}
		}
		k.clusters[name] = ck
	}
	for _, c := range p.state {
		if r, ok := k.clusters[c.Name]; ok && c.IdentityPinned && r.identity != c.Identity {
			p.log.Warn("remembered knowledge not applied: its system identifier is not the one the config pins "+
				"(another cluster's state file?); it is dropped, or kept aside while the cluster lists hosts seen with it (a mistyped pin)",
				"cluster", c.Name, "system_identifier_pinned", c.Identity, "system_identifier_remembered", r.identity,
				"dropped_newest_timeline", r.newest, "dropped_timeline_histories", len(r.timelines))
		}
	}
	p.adopt(k)
	for ci, c := range p.state {
		p.seeded[ci] = c.Identity != 0 && !c.IdentityPinned
		// A serial is the zone's, by name: it follows whatever the
		// identity (a dropped one included).
		p.serialFloor[ci] = remembered[c.Name].Serial
	}
}

// followSerials makes the serial of each cluster of snap, the prober's
// first snapshot (StampSerials gave a cluster new to this run of pgdns the
// clock), follow the one a previous run last gave it: max(clock,
// remembered+1), so that the serial never goes back across a restart.
// Only the first prober has remembered serials; one started by a reload
// carries on from the snapshot served.
func (p *Prober) followSerials(snap *zone.Snapshot) {
	for ci, c := range snap.Clusters {
		if ci < len(p.serialFloor) && p.serialFloor[ci] != 0 && !zone.SerialLess(p.serialFloor[ci], c.Serial) {
			c.Serial = p.serialFloor[ci] + 1
		}
	}
}

// serialOf is cluster ci's serial in the last snapshot built (0: none).
func (p *Prober) serialOf(ci int) uint32 {
	if p.last == nil || ci >= len(p.last.Clusters) || p.last.Clusters[ci] == nil {
		return 0
	}
	return p.last.Clusters[ci].Serial
}

// serialAhead reports whether cluster ci's serial is ahead of the clock of
// the last snapshot: only then would a restart starting from the clock go
// back, so only then is a new serial worth a write of the state file (a
// change at a quiet time takes the clock's second and writes nothing).
func (p *Prober) serialAhead(ci int) bool {
	return p.last != nil && zone.SerialLess(uint32(p.last.Built.Unix()), p.serialOf(ci))
}

// rememberedFrom says where cluster ci's identity came from, for the logs.
func (p *Prober) rememberedFrom(ci int) string {
	if p.seeded[ci] {
		return "the state file"
	}
	return "this run of pgdns"
}

// maxPendingForks bounds the remembered forks a cluster keeps for
// replicas no configured host has shown yet (one unlisted, or listed
// under an address not probed yet): beyond it the oldest runs go.
const maxPendingForks = 64

// pendFork keeps remembered fork f, of the replica last listed under
// addr, for a host of cluster ci that shows its server run (restoreFork).
// A host of ci that holds the same proof already (a reload's successor
// that saw it again) needs none.
func (p *Prober) pendFork(ci int, addr string, f fork) {
	for hi := range p.state[ci].Hosts {
		if h := &p.state[ci].Hosts[hi]; h.DivergedFrom != "" && h.Seen && (h.Addr == addr || h.StartedAt.Equal(f.run) && !f.run.IsZero()) {
			return
		}
	}
	if p.pending[ci] == nil {
		p.pending[ci] = map[string]fork{}
	}
	p.pending[ci][addr] = f
	for len(p.pending[ci]) > maxPendingForks {
		oldest := ""
		for a, g := range p.pending[ci] {
			if oldest == "" || g.run.Before(p.pending[ci][oldest].run) {
				oldest = a
			}
		}
		delete(p.pending[ci], oldest)
	}
}

// restoreFork applies to host h of cluster ci, whose server run started at
// run, a remembered fork of its server: the one remembered under h's
// address, of any run (a restart keeps the data directory, and with it
// the other branch: review 6, G7b), or else one proven of the same run
// under another address (a replica relisted by a reload, or in the config
// a restarted pgdns reads: G7). record calls it after watchReplay.
func (p *Prober) restoreFork(ci int, h *zone.Host, run time.Time, inRecovery, ours bool) {
	pend := p.pending[ci]
	if len(pend) == 0 {
		return
	}
	f, ok := pend[h.Addr]
	if ok {
		delete(pend, h.Addr)
	} else if !run.IsZero() {
		for addr, g := range pend {
			if g.run.Equal(run) {
				f, ok = g, true
				delete(pend, addr)
				break
			}
		}
	}
	if ok && ours && inRecovery && h.DivergedFrom == "" {
		h.DivergedFrom, h.DivergedNote, h.DivergedRun = f.from, f.note, f.fromRun
		p.proven(ci, h, f.run) // the run last seen with it, if not the one now
	}
}

// reportLearned calls Hooks.Learned when what p remembers differs from
// what it last reported. Only the aggregator calls it, after a publish of
// an active prober: an inactive one (a reload warming up) reports once it
// takes over, with what it adopted.
func (p *Prober) reportLearned() { p.report(false, time.Now()) }

// reportFinal is reportLearned as the prober stops: the flush positions of
// the writers running now are reported too, for the state file's last
// write.
func (p *Prober) reportFinal() { p.report(true, time.Now()) }

// positionsEvery is the least time between two reports that only the
// running writers' positions (Branch.Last, Insert) have moved: they move
// with every probe of a writing primary, and each report is a write of the
// state file (synced), so they are written at most once a second (or a
// probe interval, when longer) instead of at every probe. A pgdns that
// crashes (kill -9, the OOM killer, a reboot) leaves positions at most
// that old: rule 13's window and rule 12's check of a later run compare
// with them (review 6, on G2b), and a restore in place that lost what the
// writer wrote after them would pass for a restart.
func (p *Prober) positionsEvery() time.Duration { return max(p.cfg.Interval, time.Second) }

func (p *Prober) report(final bool, now time.Time) {
	hook := p.cfg.Hooks.Learned
	if hook == nil || !p.active.Load() {
		return
	}
	positions := final || now.Sub(p.reportedAt) >= p.positionsEvery()
	if p.reported != nil && p.remembersAsReported(positions) {
		return
	}
	p.reported, p.orphansReported, p.reportedAt = p.remembered(), p.orphansChanged, now
	p.dirty.reported()
	hook(p.reported)
}

// remembered copies what p would keep across a restart, by cluster name:
// the configured clusters with an established identity, and the orphans
// (orphans.go) under their old names.
func (p *Prober) remembered() map[string]Remembered {
	out := make(map[string]Remembered, len(p.state))
	for ci, c := range p.state {
		if c.Identity == 0 {
			continue
		}
		r := Remembered{Identity: c.Identity, NewestTimeline: c.NewestTimeline,
			Timelines: make(map[uint32]TimelineHistory, len(p.timelines[ci]))}
		for tl, h := range p.timelines[ci] {
			// Entries are replaced, never modified in place: sharing
			// the slice is safe.
			r.Timelines[tl] = TimelineHistory{Ends: h.ends, FromFile: h.fromFile}
		}
		r.Forks = p.forksOf(ci)
		r.Serial = p.serialOf(ci)
		r.Branches = maps.Clone(p.branches[ci])
		r.Witnessed, r.WitnessedBy, r.WitnessedRun = c.Witnessed, c.WitnessedBy, c.WitnessedRun
		r.Members = append([]string{}, slices.Sorted(maps.Keys(p.membersOf(ci)))...) // known, if none
		r.Runs = p.runsOf(ci)
		out[c.Name] = r
	}
	for name, o := range p.orphans {
		r := Remembered{Identity: o.identity, NewestTimeline: o.newest, Timelines: make(map[uint32]TimelineHistory, len(o.timelines)),
			Branches: maps.Clone(o.branches), Witnessed: o.witnessed, WitnessedBy: o.witnessedBy, WitnessedRun: o.witnessedRun,
			Members: members(o.members), Runs: maps.Clone(o.runs)}
		for tl, h := range o.timelines {
			r.Timelines[tl] = TimelineHistory{Ends: h.ends, FromFile: h.fromFile}
		}
		for addr, f := range o.forks {
			if r.Forks == nil {
				r.Forks = map[string]Fork{}
			}
			r.Forks[addr] = f.export()
		}
		out[name] = r
	}
	return out
}

// forksOf lists cluster ci's forks, by the address each replica was last
// listed under: those of its hosts, and those remembered and not applied
// to a host yet (pendFork).
func (p *Prober) forksOf(ci int) map[string]Fork {
	var out map[string]Fork
	c := p.state[ci]
	for hi := range c.Hosts {
		h := &c.Hosts[hi]
		if h.DivergedFrom == "" {
			continue
		}
		if out == nil {
			out = map[string]Fork{}
		}
		out[h.Addr] = Fork{Run: h.StartedAt, From: h.DivergedFrom, FromRun: h.DivergedRun, Note: h.DivergedNote}
	}
	for addr, f := range p.pending[ci] {
		if _, ok := out[addr]; !ok {
			if out == nil {
				out = map[string]Fork{}
			}
			out[addr] = f.export()
		}
	}
	return out
}

// export is f as Remembered carries it.
func (f fork) export() Fork {
	return Fork{Run: f.run, From: f.from, FromRun: f.fromRun, Note: f.note}
}

// remembersAsReported reports whether p would remember exactly what it
// last reported, without allocating: it runs after every publish. A first
// writer's flush and insert positions (Branch.Last, Insert) move with
// every probe of it: they count once that run is no longer seen writable
// (its final ones, which a later run at its address must start past), or
// when positions (positionsEvery has passed since the last report, or the
// prober is stopping: the state file's last write).
//
// What p remembers of a cluster changes only where the cluster is built
// anew (a result, a leader, a forgotten timeline: build.go), so once
// builds are tracked it looks at the clusters built since it last looked
// (dirtyClusters.unreported), and, when positions, at those whose running
// writers' positions moved since the last report (positionsMoved): at ten
// thousand hosts with a state file every publish compared every cluster's
// timelines, branches and forks with the last report. It looks at every
// cluster after an adoption, and before builds are tracked.
func (p *Prober) remembersAsReported(positions bool) bool {
	if p.orphansReported != p.orphansChanged {
		return false
	}
	d := &p.dirty
	if d.isUnreported == nil || d.unreportedAll {
		n := len(p.orphans) // unchanged since reported: kept as they were
		for ci, c := range p.state {
			if c.Identity == 0 {
				continue
			}
			n++
			if same, withPositions := p.clusterAsReported(ci); !same || (positions && !withPositions) {
				return false
			}
		}
		if n != len(p.reported) {
			return false
		}
		if d.isUnreported != nil { // from here on, what was built is enough
			d.reported()
			for ci, c := range p.state {
				if _, withPositions := p.clusterAsReported(ci); c.Identity != 0 && !withPositions {
					d.positionsMoved(ci)
				}
			}
		}
		return true
	}
	look := func(ci int) (same, withPositions bool) {
		c := p.state[ci]
		if c.Identity == 0 {
			_, had := p.reported[c.Name]
			return !had, !had // lost the identity it had when reported
		}
		return p.clusterAsReported(ci)
	}
	for _, ci := range d.unreported {
		if same, withPositions := look(ci); !same || (positions && !withPositions) {
			return false
		}
	}
	if positions {
		for _, ci := range d.moved {
			if _, withPositions := look(ci); !withPositions {
				return false
			}
		}
		d.reported() // as reported, positions and all
		return true
	}
	for _, ci := range d.unreported {
		if _, withPositions := look(ci); !withPositions {
			d.positionsMoved(ci)
		}
	}
	d.lookedAt()
	return true
}

// clusterAsReported reports whether cluster ci, which has an identity, is
// remembered as last reported, the positions of its running writers aside
// (same) and with them (withPositions).
func (p *Prober) clusterAsReported(ci int) (same, withPositions bool) {
	p.dirty.looks++
	c := p.state[ci]
	r, ok := p.reported[c.Name]
	if !ok || r.Identity != c.Identity || r.NewestTimeline != c.NewestTimeline || len(r.Timelines) != len(p.timelines[ci]) {
		return false, false
	}
	if r.Witnessed != c.Witnessed || r.WitnessedBy != c.WitnessedBy || !r.WitnessedRun.Equal(c.WitnessedRun) {
		return false, false
	}
	for tl, h := range p.timelines[ci] {
		was, ok := r.Timelines[tl]
		if !ok || was.FromFile != h.fromFile || !slices.Equal(was.Ends, h.ends) {
			return false, false
		}
	}
	if !p.forksAsReported(ci, r.Forks) || !maps.EqualFunc(p.branches[ci], r.Branches, Branch.equal) || !p.lastsAsReported(ci, r.Branches, false) {
		return false, false
	}
	if r.Serial != p.serialOf(ci) && p.serialAhead(ci) {
		return false, false
	}
	n, runs := 0, 0
	for hi := range c.Hosts {
		if h := &c.Hosts[hi]; h.OfIdentity == c.Identity {
			if _, found := slices.BinarySearch(r.Members, h.Addr); !found {
				return false, false // a host newly seen with the identity: the state file must list it
			}
			n++
			if run := p.serverRun(ci, h); !run.IsZero() {
				if !run.Equal(r.Runs[h.Addr]) {
					return false, false // a new server run: the state file must hold it
				}
				runs++
			}
		}
	}
	if n != len(r.Members) || runs != len(r.Runs) {
		return false, false
	}
	return true, p.lastsAsReported(ci, r.Branches, true)
}

// lastsAsReported reports whether the flush and insert positions of
// cluster ci's first writers are as reported, those of the runs writable
// now aside unless positions.
func (p *Prober) lastsAsReported(ci int, reported map[uint32]Branch, positions bool) bool {
	for tl, b := range p.branches[ci] {
		if (b.Last != reported[tl].Last || b.Insert != reported[tl].Insert) && (positions || !p.writing[ci][tl]) {
			return false
		}
	}
	return true
}

// forksAsReported reports whether cluster ci's forks are reported,
// without allocating while it has none (the usual case).
func (p *Prober) forksAsReported(ci int, reported map[string]Fork) bool {
	some := len(p.pending[ci]) > 0
	for hi := range p.state[ci].Hosts {
		some = some || p.state[ci].Hosts[hi].DivergedFrom != ""
	}
	if !some {
		return len(reported) == 0
	}
	return maps.EqualFunc(p.forksOf(ci), reported, func(a, b Fork) bool {
		return a.Run.Equal(b.Run) && a.From == b.From && a.FromRun.Equal(b.FromRun) && a.Note == b.Note
	})
}

// members lists the addresses of m sorted, nil when m is (not known).
func members(m map[string]bool) []string {
	if m == nil {
		return nil
	}
	return append([]string{}, slices.Sorted(maps.Keys(m))...)
}
