package zone

import (
	"strconv"
)

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

// setAsideUnproven sets aside each live replica whose WAL receiver's
// timeline is hidden and whose lower bound is older than the newest
// timeline, unless it provably streams from the primary: exactly one of
// the primary's WAL senders is its own, and the primary's statistics are
// readable. Without pg_read_all_stats the replica's conninfo is hidden,
// so its application name is unknown; what it shows is primary_slot_name
// (readable by any role), and the primary's rows show their slots
// (pg_replication_slots, readable by any role). A count of WAL senders
// proves nothing: pg_receivewal, a streaming backup or a logical
// walsender is a row too, and an orphan of a failover whose receiver
// keeps following the old primary until wal_receiver_timeout looks the
// same as a replica re-pointed at the new one. Nor does the slot, when
// the primary's statistics are hidden too (hiddenSenderNote): every
// column of its WAL senders but the pid then reads NULL, so the row on
// the replica's slot may be pg_receivewal's or pg_basebackup's (review
// 13a, finding 1), which a readable replay_lsn (NULL for them) tells
// apart.
func (c *Cluster) setAsideUnproven() {
	p := c.PrimaryHost()
	senders := c.senderIndex(p)
	for i := range c.Hosts {
		h := &c.Hosts[i]
		if h.Role != RoleReplica || !h.TimelineHidden || h.Timeline >= c.NewestTimeline {
			continue
		}
		if p != nil && p.StatsHidden {
			c.setAside(h, AsideSuperseded, hiddenSenderNote(h, c.NewestTimeline))
		} else if why := senders.why(h); why != "" {
			c.setAside(h, AsideSuperseded, "timeline hidden from the probe role (grant pg_monitor), at least "+
				strconv.FormatUint(uint64(h.Timeline), 10)+"; "+why+": it may follow another host")
		}
	}
}

// hiddenSenderNote says why replica h, its timeline a lower bound below
// newest, is set aside while the primary's WAL senders' statistics are
// hidden, and what ends it.
func hiddenSenderNote(h *Host, newest uint32) string {
	n := strconv.FormatUint(uint64(newest), 10)
	return "timeline hidden from the probe role, at least " + strconv.FormatUint(uint64(h.Timeline), 10) + ", below the newest " + n +
		": it may follow another host; the primary's WAL senders are hidden too (no pg_read_all_stats), so none proves it follows the primary " +
		"(one on its slot may be pg_receivewal's or pg_basebackup's): grant pg_monitor to the probe role, or it is answered once its next " +
		"restartpoint reaches timeline " + n + " (within checkpoint_timeout; a CHECKPOINT on it at once)"
}

// setAsideUnprovenBranch sets aside each replica of primary p on a
// timeline above 1 whose branch no history file proves (its own and the
// primary's, compared by forkedFrom) and that no WAL sender of p is
// provably its own. Two servers promoted independently may both take
// timeline N; a replica following the other one, behind p, shows nothing
// else that tells the branches apart without history files, which
// pg_monitor may not read. A replica streaming from another replica
// (cascading) is in no row of p and is set aside too: the probe reads
// pg_stat_replication on primaries only. Timeline 1 has no branches. On a
// timeline known forked (ForkedTimelines: two servers seen writable on
// it) agreeing history files prove nothing either: two servers promoted
// from the same point write equal ones, so only a WAL sender row of p
// proves the branch (review 13, R13b-5: a replica of the other writer,
// cut off from pgdns and streaming over another address, was answered as
// p's replica).
func (c *Cluster) setAsideUnprovenBranch() {
	p := c.PrimaryHost()
	if p == nil || p.Timeline <= 1 {
		return
	}
	senders := c.senderIndex(p)
	forked := c.ForkOf(p.Timeline) != nil
	for i := range c.Hosts {
		h := &c.Hosts[i]
		if h.Role != RoleReplica || !forked && branchProven(h, p) {
			continue // on a forked timeline history files that agree prove nothing: two promotions from one point have equal ones
		}
		if why := senders.why(h); why != "" {
			c.setAside(h, AsideUnproven, "its WAL sender is not the primary: on timeline "+
				strconv.FormatUint(uint64(p.Timeline), 10)+" its branch is unproven ("+why+")")
		}
	}
}

// branchProven reports whether history files prove that replica h is on
// primary p's branch of its timeline: both files were read and agree.
func branchProven(h, p *Host) bool {
	return h.TimelineExact && h.Timeline == p.Timeline && h.OwnHistory != nil && p.OwnHistory != nil && forkedFrom(h, p) == ""
}
