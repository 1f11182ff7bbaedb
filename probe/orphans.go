package probe

import "strconv"

// What pgdns knows belongs to a cluster's system identity, not to its
// name in the config: a cluster renamed by a reload (clusters: main: →
// prod:, same hosts) or in the config a restarted pgdns reads must not
// forget its newest timeline, or a superseded primary is answered again.
// Knowledge remembered under a name no longer configured is an orphan: it
// is kept (in memory, handed on by a reload, and in the state file) until
// a configured cluster establishes or pins the same identity, which then
// inherits it (a cluster removed and listed again takes its own back by
// name: adopt; the reload that fixes a mistyped pin takes back what it
// kept aside), or the state is reset (dropOrphans).
//
// Only a cluster with no knowledge of its own under its own name (one new
// to the config: the rename's new name) inherits an orphan. A configured
// cluster that kept its own knowledge across the reload or restart is a
// history of its own: two clusters of one system identifier are a cluster
// and a copy of it (a staging or PITR copy, promoted, in a cluster of its
// own as docs/decisions.md rule 1 asks), and removing the copy's cluster
// must not make production inherit the copy's newest timeline, which would
// set production's primary and replicas aside as superseded (review 6,
// G9). Its orphan stays aside then (dropOrphans), for the copy's cluster.

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

// dropOrphans forgets the orphans claimed: a configured cluster without
// knowledge of its own has the orphan's identity, and took it (claim).
// Every other orphan stays, however many reloads and restarts follow,
// until one does or the state is reset (pgdns -reset-state): it is what
// pgdns proved of a cluster removed from the config, and the reload or
// restart that lists it again takes it back under its name (adopt, seed)
// before anything is answered for it. Dropped once every configured
// cluster without knowledge of its own had another identity, as it was
// before (review 14b, finding 1), a cluster removed and listed again
// settled its identity and newest timeline anew from its hosts and
// answered, as its primary, the old primary a promotion had superseded,
// writable on the old timeline while the new primary was down. Keeping
// it costs no cluster anything it knows: a cluster with knowledge of its
// own inherits no orphan (claim), so a removed copy's entry never sets
// production's primary aside (review 6, G9).
func (p *Prober) dropOrphans() {
	for name, o := range p.orphans {
		for ci, c := range p.state {
			if !p.own[ci] && c.Identity == o.identity {
				delete(p.orphans, name)
				p.orphansChanged++
				break
			}
		}
	}
}
