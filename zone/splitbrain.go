package zone

import "strconv"

// setAsideSplitBranches sets aside, during a split brain on the newest
// timeline N (writable hosts on it, told apart by nothing), every replica
// on N, its timeline known exactly or only as a lower bound. Two writable
// servers on one timeline are two branches of it (two promotions that did
// not see each other's history file, or a copy started writable), and the
// operator ends the split brain by keeping one and throwing the other's
// writes away: a replica of either branch may hold data that is about to
// be lost, or lack writes that are kept, and pgdns cannot know which. A
// replica on an older timeline is superseded already, and one whose
// timeline is hidden waits for a primary (setAsideUnproven). Once
// one writer is gone or in recovery, the fork proofs take over (forkedFrom,
// setAsideUnprovenBranch): the replicas of the branch that stays come
// back, those of the other stay aside where a proof shows it.
func (c *Cluster) setAsideSplitBranches(writable int) {
	tl := strconv.FormatUint(uint64(c.NewestTimeline), 10)
	for i := range c.Hosts {
		if h := &c.Hosts[i]; h.Role == RoleReplica && h.Timeline >= c.NewestTimeline {
			c.setAside(h, AsideSplitBrain, "split brain on timeline "+tl+": its branch may be lost ("+
				strconv.Itoa(writable)+" writable hosts on it, which pgdns cannot tell apart)")
		}
	}
}

// SplitBrainWhy says, during a split brain, why the cluster's names
// answer no primary and no replica on the split timeline, for the TXT of
// every name of the cluster (the hosts are not in the answer, so no
// host's string says it): the reason the replicas' notes give and the
// writable hosts. "" when there is no split brain.
func (c *Cluster) SplitBrainWhy() string {
	if c == nil || !c.SplitBrain {
		return ""
	}
	return "split brain on timeline " + strconv.FormatUint(uint64(c.NewestTimeline), 10) +
		": its branch may be lost; writable: " + splitHosts(c) + " (no primary, and no replica on the timeline, is answered)"
}

// otherWriterNote says why replica h is on another branch of primary p's
// timeline than p's, when its WAL receiver streams from another host that
// pgdns last saw writable on that timeline: the other writer of a split
// brain, down now or cut off from pgdns but not from h (a partition). Two
// writable servers on one timeline are two branches of it, and h receives
// the other's WAL, whatever history files say (two branches forked at the
// same point have equal ones). "" when not so.
func (c *Cluster) otherWriterNote(h, p *Host) string {
	if h.StatsHidden || h.Receiver != "streaming" || h.Timeline != p.Timeline || receivesFrom(h, p) {
		return ""
	}
	for i := range c.Hosts {
		o := &c.Hosts[i]
		if o == h || o == p || !o.Seen || o.InRecovery || o.Timeline != p.Timeline || o.SystemID != p.SystemID ||
			o.Aside == AsideDuplicate || !o.StartedAt.IsZero() && o.StartedAt.Equal(p.StartedAt) || !receivesFrom(h, o) {
			continue
		}
		tl := strconv.FormatUint(uint64(p.Timeline), 10)
		return "another branch of timeline " + tl + ": its WAL receiver streams from " + o.Addr + ", last seen writable on timeline " +
			tl + " too (two writers of one timeline: a split brain), not from the primary " + p.Addr
	}
	return ""
}
