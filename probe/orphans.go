package probe

import (
	"strconv"

	"github.com/pgdns/pgdns/zone"
)

// What pgdns knows belongs to a cluster's system identity, not to its
// name in the config: a cluster renamed by a reload (clusters: main: →
// prod:, same hosts) or in the config a restarted pgdns reads must not
// forget its newest timeline, or a superseded primary is answered again.
// Knowledge remembered under a name no longer configured is an orphan: it
// is kept (in memory, handed on by a reload, and in the state file) until
// a configured cluster establishes or pins the same identity, which then
// inherits it, or until no configured cluster could: every one has an
// identity and it is another, or knowledge of its own. A cluster that pins
// another identity while it lists hosts seen with the orphan's keeps it
// (a mistyped pin: the reload that fixes the pin takes it back; adopt,
// dropOrphans).
//
// Only a cluster with no knowledge of its own under its own name (one new
// to the config: the rename's new name) inherits an orphan. A configured
// cluster that kept its own knowledge across the reload or restart is a
// history of its own: two clusters of one system identifier are a cluster
// and a copy of it (a staging or PITR copy, promoted, in a cluster of its
// own as docs/decisions.md rule 1 asks), and removing the copy's cluster
// must not make production inherit the copy's newest timeline, which would
// set production's primary and replicas aside as superseded (review 6,
// G9). Its orphan is dropped then (dropOrphans).
//
// Nor do timelines belong to a name: clusters that list the same servers
// under other addresses (siblings, oneServer: a second name for one
// database, or one listing only some of its hosts) share what is learned
// of them. A cluster that took nothing takes a copy of its siblings'
// knowledge (sibling); a newest or witnessed timeline that rises in one is
// handed to the others (raiseSiblings), and one whose identity is just
// established takes theirs (pullSiblings); so are the timelines found
// forked (shareForks). A copy of a cluster (a PITR copy) is other servers
// and shares none of it.

// keepOrphans sets aside what k knows that adopt handed to no cluster
// (taken): clusters p does not probe, and knowledge whose name p probes
// but lists none of its hosts (adopt), kept under orphanName.
func (p *Prober) keepOrphans(k Knowledge, taken map[string]bool) {
	for name, o := range k.clusters {
		if o.identity == 0 || taken[name] {
			continue // nothing learned, or a cluster's own (adopt)
		}
		if p.configured(name) {
			p.log.Warn("cluster lists none of the hosts pgdns saw with its system identifier: what it knew of it is kept aside "+
				"for a cluster that establishes that identity, and the cluster's own is settled anew from its hosts",
				"cluster", name, "system_identifier_before", o.identity, "known_as", orphanName(name, o.identity),
				"newest_timeline", o.newest, "hosts_seen_with_it", len(o.members))
			name = orphanName(name, o.identity)
		}
		o.clocks = nil // measured again; a clock is of one primary's run
		if p.orphans == nil {
			p.orphans = map[string]clusterKnowledge{}
		}
		p.orphans[name] = o
		p.orphansChanged++
	}
}

// orphanName is the name knowledge of identity id, remembered under a
// cluster name still configured whose hosts no longer hold it, is kept
// under aside (and in the state file): never a configured name, which
// cluster names (DNS labels) cannot hold.
func orphanName(name string, id uint64) string {
	return name + "@" + strconv.FormatUint(id, 10)
}

// configured reports whether p probes a cluster called name.
func (p *Prober) configured(name string) bool {
	for _, c := range p.state {
		if c.Name == name {
			return true
		}
	}
	return false
}

// claim folds into cluster ci every orphan of its identity, once it has
// one, and a copy of a sibling's knowledge (sibling), and reports whether
// there was any. The orphans stay until dropOrphans, so that two clusters
// of one identity both inherit.
func (p *Prober) claim(ci int) bool {
	c := p.state[ci]
	if c.Identity == 0 || p.own[ci] || len(p.orphans) == 0 && !p.wantCopy[ci] {
		return false
	}
	claimed := false
	for name, o := range p.orphans {
		if o.identity != c.Identity {
			continue
		}
		p.inherit(ci, o)
		claimed = true
		p.log.Info("cluster inherits what pgdns knew of it under another name: the system identifier is the same",
			"cluster", c.Name, "known_as", name, "system_identifier", o.identity,
			"newest_timeline", o.newest, "timeline_histories", len(o.timelines))
	}
	if p.wantCopy[ci] && p.sibling(ci) {
		claimed = true
	}
	return claimed
}

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
	for cj, o := range p.state {
		if cj == ci || !p.own[cj] || o.Identity != c.Identity || !p.oneServer(ci, cj) {
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
	for cj, o := range p.state {
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
	for cj, o := range p.state {
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
	for cj, o := range p.state {
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
// cluster cj seen with cj's identity are one server run.
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
	}
	return false
}

// dropOrphans forgets the orphans claimed, and those no configured cluster
// could claim: every one without knowledge of its own has an identity, and
// another. An orphan stays while such a cluster has no identity yet, or
// pins another while it lists hosts seen with the orphan's, and none has
// the orphan's.
func (p *Prober) dropOrphans() {
	for name, o := range p.orphans {
		keep := false
		for ci, c := range p.state {
			if p.own[ci] {
				continue // inherits none
			}
			if c.Identity == o.identity {
				keep = false
				break
			}
			// A cluster that pins another identity and lists hosts seen
			// with this one (adopt: a mistyped pin) may name it again.
			keep = keep || c.Identity == 0 || c.IdentityPinned && p.lists(ci, o)
		}
		if !keep {
			delete(p.orphans, name)
			p.orphansChanged++
		}
	}
}
