package probe

import (
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pgdns/pgdns/zone"
)

// Build and publish: the observed state (intake.go) becomes a snapshot,
// with roles (zone.Decide), lags (lag.go), timeline histories and SOA
// serials, and what changed is logged once.
//
// A publish costs what changed, not every host: a cluster nothing of which
// changed since its last build (no result of its hosts, no leader, tags,
// forgotten timeline or adopted knowledge) and that its last build still
// describes by the clock (holdsUntil: no live host has gone stale since)
// is the same *zone.Cluster in the new snapshot as in the last one.
// Published clusters are never modified, so a reader holding an older
// snapshot sees what it saw; and comparing two snapshots (serials, flux,
// logged and reported changes) skips a shared cluster at once. At ten
// thousand hosts every host rebuilt and compared cluster by cluster by
// name cost 24 ms a publish (BenchmarkAggregator).

// publish builds a new snapshot from the observed state, derives roles and
// lags, logs what changed, and stores it.
func (p *Prober) publish() {
	now := p.now()
	stale := p.cfg.StaleAfter()
	snap := &zone.Snapshot{
		Ready:      p.probed == len(p.done),
		Built:      now,
		StaleAfter: stale,
		Interval:   p.cfg.Interval,
		Default:    p.defCluster,
		Networks:   p.cfg.Networks,
		Clusters:   make([]*zone.Cluster, 0, len(p.state)),
	}
	// Everything is built anew for the first snapshot and when readiness
	// changes (every serial moves then: zone.StampSerials); every cluster
	// is looked at while orphans wait to be claimed (claim), or after an
	// adoption (dirtyClusters.all). Otherwise only the clusters marked
	// (markRebuild) or whose last build no longer holds by the clock are
	// built, and the rest are the last snapshot's: a publish costs the
	// clusters that changed, not the fleet.
	all := p.last == nil || p.last.Ready != snap.Ready || p.dirty.all || len(p.orphans) > 0
	p.deferredUntil = time.Time{}
	if all {
		p.dirty.looked += len(p.state)
		for ci := range p.state {
			claimed := false
			if p.last != nil && p.last.Ready == snap.Ready && !p.rebuild[ci] && !now.After(p.holdsUntil[ci]) {
				if claimed = p.claim(ci); !claimed {
					snap.Clusters = append(snap.Clusters, p.last.Clusters[ci])
					continue
				}
			}
			snap.Clusters = append(snap.Clusters, p.build(ci, now, stale, claimed))
		}
		p.dirty.reset()
	} else {
		snap.Clusters = append(snap.Clusters, p.last.Clusters...)
		snap.BaseSeq, snap.Changed = p.last.Seq, p.deferBuilds(p.dirty.take(p, now))
		p.dirty.looked += len(snap.Changed)
		for _, ci := range snap.Changed {
			snap.Clusters[ci] = p.build(ci, now, stale, false)
		}
	}
	// A cluster whose newest timeline a sibling raised, or that took a
	// sibling's fork (raiseSiblings, pullSiblings, shareForks), is built
	// again before anything is published: built earlier in this publish,
	// or shared with the last snapshot, it still answers the superseded
	// primary, or the forked replica.
	for len(p.raised) > 0 {
		raised := p.raised
		p.raised = nil
		for _, cj := range raised {
			snap.Clusters[cj] = p.build(cj, now, stale, false)
			if !all {
				if i, found := slices.BinarySearch(snap.Changed, cj); !found {
					snap.Changed = slices.Insert(snap.Changed, i, cj)
				}
			}
		}
	}
	snap.Seq = snapshotSeq.Add(1)
	p.dropOrphans()
	first := p.last == nil
	snap.StampSerials(p.serialBase())
	if first {
		p.followSerials(snap)
	}
	p.logHidden(snap)
	p.updateFlux(snap, now)
	p.driveOnReady(snap)
	p.last = snap
	// Refresh's copy, before the table has snap: a Refresh asked by
	// anyone who saw snap in the table (in the hooks below, or on
	// another goroutine meanwhile) probes snap's hosts. Stored after the
	// hooks, it found the snapshot before (or none) and completed at
	// once, probing nothing.
	p.published.Store(snap)
	if snap.Ready {
		p.readyOnce.Do(func() { close(p.ready) })
	}
	if p.active.Load() {
		// Changes are those between two published snapshots, whichever
		// prober published the one before: a prober that takes over at a
		// reload compares with its predecessor's last, so hosts that did
		// not change are not logged, counted or reported as changed.
		prev := p.table.Store(snap)
		p.logChanges(prev, snap)
		if hook := p.cfg.Hooks.Published; hook != nil {
			hook(prev, snap)
		}
	}
}

