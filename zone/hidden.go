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

// setAsideUnproven sets aside each live replica whose WAL receiver's
// timeline is hidden and whose lower bound is older than the newest
// timeline, unless it provably streams from the primary: exactly one of
// the primary's WAL senders is its own. Without pg_read_all_stats the
// replica's conninfo is hidden, so its application name is unknown; what
// it shows is primary_slot_name (readable by any role), and the primary's
// rows show their slots (pg_replication_slots, readable by any role). A
// count of WAL senders proves nothing: pg_receivewal, a streaming backup
// or a logical walsender is a row too, and an orphan of a failover whose
// receiver keeps following the old primary until wal_receiver_timeout
// looks the same as a replica re-pointed at the new one.
func (c *Cluster) setAsideUnproven() {
	p := c.PrimaryHost()
	for i := range c.Hosts {
		h := &c.Hosts[i]
		if h.Role != RoleReplica || !h.TimelineHidden || h.Timeline >= c.NewestTimeline {
			continue
		}
		if why := c.unprovenSender(p, h); why != "" {
			c.setAside(h, AsideSuperseded, "timeline hidden from the probe role (grant pg_monitor), at least "+
				strconv.FormatUint(uint64(h.Timeline), 10)+"; "+why+": it may follow another host")
		}
	}
}

// unprovenSender says why replica h cannot be proven to stream from
// primary p, or returns "" when exactly one of p's WAL senders is h's: by
// its slot when it has one (its receiver streams from no other), else by
// its application name when known; either only when no other host of the
// cluster has the same name (two replicas sharing one cannot be told
// apart, and one may be the orphan).
func (c *Cluster) unprovenSender(p, h *Host) string {
	if p == nil {
		return "no primary"
	}
	type key struct {
		what, name string
		of         func(*Host) string
		row        func(Standby) string
	}
	keys := []key{
		{"slot", h.SlotName, func(o *Host) string { return o.SlotName }, func(r Standby) string { return r.Slot }},
		{"application name", h.AppName, func(o *Host) string { return o.AppName }, func(r Standby) string { return r.AppName }},
	}
	for _, k := range keys {
		if k.name == "" {
			continue
		}
		shared := ""
		for j := range c.Hosts {
			if o := &c.Hosts[j]; o != h && o.Seen && k.of(o) == k.name {
				shared = o.Addr
			}
		}
		rows := 0
		for _, r := range p.Standbys {
			if k.row(r) == k.name {
				rows++
			}
		}
		switch {
		case shared != "":
			return "its " + k.what + " " + strconv.Quote(k.name) + " is also " + shared + "'s, so the primary's WAL sender on it may be either's"
		case rows == 0:
			return "the primary has no WAL sender with its " + k.what + " " + strconv.Quote(k.name)
		case rows > 1:
			return "the primary has " + strconv.Itoa(rows) + " WAL senders with its " + k.what + " " + strconv.Quote(k.name)
		}
		return ""
	}
	return "it streams from no replication slot (primary_slot_name is empty) and its application name is hidden"
}
