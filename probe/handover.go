package probe

import (
	"context"
	"maps"
	"time"

	"github.com/pgdns/pgdns/zone"
)

// Knowledge is what a prober learns over time and a successor probing the
// same hosts must not have to learn again: each cluster's identity and
// newest timeline (without them a superseded primary could be answered
// again right after a reload), its timeline histories (lsn- tokens with a
// timeline), each primary's WAL clock (lag bounds), and the replicas
// proven to be on another branch of a primary's timeline (forks.go), for
// the server run that showed it. A reload or a
// Patroni membership change starts a new prober; it inherits this from the
// one it replaces. A restart of pgdns starts from what Config.Remembered
// holds (the state file, remember.go): all of it but the WAL clocks.
type Knowledge struct {
	clusters map[string]clusterKnowledge
}

type clusterKnowledge struct {
	identity uint64
	newest   uint32
	// witnessed is the timeline a replica's lower bound showed above
	// newest (zone.Cluster.Witnessed), witnessedBy that replica and
	// witnessedRun its server run (in the state file too: review 6, G1d).
	witnessed    uint32
	witnessedBy  string
	witnessedRun time.Time
	timelines    map[uint32]timelineHistory
	clocks       map[string]*walHistory // by host address
	forks        map[string]fork        // by the address a replica was last listed under: replicas proven on another branch (forks.go)
	branches     map[uint32]Branch      // by timeline: who wrote it, and whether it forked (branches.go)
	// members are the addresses of hosts seen live with identity
	// (zone.Host.OfIdentity): only they may vote it replaced, and a
	// configured cluster listing one of them takes this knowledge (adopt).
	// nil: not known (a state file written before them).
	members map[string]bool
	// runs are the server runs (postmaster start times) of those hosts
	// as last seen, by address, by which a host moved out by a reload or
	// in the config of a restart, and respelt, is still known for one of
	// them (moved, sibling): in the state file too (Remembered.Runs).
	// nil: none known (a file written before them).
	runs map[string]time.Time
}

// fork is what proved a replica to be on another branch than a writable
// host's, for the server run that showed it (run, the replica's): from is
// the writable host's address and fromRun its server run (zone.Host's
// DivergedFrom, DivergedRun).
type fork struct {
	run, fromRun time.Time
	from, note   string
}

// knowledge returns a copy of what p has learned, read by its aggregator;
// the zero Knowledge when p has stopped or ctx ends first.
func (p *Prober) knowledge(ctx context.Context) Knowledge {
	reply := make(chan Knowledge, 1)
	select {
	case p.requests <- reply:
	case <-ctx.Done():
		return Knowledge{}
	case <-p.stopped:
		return Knowledge{}
	}
	select {
	case k := <-reply:
		return k
	case <-ctx.Done():
		return Knowledge{}
	}
}

// export copies the aggregator's knowledge. Only the aggregator calls it.
func (p *Prober) export() Knowledge {
	k := Knowledge{clusters: map[string]clusterKnowledge{}}
	for ci, c := range p.state {
		k.clusters[c.Name] = p.exportCluster(ci)
	}
	for name, o := range p.orphans {
		k.clusters[name] = o // never modified in place
	}
	return k
}

// exportCluster copies what the aggregator knows of cluster ci.
func (p *Prober) exportCluster(ci int) clusterKnowledge {
	c := p.state[ci]
	ck := clusterKnowledge{identity: c.Identity, newest: c.NewestTimeline, witnessed: c.Witnessed, witnessedBy: c.WitnessedBy,
		witnessedRun: c.WitnessedRun, timelines: map[uint32]timelineHistory{}, clocks: map[string]*walHistory{}, forks: map[string]fork{},
		branches: maps.Clone(p.branches[ci])}
	for tl, h := range p.timelines[ci] {
		ck.timelines[tl] = h // entries are never modified in place
	}
	for addr, f := range p.forksOf(ci) {
		ck.forks[addr] = fork{run: f.Run, fromRun: f.FromRun, from: f.From, note: f.Note}
	}
	ck.members = p.membersOf(ci)
	ck.runs = p.runsOf(ci)
	for hi := range c.Hosts {
		if w := p.history[&c.Hosts[hi]]; w != nil {
			ck.clocks[c.Hosts[hi].Addr] = &walHistory{timeline: w.timeline, system: w.system, run: w.run,
				marks: append([]walMark(nil), w.marks...)}
		}
	}
	return ck
}

