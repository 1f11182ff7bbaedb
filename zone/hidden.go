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
// timeline is hidden, whatever its lower bound, unless it provably
// streams from the primary: the primary's statistics are readable and
// exactly one of its WAL senders is the replica's own. A lower bound
// below the newest timeline is no evidence of supersession, and one at
// the newest is no evidence of the primary's timeline: the replica may be
// on a later one pgdns never saw, which a promoted unlisted upstream (a
// relay it cascades from, a DR copy) gave it (review 13a, finding 3: a
// listed replica cascading from an unlisted relay followed the relay's
// promotion to timeline 2 while its control file still said 1, and
// lsn-W.replica answered it for the primary's write W after the split,
// which it lacked, with a byte lag measured across two branches). Without
// pg_read_all_stats the replica's conninfo is hidden, so its application
// name is unknown; what it shows is primary_slot_name (readable by any
// role), and the primary's rows show their slots (pg_replication_slots,
// readable by any role). A count of WAL senders proves nothing:
// pg_receivewal, a streaming backup or a logical walsender is a row too,
// and an orphan of a failover whose receiver keeps following the old
// primary until wal_receiver_timeout looks the same as a replica
// re-pointed at the new one. Nor does the slot, when the primary's
// statistics are hidden too (hiddenSenderNote): every column of its WAL
// senders but the pid then reads NULL, so the row on the replica's slot
// may be pg_receivewal's or pg_basebackup's (review 13a, finding 1),
// which a readable replay_lsn (NULL for them) tells apart. So with one
// least-privilege role on every server no such replica is answered.
func (c *Cluster) setAsideUnproven() {
	p := c.PrimaryHost()
	senders := c.senderIndex(p)
	for i := range c.Hosts {
		h := &c.Hosts[i]
		if h.Role != RoleReplica || !h.TimelineHidden {
			continue
		}
		// Below the newest timeline its lower bound may be the whole
		// truth (superseded); at it, a later timeline is what may hide.
		kind := AsideSuperseded
		if h.Timeline >= c.NewestTimeline {
			kind = AsideUnproven
		}
		if p != nil && p.StatsHidden {
			c.setAside(h, kind, hiddenSenderNote(h, c.NewestTimeline))
		} else if why := senders.why(h); why != "" {
			c.setAside(h, kind, hiddenBound(h, c.NewestTimeline)+"; "+why+": it may follow another host; "+grantStats)
		}
	}
}

// grantStats is what ends every hidden-timeline note: the remedy.
const grantStats = "grant pg_monitor (or pg_read_all_stats) to the probe role"

// hiddenRowsWhy is why no WAL sender of a primary whose statistics are
// hidden proves a replica its own (senderIndex.own).
const hiddenRowsWhy = "the primary's WAL senders are hidden from the probe role (no pg_read_all_stats), " +
	"so none proves it its own (one on its slot may be pg_receivewal's or pg_basebackup's): " + grantStats

// hiddenBound says what pgdns knows of the timeline of replica h, whose
// WAL receiver's timeline is hidden, against the newest one it has seen.
func hiddenBound(h *Host, newest uint32) string {
	bound := "timeline hidden from the probe role, at least " + strconv.FormatUint(uint64(h.Timeline), 10)
	if h.Timeline < newest {
		return bound + ", below the newest " + strconv.FormatUint(uint64(newest), 10)
	}
	return bound + " (the newest seen; it may be on a later one pgdns has not seen: a promoted upstream, an unlisted relay or a DR copy)"
}

// hiddenSenderNote says why replica h, its timeline hidden, is set aside
// while the primary's WAL senders' statistics are hidden too, and what
// ends it.
func hiddenSenderNote(h *Host, newest uint32) string {
	return hiddenBound(h, newest) + ": it may follow another host; the primary's WAL senders are hidden too (no pg_read_all_stats), " +
		"so none proves it follows the primary (one on its slot may be pg_receivewal's or pg_basebackup's): " + grantStats
}

