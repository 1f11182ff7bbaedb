package probe

import (
	"maps"
	"slices"

	"github.com/pgdns/pgdns/zone"
)

// Timelines belong to the servers, not to a name in the config: clusters
// that list the same servers under other addresses (siblings, oneServer: a
// second name for one database, or one listing only some of its hosts)
// share what is learned of them. A cluster that took nothing takes a copy
// of its siblings' knowledge (sibling); a newest or witnessed timeline
// that rises in one is handed to the others (raiseSiblings), and one whose
// identity is just established takes theirs (pullSiblings); so are the
// timelines found forked (shareForks); and how far each timeline's writer
// was seen to write, and the windows of its restarts (sharedBranches). A
// copy of a cluster (a PITR copy) is other servers and shares none of it.

// sibling folds into cluster ci, which took no knowledge while another
// cluster kept some (wantCopy: a cluster added by a reload, or one the
// state file has no entry for), a copy of what pgdns knows under every
// configured cluster with knowledge of its own whose servers ci's hosts
// are: a host of each, seen with the identity, is one server run (system
// identifier and postmaster start time) under two addresses. A second name
// for one database, its hosts spelt otherwise (names and addresses, the
// addresses of another network), is one history: without the copy the
// new name settled its identity and timelines anew from its hosts and
// answered under it a primary that pgdns kept out under the other name as
// superseded (review 13, R13b-1). A copy of a cluster (a PITR copy) is
// other servers, and inherits nothing this way. WAL clocks are measured
// again: a clock is of one host's samples. It reports whether it copied
// any, and ci then has knowledge of its own.
func (p *Prober) sibling(ci int) bool {
	c := p.state[ci]
	copied := false
	for _, cj := range p.sameIdentity(ci) {
		o := p.state[cj]
		if cj == ci || !p.own[cj] || o.Identity != c.Identity || !p.oneServer(ci, cj) && !p.heldServer(ci, cj) {
			continue
		}
		k := p.exportCluster(cj)
		k.clocks = nil
		p.inherit(ci, k)
		copied = true
		p.log.Info("cluster takes a copy of what pgdns knows under another name: its hosts are that cluster's servers under other addresses",
			"cluster", c.Name, "known_as", o.Name, "system_identifier", k.identity,
			"newest_timeline", k.newest, "timeline_histories", len(k.timelines))
	}
	if copied {
		p.own[ci], p.wantCopy[ci] = true, false
	}
	return copied
}

// heldServer reports whether a live host of cluster ci is a server run
// that cluster cj's predecessor (the state file a restarted pgdns read, or
// a reload's prober) saw among cj's hosts, listed by cj now or not
// (heldRuns): the host was moved out of cj, in the config of a restart or
// by a reload while pgdns could not reach it, and respelt. moved is the
// same at a reload, for a host seen by then. Before, a restart forgot the runs of
// replicas (the state file kept none), and a replica streaming from a
// superseded primary, moved into a cluster of its own under its other
// address in the config of the restart, was answered by replica.<that
// cluster> (test/movedrespeltreplica_restart_e2e_test.go).
func (p *Prober) heldServer(ci, cj int) bool {
	return cj < len(p.heldRuns) && p.showsRun(ci, p.state[cj].Identity, p.heldRuns[cj])
}

// raiseSiblings hands cluster ci's newest timeline, and a newer timeline
// a replica's lower bound showed (Witnessed), just raised by what its hosts
// show, to every other configured cluster of its identity that lists one
// of its servers (oneServer: a second name for one database, its hosts
// spelt otherwise, or listing only some of them) and knows less: a
// promotion to a host that other cluster does not list supersedes the old
// primary there too. Without it the other name answered the old primary,
// writable on the superseded timeline, while pgdns kept it out of this
// one's primary (review 13, R13b-2). A copy of the cluster (a PITR copy,
// other servers) is not raised. The clusters raised are built again
// before the publish ends (p.raised).
func (p *Prober) raiseSiblings(ci int) {
	c := p.state[ci]
	for _, cj := range p.sameIdentity(ci) {
		o := p.state[cj]
		if cj == ci || o.Identity != c.Identity || !p.oneServer(cj, ci) || !lift(o, c) {
			continue
		}
		p.markRebuild(cj)
		p.raised = append(p.raised, cj)
		if p.active.Load() {
			p.log.Info("cluster's newest timeline raised by another cluster that lists the same servers",
				"cluster", o.Name, "by", c.Name, "system_identifier", c.Identity, "newest_timeline", o.NewestTimeline,
				"witnessed_timeline", o.Witnessed)
		}
	}
}