// adopt folds a predecessor's knowledge into the aggregator's state, for
// the clusters and hosts both probe. Knowledge follows the identity, not
// the name: a configured cluster takes what was known under its own name
// while its hosts hold it (holds: a host listed there was seen with that
// identity, or shows it now), and otherwise, having none of its own, the
// one entry whose identity its hosts were seen with under another name
// (lists): a blue/green reload that swaps two clusters' hosts under their
// names hands each cluster's knowledge to the name its hosts moved to
// (review 7, H13), as a rename does. What is left, knowledge of clusters
// no longer configured or whose name now lists none of its hosts, is kept
// aside (orphans.go) for a configured cluster that establishes the same
// identity. Only the aggregator calls it.
func (p *Prober) adopt(k Knowledge) {
	for ci := range p.rebuild {
		p.rebuild[ci] = true // what each cluster is built from may change
	}
	taken := map[string]bool{} // entries of k handed to a cluster, or dropped
	has := make([]bool, len(p.state))
	var kept []string // entries a cluster kept under its own name
	for ci, c := range p.state {
		old, ok := k.clusters[c.Name]
		if !ok {
			continue
		}
		if c.IdentityPinned && old.identity != c.Identity {
			taken[c.Name] = true // not applied: seed says so at WARN
			if old.identity != 0 && p.lists(ci, old) {
				// A pin mistyped, or changed and changed back: what
				// pgdns knew of the identity its hosts were seen with
				// waits aside for the pin that names it again
				// (dropOrphans keeps it while they are listed). Dropped,
				// a fixed pin answered a primary it had superseded
				// (review 13, R13b-8).
				old.clocks = nil
				if p.orphans == nil {
					p.orphans = map[string]clusterKnowledge{}
				}
				p.orphans[orphanName(c.Name, old.identity)] = old
				p.orphansChanged++
			}
			continue
		}
		if old.identity == 0 {
			taken[c.Name] = true
			if c.Identity == 0 {
				p.takeOver(ci, old) // no identity, but WAL clocks
			}
			continue // the predecessor knew no identity: nothing of it applies
		}
		if p.holds(ci, old) {
			p.takeOver(ci, old)
			taken[c.Name], has[ci] = true, true
			kept = append(kept, c.Name)
		}
	}
	// A cluster whose name's knowledge is not its hosts' takes the one
	// entry left whose identity exactly it lists hosts of; an entry two
	// clusters list is left to both (claim, by identity).
	wants := map[string][]int{}
	for ci, c := range p.state {
		if has[ci] {
			continue
		}
		var pick string
		n := 0
		for name, o := range k.clusters {
			if !taken[name] && o.identity != 0 && (!c.IdentityPinned || o.identity == c.Identity) && p.lists(ci, o) {
				pick, n = name, n+1
			}
		}
		if n == 1 {
			wants[pick] = append(wants[pick], ci)
		}
	}
	for name, cis := range wants {
		if len(cis) != 1 {
			continue
		}
		ci := cis[0]
		p.takeOver(ci, k.clusters[name])
		taken[name] = true
		o := k.clusters[name]
		p.log.Info("cluster inherits what pgdns knew of it under another name: its hosts were seen with that system identifier there",
			"cluster", p.state[ci].Name, "known_as", name, "system_identifier", o.identity,
			"newest_timeline", o.newest, "timeline_histories", len(o.timelines))
	}
	// A cluster that took nothing and lists a host seen with an identity
	// that another cluster kept under its own name (a host moved from that
	// cluster to this one by the reload) takes a copy: the server's
	// timelines are what they were under the other name, and a primary
	// superseded there stays so here (review 13, R13b-9). So does one
	// whose host is a server run seen with it there (moved): the host
	// moved and respelt (review 14b, finding 3).
	for ci, c := range p.state {
		if p.own[ci] {
			continue
		}
		for _, name := range kept {
			if o := k.clusters[name]; name != c.Name && (!c.IdentityPinned || o.identity == c.Identity) && (p.lists(ci, o) || p.moved(ci, o)) {
				o.clocks = nil
				p.takeOver(ci, o)
				p.log.Info("cluster takes a copy of what pgdns knows under another name: it lists a host seen with that system identifier there",
					"cluster", c.Name, "known_as", name, "system_identifier", o.identity, "newest_timeline", o.newest)
				break
			}
		}
	}
	p.keepOrphans(k, taken)
	for ci := range p.state {
		p.wantCopy[ci] = !p.own[ci] && len(k.clusters) > 0
	}
	for ci := range p.state {
		p.claim(ci)
	}
	p.dropOrphans()
}