// build builds cluster ci anew (claimed: it has just inherited orphans).
func (p *Prober) build(ci int, now time.Time, stale time.Duration, claimed bool) *zone.Cluster {
	p.dirty.built++
	if p.cfg.Hooks.Learned != nil {
		p.dirty.builtSince(ci, len(p.state))
	}
	p.rebuild[ci] = false
	p.setUrgent(ci, false)
	forks := len(p.forkList(ci))
	c := p.decide(ci, now, stale)
	if len(c.ForkedTimelines) != forks {
		// A fork this build found (watchBranches) changes what proves a
		// replica's branch: decide again before anything is published.
		c = p.decide(ci, now, stale)
	}
	if !claimed && p.claim(ci) {
		// An identity just established is one remembered under
		// another name: decide again with what was learned of it,
		// before anything is published.
		c = p.decide(ci, now, stale)
	}
	p.computeLag(p.state[ci], c, now, stale)
	p.attachHistories(ci, c)
	p.holdsUntil[ci] = holdsUntil(c, now, stale, p.cfg.Interval, p.cfg.MaxFails)
	p.dirty.expires(ci, p.holdsUntil[ci])
	if nl := notLeader(c); nl != p.notLeader[ci] {
		p.notLeader[ci] = nl
		if nl {
			p.dirty.notLeaders++
		} else {
			p.dirty.notLeaders--
		}
	}
	return c
}

// markRebuild has cluster ci built anew at the next publish.
func (p *Prober) markRebuild(ci int) {
	p.setUrgent(ci, true)
	p.markSteady(ci)
}

// setUrgent sets whether cluster ci's build is due at the next publish
// whatever its round (Prober.urgent).
func (p *Prober) setUrgent(ci int, urgent bool) {
	if p.urgent == nil {
		if !urgent {
			return
		}
		p.urgent = make([]bool, len(p.rebuild))
	}
	p.urgent[ci] = urgent
}

// isUrgent reports whether cluster ci's build is due at the next publish
// whatever its round.
func (p *Prober) isUrgent(ci int) bool { return ci < len(p.urgent) && p.urgent[ci] }

// markSteady has cluster ci built anew for a steady result (hold.go): at
// the next publish, or, while its round is under way, at a later one
// (deferBuild).
func (p *Prober) markSteady(ci int) {
	if !p.rebuild[ci] {
		if p.markedAt == nil {
			p.markedAt = make([]time.Time, len(p.rebuild))
		}
		p.markedAt[ci] = time.Now() // on the wall clock, as rounds are
		p.rebuild[ci] = true
		p.dirty.marked = append(p.dirty.marked, ci)
	}
}

// snapshotSeq numbers the snapshots built in this process
// (zone.Snapshot.Seq), across probers: a reload's prober compares its
// first snapshot with its predecessor's last.
var snapshotSeq atomic.Uint64

// holdsUntil is the last moment the build c of a cluster, built at now,
// describes it by the clock alone: until its first live host's last good
// probe is older than stale (zone.Cluster.Decide then has it down, and a
// primary's lag figures go with it). A host already down for that reason
// is noted with the time since its last good probe, which the clock
// moves: such a cluster is built again an interval later (or at its next
// result), its note then as old as that at most. A host never seen, or
// down by maxFails failures, does not age.
//
// Such a cluster was built at every publish, as every cluster once was:
// when pgdns fell behind at ten thousand hosts and its hosts aged out
// together, every publish rebuilt all of them, a publish after each batch
// of results, and the aggregator fell further behind, for good (issue 28:
// not one host live after 3 minutes, 2,082 probes/s of 13,333).
func holdsUntil(c *zone.Cluster, now time.Time, stale, interval time.Duration, maxFails int) time.Time {
	until := time.Unix(1<<40, 0) // nothing in it ages
	for i := range c.Hosts {
		h := &c.Hosts[i]
		switch {
		case !h.Seen || h.Fails >= maxFails:
		case h.Role == zone.RoleDown:
			if next := now.Add(interval); next.Before(until) {
				until = next // down by age: its note counts the time
			}
		case h.ProbedAt.Add(stale).Before(until):
			until = h.ProbedAt.Add(stale)
		}
	}
	return until
}