// setAsideUnprovenBranch sets aside each replica of primary p on a
// timeline above 1 whose branch no history file proves (its own and the
// primary's, compared by forkedFrom) and that no WAL sender of p is
// provably its own. Two servers promoted independently may both take
// timeline N; a replica following the other one, behind p, shows nothing
// else that tells the branches apart without history files, which
// pg_monitor may not read. A replica streaming from another replica
// (cascading) is in no row of p and is set aside too: the probe reads
// pg_stat_replication on primaries only. Timeline 1, which has no history
// file, is setAsideUnlistedUpstream's. On a
// timeline known forked (ForkedTimelines: two servers seen writable on
// it) agreeing history files prove nothing either: two servers promoted
// from the same point write equal ones, so only a WAL sender row of p
// proves the branch (review 13, R13b-5: a replica of the other writer,
// cut off from pgdns and streaming over another address, was answered as
// p's replica).
func (c *Cluster) setAsideUnprovenBranch(live []bool) {
	p := c.PrimaryHost()
	if p == nil && !c.SplitBrain {
		c.setAsideUnprovenWithoutPrimary(live)
		c.setAsideUnlistedUpstreamWithoutPrimary(live)
	}
	if p == nil {
		return
	}
	senders := c.senderIndex(p)
	if p.Timeline <= 1 {
		c.setAsideUnlistedUpstream(p, senders)
		return
	}
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

// setAsideUnlistedUpstream sets aside, on timeline 1, each replica of
// primary p whose WAL receiver is connected (or, with no receiver now,
// was last seen streaming in this server run: SenderHost) to a server the
// cluster does not list, nor to a listed host that is answered or could
// be, unless one of p's WAL senders is its own by its slot or application
// name (ownRow: it reaches p under another address, a VIP, a DNS name or
// a proxy). Timeline 1 has no history file, but it has branches: a
// standby started without standby.signal ends its recovery on the
// timeline it was on and is writable there (an operator's slip, a copy
// of a standby started for a test), and so is a copy of the primary
// started from a snapshot or a base backup without a signal file. A
// listed replica following such a writer that pgdns does not list
// replays that writer's WAL, at positions that pass the primary's as it
// writes; no timeline number tells it from a cascade through an unlisted
// relay of p's, so both are set aside (review 15c: lsn-W.replica and
// lsn-W-t1.replica answered one for p's write W, which it lacked, and
// replica answered it at a byte lag measured across two branches;
// test/timelineone_unlistedwriter_e2e_test.go). A replica cascading from a
// listed replica is answered as long as that upstream is (itself set
// aside as unproven or forked, it proves nothing): the loop runs until no
// more is set aside, for cascades of cascades. Replicas whose statistics
// are hidden are setAsideUnproven's.
func (c *Cluster) setAsideUnlistedUpstream(p *Host, senders *senderIndex) {
	for changed := true; changed; {
		changed = false
		for i := range c.Hosts {
			h := &c.Hosts[i]
			if h.Role != RoleReplica || h.StatsHidden || h.SenderHost == "" || receivesFrom(h, p) || c.vouchedUpstream(h) {
				continue
			}
			_, why := senders.ownRow(h)
			if why == "" {
				continue // the primary's WAL sender on its slot or name: the primary under another address
			}
			c.setAside(h, AsideUnproven, unlistedUpstreamNote(h, why))
			changed = true
		}
	}
}

// setAsideUnlistedUpstreamWithoutPrimary is setAsideUnlistedUpstream while
// no primary is answered but a writer of timeline 1 was seen (down now,
// or shutting down with sessions lingering: lastWriter): lsn- names are
// then judged by replay positions alone, and a replica of an unlisted
// writer of timeline 1 passes the primary's tokens as it replays that
// writer's WAL. The WAL senders that may prove it its own are the last
// writer's (its last sample when down, its live rows when shutting
// down). A cluster in which no writer was seen (one listing replicas
// only) is left alone: its replicas' upstream is never listed.
func (c *Cluster) setAsideUnlistedUpstreamWithoutPrimary(live []bool) {
	for changed := true; changed; {
		changed = false
		for i := range c.Hosts {
			h := &c.Hosts[i]
			if h.Role != RoleReplica || h.Timeline > 1 || h.StatsHidden || h.SenderHost == "" || c.vouchedUpstream(h) {
				continue
			}
			last := c.lastWriter(i, live)
			if last == nil {
				continue
			}
			_, why := c.senderIndex(last).ownRow(h)
			if why == "" {
				continue
			}
			c.setAside(h, AsideUnproven, unlistedUpstreamNote(h, why)+"; no primary is answered, and "+last.Addr+
				", the last writer of timeline 1, is down or shutting down")
			changed = true
		}
	}
}

// unlistedUpstreamNote says why replica h, on timeline 1 and streaming from
// a server the cluster does not list, is set aside: why, why no WAL
// sender of the primary is its own.
func unlistedUpstreamNote(h *Host, why string) string {
	from := "its WAL receiver streams from "
	if h.Receiver == "" {
		from = "its WAL receiver, gone now, last streamed from "
	}
	return from + senderAddr(h) + ", which the cluster does not list " +
		"(or lists set aside): on timeline 1 its branch is unproven (" + why + "); a server pgdns does not probe may be " +
		"another writer of timeline 1 (a standby started without standby.signal, a copy started writable), whose WAL " +
		"it would replay: list its upstream, or give it a slot or application name of its own on the primary"
}

// vouchedUpstream reports whether replica h's WAL receiver is connected to
// (or last streamed from) a host of the cluster other than h that is not
// set aside as on another branch or an unproven one: the primary, a
// replica, or a host down or unknown now, whose branch the rules judge
// by what they last saw of it.
func (c *Cluster) vouchedUpstream(h *Host) bool {
	for i := range c.Hosts {
		if o := &c.Hosts[i]; o != h && receivesFrom(h, o) {
			return o.Aside != AsideUnproven && o.Aside != AsideForked
		}
	}
	return false
}

// branchProven reports whether history files prove that replica h is on
// primary p's branch of its timeline: both files were read and agree.
func branchProven(h, p *Host) bool {
	return h.TimelineExact && h.Timeline == p.Timeline && h.OwnHistory != nil && p.OwnHistory != nil && forkedFrom(h, p) == ""
}

// setAsideUnwatched sets aside each replica whose timeline is a lower
// bound (its WAL receiver does not stream, whatever the probe role may
// read; a hidden receiver's, TimelineHidden, is setAsideUnproven's) at the
// newest timeline, unless the probe saw it stream that timeline earlier in
// the same server run (TimelineWatched). Below the newest it is set aside
// as superseded already (Decide). At the newest, its control file's
// timeline (last restartpoint, minimum recovery point) lags a switch by
// up to a checkpoint interval: one that followed a promoted upstream
// pgdns does not list (a DR relay, a copy) onto a later timeline and
// lost its receiver before pgdns saw it stream (pgdns started then, with
// no state file) shows the newest timeline, and was answered as the
// primary's replica: lsn- for the primary's write after the split
// answered it without the write, its positions on the other branch
// compared with the primary's (test/receiverless_unseentimeline_e2e_test.go).
// Set aside after the fork and branch proofs, which say more when they
// hold.
func (c *Cluster) setAsideUnwatched() {
	for i := range c.Hosts {
		h := &c.Hosts[i]
		if h.Role != RoleReplica || h.TimelineExact || h.TimelineHidden || h.TimelineWatched {
			continue
		}
		c.setAside(h, AsideUnproven, "no WAL receiver streams to it: its timeline is known only as at least "+
			strconv.FormatUint(uint64(h.Timeline), 10)+" (its control file), and pgdns has not seen it stream that timeline "+
			"in this server run; it may be on a later one pgdns has not seen (a promoted upstream, an unlisted relay or a DR copy): "+
			"answered again once its WAL receiver streams")
	}
}

// setAsideUnprovenWithoutPrimary keeps out, while no primary is answered
// (and no split brain, whose rule sets aside every replica of its
// timeline), each replica on a timeline above 1 that setAsideUnprovenBranch
// would set aside were the last writer of its timeline (lastWriter) the
// primary: a replica whose branch nothing proved while the primary was
// answered is proven by nothing once it stops being answered. Before, the
// rule did nothing without a primary, and a replica of another writer
// pgdns never saw (streaming from an unlisted upstream, its history files
// unreadable to a role with pg_monitor but not pg_read_file) was answered
// by replica the moment the primary began a smart shutdown or went down.
// Against the last writer:
//
//   - history files that agree (branchProven; the down writer's is from
//     its last sample) prove the branch, as with a primary;
//   - a writer shutting down is live and probed: its WAL senders are read
//     now, and one must be the replica's own (senderIndex.own), as with a
//     primary;
//   - a down writer's WAL senders are those of its last sample: a replica
//     whose receiver still streams from it (pgdns is cut off from it, the
//     replica is not) is its replica; one whose receiver streams from
//     another host follows another server (an unlisted upstream, a
//     cascade, a writer pgdns never saw); one whose receiver is gone is
//     its replica if the probe saw it stream this timeline from that
//     writer in the same server run (TimelineWatched, SenderHost), else
//     only if one of those last rows is its own (ownRow).
//
// With no last writer (one never seen since pgdns started, from its state
// file) only a replica whose receiver streams, or last streamed in this
// server run (its receiver gone since, its timeline watched), from a host
// the cluster does not list is set aside: a listed host may be the
// writer; an unlisted one is a server pgdns never saw. Before, one whose
// receiver had stopped was answered: a replica of a DR site's writer
// pgdns never saw, set aside while it streamed from it, was answered by
// replica on that writer's branch the moment the writer went down.
func (c *Cluster) setAsideUnprovenWithoutPrimary(live []bool) {
	var senders map[*Host]*senderIndex
	for i := range c.Hosts {
		h := &c.Hosts[i]
		if h.Role != RoleReplica || h.Timeline <= 1 {
			continue
		}
		tl := strconv.FormatUint(uint64(h.Timeline), 10)
		last := c.lastWriter(i, live)
		if last == nil {
			if h.StatsHidden || c.listsUpstream(h) || h.Receiver != "streaming" && !h.TimelineExact && !h.TimelineWatched {
				continue // never seen streaming its timeline: setAsideUnwatched's
			}
			why := "its WAL receiver streams from " + senderAddr(h) + ", which the cluster does not list"
			switch {
			case h.Receiver == "streaming":
			case h.SenderHost != "":
				why = "its WAL receiver is gone; it last streamed from " + senderAddr(h) + ", which the cluster does not list"
			default:
				why = "its WAL receiver does not stream, and pgdns knows of no listed host it streamed from"
			}
			c.setAside(h, AsideUnproven, "on timeline "+tl+" its branch is unproven ("+why+
				"): no primary is answered to prove it, and no writer of timeline "+tl+" was seen")
			continue
		}
		if branchProven(h, last) {
			continue
		}
		if senders == nil {
			senders = map[*Host]*senderIndex{}
		}
		x := senders[last]
		if x == nil {
			x = c.senderIndex(last)
			senders[last] = x
		}
		var why, state string
		switch {
		case last.Aside == AsideStopping:
			why, state = x.why(h), "is shutting down"
		case h.TimelineWatched && h.Receiver == "" && h.SenderHost != "" && receivesFrom(h, last):
			continue // its receiver streamed this timeline from the down writer in this server run, and has streamed from no other since
		case h.StatsHidden || h.Receiver != "streaming":
			_, why = x.ownRow(h)
			state = "is down"
		case receivesFrom(h, last):
			continue // still streaming from the down writer: pgdns is cut off from it, this replica is not
		default:
			why, state = "its WAL receiver streams from "+senderAddr(h)+", not from "+last.Addr, "is down"
		}
		if why != "" {
			c.setAside(h, AsideUnproven, "on timeline "+tl+" its branch is unproven ("+why+"): no primary is answered to prove it; "+
				last.Addr+", the last writer of timeline "+tl+", "+state)
		}
	}
}

// listsUpstream reports whether replica h's WAL receiver streams from a
// host of the cluster other than h.
func (c *Cluster) listsUpstream(h *Host) bool {
	for i := range c.Hosts {
		if o := &c.Hosts[i]; o != h && receivesFrom(h, o) {
			return true
		}
	}
	return false
}