// takeOver makes old, an entry of a predecessor's knowledge, cluster ci's own.
func (p *Prober) takeOver(ci int, old clusterKnowledge) {
	c := p.state[ci]
	p.own[ci] = old.identity != 0
	if old.identity != c.Identity {
		// An identity, once established, is kept while any live host
		// has it (zone.Cluster.settleIdentity), across a reload or a
		// membership change too: a warming prober settles one of its
		// own from what it sees, and new hosts of another cluster may
		// outvote the one live host of ours. The predecessor's stands;
		// the next Decide keeps it if a live host has it, and replaces
		// it only by a majority of hosts seen with it if none does.
		// What this prober learned under the other identity is that
		// cluster's, not this one's.
		c.Identity, c.NewestTimeline = old.identity, 0
		p.indexIdentity(ci) // siblings.go
		for hi := range c.Hosts {
			c.Hosts[hi].OfIdentity = 0 // seen with the warming prober's identity, not this one
		}
		c.Witnessed, c.WitnessedBy, c.WitnessedRun = 0, "", time.Time{}
		p.timelines[ci] = map[uint32]timelineHistory{}
		p.branches[ci], p.forks[ci], p.restarts[ci], p.pending[ci] = map[uint32]Branch{}, nil, nil, nil
		if ci < len(p.heldRuns) {
			p.heldRuns[ci] = nil
		}
	}
	p.inherit(ci, old)
}

// holds reports whether cluster ci's hosts hold o, the knowledge remembered
// under its name: one of them was seen with o's identity (o.members; when
// they are not known, as from a state file written before them, every host
// counts), or shows it now. A name that lists none of the hosts its
// identity was seen on (a blue/green swap, every address changed) passes
// the knowledge on by identity instead.
func (p *Prober) holds(ci int, o clusterKnowledge) bool {
	if o.members == nil {
		return true
	}
	for hi := range p.state[ci].Hosts {
		h := &p.state[ci].Hosts[hi]
		if o.members[h.Addr] || h.Seen && h.SystemID == o.identity {
			return true
		}
	}
	return false
}

// lists reports whether cluster ci lists a host seen with o's identity
// under o's name (o.members, known).
func (p *Prober) lists(ci int, o clusterKnowledge) bool {
	for hi := range p.state[ci].Hosts {
		if o.members[p.state[ci].Hosts[hi].Addr] {
			return true
		}
	}
	return false
}

// moved reports whether a host of cluster ci, seen now with o's identity,
// is a server run o's cluster saw among its hosts (o.runs): a host a
// reload moved out of that cluster and respelt (its other network's
// address, a DNS name). Before (review 14b, finding 3) only its old
// address was recognised (lists), and a replica streaming from a
// superseded primary, moved into a cluster of its own under its other
// address, was answered by replica.<that cluster>. A copy of the cluster
// is another run.
func (p *Prober) moved(ci int, o clusterKnowledge) bool {
	return p.showsRun(ci, o.identity, o.runs)
}

// showsRun reports whether a host of cluster ci, seen now with identity,
// is one of the server runs runs holds (by address; the address is not
// compared: the host may be listed under another).
func (p *Prober) showsRun(ci int, identity uint64, runs map[string]time.Time) bool {
	if len(runs) == 0 {
		return false
	}
	for hi := range p.state[ci].Hosts {
		h := &p.state[ci].Hosts[hi]
		if !h.Seen || h.SystemID != identity || h.StartedAt.IsZero() {
			continue
		}
		for _, run := range runs {
			if run.Equal(h.StartedAt) {
				return true
			}
		}
	}
	return false
}

// serverRun is the server run of host h of cluster ci as last seen: its
// postmaster start time, or, before this prober has seen it, the one its
// predecessor (a reload's prober, the state file) last saw at its address
// (heldRuns). Zero: not known.
func (p *Prober) serverRun(ci int, h *zone.Host) time.Time {
	if !h.StartedAt.IsZero() {
		if h.SystemID != p.state[ci].Identity {
			return time.Time{} // another system's run
		}
		return h.StartedAt
	}
	if ci >= len(p.heldRuns) {
		return time.Time{}
	}
	return p.heldRuns[ci][h.Addr]
}