// notLeader reports whether c has a writable host set aside as not the
// member holding Patroni's leader key (leaderUnsure).
func notLeader(c *zone.Cluster) bool {
	for i := range c.Hosts {
		if c.Hosts[i].Aside == zone.AsideNotLeader {
			return true
		}
	}
	return false
}

// decide derives the roles of cluster ci's hosts from the observed state
// and keeps the identity and newest timeline it settles. A new identity
// forgets the old one's timeline histories: another cluster's history is
// not this one's. Replacing an established identity (no live host has it,
// a majority of the configured hosts have another: the cluster was
// rebuilt, or the identity remembered was another cluster's) is said at
// WARN, with what is dropped.
func (p *Prober) decide(ci int, now time.Time, stale time.Duration) *zone.Cluster {
	src := p.state[ci]
	c := newBuilt(len(src.Hosts))
	copy(c.Hosts, src.Hosts)
	c.Name, c.AsyncOnly, c.Port, c.Identity, c.IdentityPinned, c.NewestTimeline = src.Name, src.AsyncOnly, src.Port, src.Identity, src.IdentityPinned, src.NewestTimeline
	c.Witnessed, c.WitnessedBy, c.WitnessedRun = src.Witnessed, src.WitnessedBy, src.WitnessedRun
	c.MinTimeline, c.LeaderKey, c.Leader = p.cfg.Clusters[ci].MinTimeline, src.LeaderKey, src.Leader
	c.ForkedTimelines = p.forkList(ci) // Decide's branch proofs (zone.setAsideUnprovenBranch); watchBranches updates it
	c.Decide(now, stale, p.cfg.MaxFails)
	if c.Identity != src.Identity {
		if src.Identity != 0 && p.active.Load() {
			p.log.Warn("cluster identity replaced: no live host has the one pgdns knew and a majority of the configured hosts "+
				"have another (the cluster was rebuilt, or what pgdns remembered was another cluster's); "+
				"what it knew of the old one is dropped, and a primary it had superseded may be answered",
				"cluster", src.Name, "system_identifier_before", src.Identity, "system_identifier_after", c.Identity,
				"dropped_newest_timeline", src.NewestTimeline, "dropped_timeline_histories", len(p.timelines[ci]),
				"remembered_from", p.rememberedFrom(ci))
		}
		p.timelines[ci] = map[uint32]timelineHistory{}
		p.branches[ci], p.forks[ci], p.restarts[ci] = map[uint32]Branch{}, nil, nil
		p.seeded[ci] = false
	}
	if c.Unfollowed != p.unfollowed[ci] && p.active.Load() {
		p.unfollowed[ci] = c.Unfollowed
		if c.Unfollowed != 0 {
			p.log.Warn("cluster identity not replaced: no live host has it and a majority of the configured hosts have another, "+
				"but none of them was seen with it (another cluster's hosts listed by mistake?); no primary is answered "+
				"until one of the cluster's hosts is back, or an operator pins system_identifier or runs -reset-state",
				"cluster", src.Name, "system_identifier", c.Identity, "system_identifier_shown", c.Unfollowed)
		}
	}
	beforeID, before, beforeW := src.Identity, src.NewestTimeline, src.Witnessed
	src.Identity, src.NewestTimeline = c.Identity, c.NewestTimeline
	p.indexIdentity(ci) // siblings.go
	for hi := range c.Hosts {
		src.Hosts[hi].OfIdentity = c.Hosts[hi].OfIdentity // who may vote a replacement (settleIdentity)
	}
	src.Witnessed, src.WitnessedBy, src.WitnessedRun = c.Witnessed, c.WitnessedBy, c.WitnessedRun
	if c.Identity != 0 {
		// Timelines are the servers', whatever cluster lists them
		// (siblings.go): an identity just established takes a
		// sibling's, and a newer timeline is handed to the siblings.
		if c.Identity != beforeID {
			p.pullSiblings(ci)
		}
		if c.NewestTimeline > before || c.Witnessed > beforeW {
			p.raiseSiblings(ci)
		}
	}
	forks := len(c.ForkedTimelines)
	p.watchBranches(ci, c)
	if c.Identity != 0 && len(c.ForkedTimelines) > forks {
		p.shareForks(ci) // siblings.go
	}
	return c
}

