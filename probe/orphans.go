package probe

import "strconv"

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