// runsOf lists the server runs of cluster ci's hosts seen live with its
// identity (membersOf), by address (serverRun); nil when none is known.
func (p *Prober) runsOf(ci int) map[string]time.Time {
	c := p.state[ci]
	var out map[string]time.Time
	for hi := range c.Hosts {
		h := &c.Hosts[hi]
		if c.Identity == 0 || h.OfIdentity != c.Identity {
			continue
		}
		if run := p.serverRun(ci, h); !run.IsZero() {
			if out == nil {
				out = map[string]time.Time{}
			}
			out[h.Addr] = run
		}
	}
	return out
}

// inherit folds old, knowledge of cluster ci's identity, into what p
// knows of it: the newer of the two newest timelines, the histories p
// lacks (a history file's replaces a watched one), the forks (applied to
// the host seen in the same server run, whatever address it is listed
// under now, or kept for a host's later sample: pendFork), the WAL
// clocks of its hosts, and who wrote each timeline (mergeBranches: a fork
// either knew stays).
func (p *Prober) inherit(ci int, old clusterKnowledge) {
	c := p.state[ci]
	c.NewestTimeline = max(c.NewestTimeline, old.newest)
	if old.witnessed > c.Witnessed {
		c.Witnessed, c.WitnessedBy, c.WitnessedRun = old.witnessed, old.witnessedBy, old.witnessedRun
	}
	mergeBranches(p.branches[ci], old.branches)
	if c.Identity != 0 && c.Identity == old.identity && ci < len(p.heldRuns) {
		for addr, run := range old.runs {
			if p.heldRuns[ci] == nil {
				p.heldRuns[ci] = map[string]time.Time{}
			}
			if _, ok := p.heldRuns[ci][addr]; !ok {
				p.heldRuns[ci][addr] = run
			}
		}
	}
	for tl, h := range old.timelines {
		if cur, ok := p.timelines[ci][tl]; !ok || !cur.fromFile {
			p.timelines[ci][tl] = h
		}
	}
	for addr, f := range old.forks {
		p.pendFork(ci, addr, f)
	}
	for hi := range c.Hosts {
		h := &c.Hosts[hi]
		if c.Identity != 0 && c.Identity == old.identity && (old.members == nil || old.members[h.Addr]) {
			h.OfIdentity = c.Identity // seen with it (members not known: every host listed counts)
		}
		if h.Seen {
			p.restoreFork(ci, h, h.StartedAt, h.InRecovery, c.Identity != 0 && h.SystemID == c.Identity)
		}
		w := old.clocks[h.Addr]
		if w == nil {
			continue
		}
		if mine := p.history[h]; mine != nil && mine.of(w.system, w.run, w.timeline) {
			for _, m := range mine.marks {
				w.add(m.first, m.lsn)
				w.add(m.last, m.lsn)
			}
		} else if mine != nil {
			continue // the host moved on: the older clock is of no use
		}
		if !h.InRecovery && h.Seen && w.of(h.SystemID, h.StartedAt, h.Timeline) {
			p.history[h] = w
		}
	}
}

// activation is Activate's request: the knowledge to adopt, and a channel
// the aggregator closes once its first snapshot is in the table.
type activation struct {
	knowledge Knowledge
	published chan struct{}
}

// Activate makes an inactive prober publish, at once, after it has
// adopted what predecessor (the prober it replaces, or nil) has learned.
// The predecessor must still be running. It returns once the prober's
// first snapshot is in the table (or ctx is done): a reload that adds or
// renames a cluster answers its names from the moment it returns, instead
// of NXDOMAIN from the old snapshot for as long as the aggregator takes to
// get to it.
func (p *Prober) Activate(ctx context.Context, predecessor *Prober) {
	var k Knowledge
	if predecessor != nil {
		k = predecessor.knowledge(ctx)
	}
	a := activation{knowledge: k, published: make(chan struct{})}
	select {
	case p.updates <- a:
	case <-ctx.Done():
		return
	}
	select {
	case <-a.published:
	case <-ctx.Done():
	}
}

// Deactivate stops a prober from publishing; it keeps probing until its
// Run ends.
func (p *Prober) Deactivate() { p.active.Store(false) }

// membersOf lists the addresses of cluster ci's hosts seen live with its
// identity (zone.Host.OfIdentity).
func (p *Prober) membersOf(ci int) map[string]bool {
	c := p.state[ci]
	out := map[string]bool{}
	for hi := range c.Hosts {
		if h := &c.Hosts[hi]; c.Identity != 0 && h.OfIdentity == c.Identity {
			out[h.Addr] = true
		}
	}
	return out
}