// newBuilt returns a new cluster with room for n hosts (Hosts has length
// n), for a build: a cluster of up to 4 hosts, the common case, is one
// allocation with its hosts' array, not two (a cluster is built at every
// publish that has a result of it, about one build a round: issue 28).
// The hosts are allocated at their number, as before: room for a fourth
// host of a cluster of 3 is 688 bytes a cluster in every snapshot.
func newBuilt(n int) *zone.Cluster {
	switch n {
	case 1:
		b := new(struct {
			c zone.Cluster
			h [1]zone.Host
		})
		b.c.Hosts = b.h[:]
		return &b.c
	case 2:
		b := new(struct {
			c zone.Cluster
			h [2]zone.Host
		})
		b.c.Hosts = b.h[:]
		return &b.c
	case 3:
		b := new(struct {
			c zone.Cluster
			h [3]zone.Host
		})
		b.c.Hosts = b.h[:]
		return &b.c
	case 4:
		b := new(struct {
			c zone.Cluster
			h [4]zone.Host
		})
		b.c.Hosts = b.h[:]
		return &b.c
	}
	if n == 0 {
		return &zone.Cluster{}
	}
	return &zone.Cluster{Hosts: make([]zone.Host, n)}
}

// computeLag fills Lag, LagBytes, LagKnown and BytesKnown of every replica of c from
// the WAL clock of c's primary (see lag.go). src holds the same hosts in
// the same order; its elements key the history.
func (p *Prober) computeLag(src, c *zone.Cluster, now time.Time, stale time.Duration) {
	pi := c.Primary
	if pi < 0 {
		return
	}
	primary := &c.Hosts[pi]
	primary.LagKnown, primary.BytesKnown = true, true
	w := p.history[&src.Hosts[pi]]
	if w == nil || now.Sub(primary.ProbedAt) > stale {
		return
	}
	for i := range c.Hosts {
		h := &c.Hosts[i]
		if h.Role != zone.RoleReplica || h.Timeline != primary.Timeline {
			continue // WAL positions on different timelines do not compare
		}
		// Both bounds are as of the end of the replica's probe, when it
		// had surely replayed ReplayLSN (lag.go). A replica probed after
		// the primary's last probe started has no byte bound until the
		// primary's next probe: a bound from its own previous sample
		// would hold as of that older moment only.
		h.Lag, h.LagKnown = w.timeLag(h.ProbedAt, h.ReplayLSN)
		h.LagBytes, h.BytesKnown = w.byteLag(h.ProbedAt, h.ReplayLSN)
	}
}

// attachHistories gives every host whose timeline is exact the history of
// that timeline as the cluster knows it: one timeline of one cluster has
// one history, whichever host it was learned from.
func (p *Prober) attachHistories(ci int, c *zone.Cluster) {
	for i := range c.Hosts {
		h := &c.Hosts[i]
		h.History, h.HistoryFromFile = nil, false
		if h.TimelineExact {
			known := p.timelines[ci][h.Timeline]
			h.History, h.HistoryFromFile = known.ends, known.fromFile
		}
	}
}

