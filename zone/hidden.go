package zone

import "strconv"

// Decisions on hosts whose replication statistics the probe role may not
// read (Host.StatsHidden: no pg_read_all_stats, which pg_monitor grants).
// pgdns fails closed only on the decisions that need what is hidden, and
// only as far as they need it.

// markHiddenSync decides whether replica h is a synchronous standby of
// primary p, whose pg_stat_replication rows hide their sync_state. With
// synchronous_standby_names empty no standby can be synchronous; with it
// set, any may be, and none can be proven asynchronous, so every replica
// counts as synchronous: "replicas: async" then answers none.
func markHiddenSync(p, h *Host) {
	h.Sync, h.SyncUnsure = p.SyncNamesSet, p.SyncNamesSet
	if p.SyncNamesSet && h.Note == "" {
		h.Note = "the probe role cannot read the primary's sync_state (grant pg_monitor) and synchronous_standby_names is set; counted as synchronous"
	}
}

// olderSender returns a live writable host on a timeline older than the
// cluster's newest that streams WAL to at least one standby, or nil. Its
// rows show that a standby follows the superseded timeline; a replica
// whose timeline is hidden may be that standby.
func (c *Cluster) olderSender(live []bool) *Host {
	for i := range c.Hosts {
		h := &c.Hosts[i]
		if live[i] && !h.InRecovery && h.Timeline < c.NewestTimeline && len(h.Standbys) > 0 {
			return h
		}
	}
	return nil
}

func hiddenTimelineNote(h, sender *Host) string {
	return "timeline hidden from the probe role (grant pg_monitor), at least " + strconv.FormatUint(uint64(h.Timeline), 10) +
		", while " + sender.Addr + ", writable on superseded timeline " + strconv.FormatUint(uint64(sender.Timeline), 10) +
		", streams to a standby: it may be that standby"
}

// setAsideUnaccounted sets aside the replicas whose WAL receiver's
// timeline is hidden and whose lower bound is older than the newest
// timeline, unless every live replica with a hidden receiver may be
// streaming from the primary: it has at least as many WAL senders as they
// are. Otherwise at least one of them follows another host, and which one
// cannot be told: an orphan of a failover whose receiver keeps trying to
// reach the old primary looks the same as a replica re-pointed at the new
// one. Without a primary, none is known to follow the newest timeline.
func (c *Cluster) setAsideUnaccounted() {
	receivers, candidates := 0, 0
	for i := range c.Hosts {
		if h := &c.Hosts[i]; h.Role == RoleReplica && h.TimelineHidden {
			receivers++
			if h.Timeline < c.NewestTimeline {
				candidates++
			}
		}
	}
	senders := 0
	if p := c.PrimaryHost(); p != nil {
		senders = len(p.Standbys)
	}
	if candidates == 0 || (c.PrimaryHost() != nil && senders >= receivers) {
		return
	}
	for i := range c.Hosts {
		if h := &c.Hosts[i]; h.Role == RoleReplica && h.TimelineHidden && h.Timeline < c.NewestTimeline {
			c.setAside(h, AsideSuperseded, "timeline hidden from the probe role (grant pg_monitor), at least "+
				strconv.FormatUint(uint64(h.Timeline), 10)+"; "+strconv.Itoa(receivers)+
				" replicas with hidden timelines receive WAL, the primary has "+strconv.Itoa(senders)+
				" WAL senders: it may follow another host")
		}
	}
}