// pullSiblings is raiseSiblings and shareForks the other way, for cluster
// ci whose identity was just established: the siblings that decided
// before it could not hand it what they knew then. ci is built again
// before the publish ends when it took anything.
func (p *Prober) pullSiblings(ci int) {
	c := p.state[ci]
	for _, cj := range p.sameIdentity(ci) {
		o := p.state[cj]
		if cj == ci || o.Identity != c.Identity || !p.oneServer(ci, cj) {
			continue
		}
		lifted := lift(c, o)
		if forked := p.takeForks(ci, cj); !lifted && !forked {
			continue
		}
		p.raised = append(p.raised, ci)
		if p.active.Load() {
			p.log.Info("cluster's newest timeline raised by another cluster that lists the same servers",
				"cluster", c.Name, "by", o.Name, "system_identifier", c.Identity, "newest_timeline", c.NewestTimeline,
				"witnessed_timeline", c.Witnessed)
		}
	}
}

// shareForks hands the timelines cluster ci just found forked (two
// servers seen writable on one: rule 12) to every other configured
// cluster of its identity that lists one of its servers (oneServer), as
// raiseSiblings does the newest timeline: a cluster listing only replicas
// of such a timeline sees no writer, and without the fork answered a
// replica of the dead branch that the cluster seeing both writers kept out
// (review 13, R13b-7). The clusters given one are built again before the
// publish ends.
func (p *Prober) shareForks(ci int) {
	c := p.state[ci]
	for _, cj := range p.sameIdentity(ci) {
		o := p.state[cj]
		if cj == ci || o.Identity != c.Identity || !p.oneServer(cj, ci) || !p.takeForks(cj, ci) {
			continue
		}
		p.markRebuild(cj)
		p.raised = append(p.raised, cj)
	}
}

// takeForks folds cluster from's forked timelines into cluster to's
// branches, and reports whether any was new to it.
func (p *Prober) takeForks(to, from int) bool {
	taken := false
	for tl, b := range p.branches[from] {
		if b.Forked == "" {
			continue
		}
		cur, ok := p.branches[to][tl]
		if ok && cur.Forked != "" {
			continue
		}
		if ok {
			cur.Forked = b.Forked
		} else {
			cur = b
		}
		p.branches[to][tl] = cur
		taken = true
	}
	return taken
}

// lift raises dst's newest and witnessed timelines to src's, and reports
// whether it raised either.
func lift(dst, src *zone.Cluster) bool {
	raised := false
	if src.NewestTimeline > dst.NewestTimeline {
		dst.NewestTimeline, raised = src.NewestTimeline, true
	}
	if src.Witnessed > dst.Witnessed && src.Witnessed > dst.NewestTimeline {
		dst.Witnessed, dst.WitnessedBy, dst.WitnessedRun, raised = src.Witnessed, src.WitnessedBy, src.WitnessedRun, true
	}
	return raised
}

// oneServer reports whether a live host of cluster ci and a host of
// cluster cj seen with cj's identity are one server run, or a live host of
// ci is the server run cj remembers as a timeline's writer (Branch.Run,
// its identity cj's): a host moved out of cj by a reload, or in the config
// a restarted pgdns reads, and respelt as it moved (its other network's
// address, a DNS name) is listed by cj under no address, and without its
// run cj's knowledge never reached it: primary.<its new cluster> answered
// the old primary a promotion had superseded under cj (review 14b,
// finding 2). A copy of the cluster is another run.
func (p *Prober) oneServer(ci, cj int) bool {
	a, b := p.state[ci], p.state[cj]
	for hi := range a.Hosts {
		h := &a.Hosts[hi]
		if !h.Seen || h.StartedAt.IsZero() || h.SystemID != a.Identity {
			continue
		}
		for oi := range b.Hosts {
			o := &b.Hosts[oi]
			if o.Seen && o.OfIdentity == b.Identity && o.SystemID == h.SystemID && o.StartedAt.Equal(h.StartedAt) {
				return true
			}
		}
		if h.SystemID != b.Identity || cj >= len(p.branches) {
			continue
		}
		for _, br := range p.branches[cj] {
			if !br.Run.IsZero() && br.Run.Equal(h.StartedAt) {
				return true
			}
		}
	}
	return false
}