// logChanges logs each host whose role or note changed from prev, the
// snapshot published before snap, and each cluster entering or leaving
// split brain: once per change, never on every probe. Clusters and hosts
// are matched by name and address: a reload may add, drop or reorder them.
func (p *Prober) logChanges(prev, snap *zone.Snapshot) {
	if !snap.Ready {
		return
	}
	if prev != nil && !prev.Ready {
		prev = nil
	}
	changed, only := snap.ChangedSince(prev)
	for i := range snap.Clusters {
		ci := i
		if only {
			if i >= len(changed) {
				break
			}
			ci = changed[i] // the others are prev's
		}
		c := snap.Clusters[ci]
		p.dirty.looked++
		if prev != nil && ci < len(prev.Clusters) && prev.Clusters[ci] == c {
			continue // shared, found without comparing names
		}
		var was *zone.Cluster
		if prev != nil {
			was = prev.ClusterNear(ci, c.Name)
		}
		if was == c {
			continue // shared by the two snapshots: nothing changed
		}
		wasSplit := was != nil && was.SplitBrain
		switch {
		case c.SplitBrain && !wasSplit:
			var writable []string
			for i := range c.Hosts {
				if h := &c.Hosts[i]; h.Aside == zone.AsideSplitBrain && !h.InRecovery { // a writer, not a replica of one
					writable = append(writable, c.Hosts[i].Addr)
				}
			}
			p.log.Error("split brain: writable hosts on the same timeline; answering no primary until it is resolved",
				"cluster", c.Name, "hosts", strings.Join(writable, ","))
			if hook := p.cfg.Hooks.SplitBrain; hook != nil {
				hook(c.Name)
			}
		case !c.SplitBrain && wasSplit:
			p.log.Info("split brain resolved", "cluster", c.Name)
		}
		for hi := range c.Hosts {
			h := &c.Hosts[hi]
			role, note := zone.RoleUnknown, ""
			if old := was.HostNear(hi, h.Addr); old != nil {
				role, note = old.Role, old.Note
			} else if h.Role == zone.RoleUnknown && h.Note == "" && h.LastError == "" {
				continue
			}
			// Down stays down: a stale host's note counts the time since
			// its last good probe and changes on every snapshot.
			if h.Role == role && (h.Note == note || h.Role == zone.RoleDown) {
				continue
			}
			attrs := []any{"cluster", c.Name, "host", h.Addr, "from", role.String(), "to", h.Role.String()}
			if h.Note != "" {
				attrs = append(attrs, "why", h.Note)
			}
			if h.LastError != "" {
				attrs = append(attrs, "error", h.LastError)
			}
			if hook := p.cfg.Hooks.RoleChanged; hook != nil && h.Role != role {
				hook(c.Name, h.Addr, role, h.Role)
			}
			if h.Role == zone.RoleDown || h.Note != "" {
				p.log.Warn("host state changed", attrs...)
			} else {
				p.log.Info("host state changed", attrs...)
			}
		}
	}
}

// logHidden logs each host whose replication statistics became hidden
// from the probe role (zone.Host.StatsHidden), or readable again, since
// the last snapshot: once per change, never on every probe.
func (p *Prober) logHidden(snap *zone.Snapshot) {
	changed, ok := snap.ChangedSince(p.last)
	for i := range snap.Clusters {
		ci := i
		if ok {
			if i >= len(changed) {
				break
			}
			ci = changed[i] // the others are shared: nothing changed
		}
		c := snap.Clusters[ci]
		p.dirty.looked++
		if p.last != nil && p.last.Clusters[ci] == c {
			continue // shared: nothing changed
		}
		for hi := range c.Hosts {
			h := &c.Hosts[hi]
			was := p.last != nil && p.last.Clusters[ci].Hosts[hi].StatsHidden
			switch {
			case !h.Seen || h.StatsHidden == was:
			case h.StatsHidden:
				p.log.Warn("the probe role cannot read the replication statistics of this host (pg_stat_replication, "+
					"pg_stat_wal_receiver): grant it pg_monitor; meanwhile the decisions that need them fail closed",
					"cluster", c.Name, "host", h.Addr)
			default:
				p.log.Info("the probe role can read the replication statistics of this host again", "cluster", c.Name, "host", h.Addr)
			}
		}
	}
}

// serialBase is the snapshot the next one's SOA serials follow: this
// prober's last one, or, before it has built any, the one being served
// (a prober started by a reload or a membership change carries the
// serials on instead of starting over from the clock).
func (p *Prober) serialBase() *zone.Snapshot {
	if p.last != nil {
		return p.last
	}
	return p.table.Load()
}

// dirtyClusters is what the next publish builds: the clusters marked since
// the last one (markRebuild) and those whose last build stops holding by
// the clock (holdsUntil), kept in a heap by that moment so that finding
// them looks at no other cluster. The aggregator owns it.
type dirtyClusters struct {
	marked []int
	// all: build every cluster that needs it by a look at each (adopt
	// marks every cluster without telling markRebuild).
	all        bool
	expiry     expiryHeap
	notLeaders int // clusters whose last build set a host aside as not the leader (notLeader)
	// Clusters built, and clusters looked at by publish's loops (the
	// build, flux, logs), so far: what publishing cost, for tests; and
	// clusters compared with the last report (remember.go).
	built, looked, looks int
	// For Hooks.Learned (remember.go, remembersAsReported): the clusters
	// built since it was last looked what p remembers, which only a build
	// changes, and those whose running writers' positions moved since the
	// last report; every cluster after an adoption (unreportedAll).
	unreported, moved     []int
	isUnreported, isMoved []bool
	unreportedAll         bool
}

// builtSince notes that cluster ci was built since the last look.
func (d *dirtyClusters) builtSince(ci, clusters int) {
	if d.isUnreported == nil {
		d.isUnreported, d.isMoved = make([]bool, clusters), make([]bool, clusters)
	}
	if !d.isUnreported[ci] {
		d.isUnreported[ci] = true
		d.unreported = append(d.unreported, ci)
	}
}

// positionsMoved notes that cluster ci's running writers' positions are
// not those last reported.
func (d *dirtyClusters) positionsMoved(ci int) {
	if !d.isMoved[ci] {
		d.isMoved[ci] = true
		d.moved = append(d.moved, ci)
	}
}

// lookedAt starts the list of clusters built since the last look anew.
func (d *dirtyClusters) lookedAt() {
	for _, ci := range d.unreported {
		d.isUnreported[ci] = false
	}
	d.unreported = d.unreported[:0]
}

// reported starts both lists anew: what is remembered is what was reported.
func (d *dirtyClusters) reported() {
	if d.isUnreported == nil {
		return
	}
	d.lookedAt()
	for _, ci := range d.moved {
		d.isMoved[ci] = false
	}
	d.moved, d.unreportedAll = d.moved[:0], false
}

// take returns the clusters to build at now, in configured order, and
// starts a new list.
func (d *dirtyClusters) take(p *Prober, now time.Time) []int {
	for len(d.expiry) > 0 && now.After(d.expiry[0].until) {
		e := d.expiry.pop()
		if p.holdsUntil[e.cluster].Equal(e.until) { // not built since: this build expires
			p.markRebuild(e.cluster)
		}
	}
	list := d.marked
	d.marked = nil // the snapshot keeps list (zone.Snapshot.Changed)
	slices.Sort(list)
	// A build deferred (hold.go) stays listed; one made since all the
	// same (a sibling's raised timeline, build.go's publish) is not made
	// again, and one marked again meanwhile is listed once.
	return slices.Compact(slices.DeleteFunc(list, func(ci int) bool { return !p.rebuild[ci] }))
}

// reset forgets the list: publish looked at every cluster.
func (d *dirtyClusters) reset() { d.marked, d.all = d.marked[:0], false }

// expires notes that cluster ci's build holds until until.
func (d *dirtyClusters) expires(ci int, until time.Time) {
	if until.Unix() < 1<<40 { // a build nothing of which ages is never rebuilt by the clock
		d.expiry.push(expiry{until: until, cluster: ci})
	}
}

// expiry is when a build of a cluster stops holding. An entry whose
// cluster was built again since is dropped when it comes up.
type expiry struct {
	until   time.Time
	cluster int
}

// expiryHeap is a min-heap of expiries by until. It is its own, not
// container/heap's: that one's Push and Pop pass each entry as an any,
// an allocation on every build of a cluster and on every expiry (issue
// 28: two of the five allocations a probe cost at 1,000 hosts).
type expiryHeap []expiry

// push adds e.
func (h *expiryHeap) push(e expiry) {
	*h = append(*h, e)
	q := *h
	for i := len(q) - 1; i > 0; {
		parent := (i - 1) / 2
		if !q[i].until.Before(q[parent].until) {
			break
		}
		q[i], q[parent] = q[parent], q[i]
		i = parent
	}
}

// pop removes and returns the earliest entry; h must not be empty.
func (h *expiryHeap) pop() expiry {
	q := *h
	top, n := q[0], len(q)-1
	q[0] = q[n]
	q = q[:n]
	for i := 0; ; {
		least, l, r := i, 2*i+1, 2*i+2
		if l < n && q[l].until.Before(q[least].until) {
			least = l
		}
		if r < n && q[r].until.Before(q[least].until) {
			least = r
		}
		if least == i {
			break
		}
		q[i], q[least] = q[least], q[i]
		i = least
	}
	*h = q
	return top
}