// sharedBranches returns what cluster ci knows of each timeline's writer,
// with, for the windows that refuse tokens (reachList's rule 9 reach,
// restartList's rule 13 restarts), the highest positions any sibling
// (another configured cluster of ci's identity listing one of its
// servers: oneServer) saw: what pgdns saw of the servers is the servers',
// whatever cluster lists them. A cluster that does not list the writer
// never sees it insert nor restart: before, "reporting", listing only the
// replicas of "main", answered lsn-W.any.reporting with them after a
// failover that lost W, which main refused, having seen the old primary
// insert past W (test/sibling_writerreach_e2e_test.go). Only highs are
// taken, so a sibling's knowledge can only refuse more. p.branches[ci]
// itself (not to be modified) when ci has no sibling.
func (p *Prober) sharedBranches(ci int) map[uint32]Branch {
	own := p.branches[ci]
	if ci >= len(p.state) || p.state[ci].Identity == 0 {
		return own // (a test's prober may have no state)
	}
	c := p.state[ci]
	same := p.sameIdentity(ci)
	if len(same) < 2 {
		return own // no other cluster of its identity: no sibling, nothing scanned
	}
	var merged map[uint32]Branch
	for _, cj := range same {
		o := p.state[cj]
		if cj == ci || o.Identity != c.Identity || cj >= len(p.branches) || len(p.branches[cj]) == 0 ||
			!p.oneServer(ci, cj) && !p.oneServer(cj, ci) {
			continue
		}
		if merged == nil {
			merged = maps.Clone(own)
			if merged == nil {
				merged = map[uint32]Branch{}
			}
		}
		for tl, ob := range p.branches[cj] {
			b := merged[tl]
			b.Insert, b.Last = max(b.Insert, ob.Insert), max(b.Last, ob.Last)
			if ob.Replicated > b.Replicated {
				b.Replicated, b.ReplicatedBy = ob.Replicated, ob.ReplicatedBy
			}
			if ob.Possible > b.Possible {
				b.Possible, b.PossibleBy, b.PossibleFloor = ob.Possible, ob.PossibleBy, ob.PossibleFloor
			}
			if ob.Upto > b.Upto {
				b.Upto, b.Restarted = ob.Upto, ob.Restarted
			}
			merged[tl] = b
		}
	}
	if merged == nil {
		return own
	}
	return merged
}

// sameIdentity returns the configured clusters whose identity is cluster
// ci's, ci among them, in configuration order: the only clusters that can
// be its siblings. They come from an index by identity (byIdentity), kept
// as identities are established or replaced (indexIdentity, called where
// a cluster's Identity is written: build.go, handover.go), so that a
// cluster with no sibling pays a map lookup and not a scan of every
// configured cluster (sharedBranches is called by every build: at 10,000
// hosts about 3,300 clusters scanned for each of ~3,300 builds a second,
// issue 28). ci's own entry is checked on every call. Every configured
// cluster when ci has no identity yet (the callers ask then for none).
func (p *Prober) sameIdentity(ci int) []int {
	if len(p.indexedAs) != len(p.state) {
		p.indexedAs = make([]uint64, len(p.state))
		p.byIdentity = map[uint64][]int{}
		for cj := range p.state {
			p.indexIdentity(cj)
		}
	}
	p.indexIdentity(ci)
	id := p.state[ci].Identity
	if id == 0 {
		if p.all == nil || len(p.all) != len(p.state) {
			p.all = make([]int, len(p.state))
			for cj := range p.all {
				p.all[cj] = cj
			}
		}
		return p.all
	}
	return p.byIdentity[id]
}

// indexIdentity files cluster ci under its identity in byIdentity, out of
// the one it was filed under before, if that changed.
func (p *Prober) indexIdentity(ci int) {
	if len(p.indexedAs) != len(p.state) {
		return // not made yet: sameIdentity makes it whole
	}
	id := p.state[ci].Identity
	was := p.indexedAs[ci]
	if id == was {
		return
	}
	// New slices, not the old ones changed in place: a caller may be
	// going through one (sameIdentity's result).
	if was != 0 {
		l := slices.DeleteFunc(slices.Clone(p.byIdentity[was]), func(cj int) bool { return cj == ci })
		if len(l) == 0 {
			delete(p.byIdentity, was)
		} else {
			p.byIdentity[was] = l
		}
	}
	if id != 0 {
		l := p.byIdentity[id]
		i, _ := slices.BinarySearch(l, ci)
		p.byIdentity[id] = slices.Insert(slices.Clip(slices.Clone(l)), i, ci)
	}
	p.indexedAs[ci] = id
}
