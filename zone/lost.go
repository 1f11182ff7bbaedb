package zone

import (
	"slices"
	"strconv"
)

// Writes lost in a failover. A token lsn-…-tN names a write on timeline N.
// When the cluster has moved on to a later timeline whose history file
// says that timeline N ended before the token (or that the later timeline
// does not descend from N at all), the write was lost in the failover: the
// new primary and every replica following it lack it, provably. No name
// answers such a token, prefer-replica's fallback and any included: an
// lsn- name promises a host that has the write, and the client is better
// served by an empty answer (and the reason, in TXT and /v1/resolve) than
// by a read that silently misses its write (review 6, G4; the same
// principle as a forked timeline's, forked.go).
//
// Only a history read from a file proves it: a switch the probe watched
// gives a lower bound of where the timeline ended (probe/timelines.go), and
// a token past a lower bound may still be in the history. Such a token, or
// one merely not replayed yet, falls back to the primary as before.

// tokenLost says why q's LSN is proven lost in a failover, or "": q
// carries a timeline older than the cluster's newest, and the history file
// of the newest timeline, as an answerable host on it has it, says the
// token's timeline ended before the token (or is not among its ancestors).
// Every host on the newest timeline has that one history (the probe
// attaches the cluster's history of a timeline to every host on it); a
// forked newest timeline has two, so nothing is proven on it (forked.go
// says why instead).
func (c *Cluster) tokenLost(q *Query) string {
	if !q.HasLSN || q.Timeline == 0 || q.Timeline >= c.NewestTimeline || c.ForkOf(c.NewestTimeline) != nil {
		return ""
	}
	for i := range c.Hosts {
		h := &c.Hosts[i]
		if (h.Role != RolePrimary && h.Role != RoleReplica) || h.Timeline != c.NewestTimeline ||
			!h.TimelineExact || !h.HistoryFromFile || len(h.History) == 0 {
			continue
		}
		return h.lostWhy(q)
	}
	return ""
}

// lostWhy says why h's history file proves q's LSN lost, or "" when the
// token is in h's history.
func (h *Host) lostWhy(q *Query) string {
	want := h.token(q.MinLSN)
	if h.hasHistory(q.Timeline, want) {
		return ""
	}
	tl := "timeline " + strconv.FormatUint(uint64(q.Timeline), 10)
	token := q.MinLSN.String() + " on " + tl
	own := "timeline " + strconv.FormatUint(uint64(h.Timeline), 10) + "'s history file"
	for i, e := range h.History {
		if e.Timeline != q.Timeline {
			continue
		}
		next := h.Timeline
		if i+1 < len(h.History) {
			next = h.History[i+1].Timeline
		}
		return token + " lost in the failover to timeline " + strconv.FormatUint(uint64(next), 10) + " at " +
			e.End.String() + ": " + own + " says " + tl + " ended there, before the token"
	}
	return token + " lost in a failover: " + own + " does not descend from " + tl
}

// Tokens with a timeline whose write the newest timeline's history does
// not prove (review 9, R9-2). A later timeline holds a token of timeline N
// only when its history says N ended at or after the token (hasHistory):
// an end from a history file is exact, and a switch the probe watched is a
// lower bound of it, so a token at or below that bound is in the history.
// Past the bound, or with no end known at all, the write may have been
// lost in the failover (an asynchronous primary that died, or one still
// writing after another server was promoted): the new primary is no more
// proof of it than a replica following it is, since every host on the
// newest timeline has that one history. No name answers such a token, the
// primary included, and the reason says what is missing: a history file,
// which the probe reads when its role may call pg_read_file.

// tokenUnproven says why q's LSN, on a timeline older than the cluster's
// newest, is proven in the history of no answerable host on the newest
// timeline, or "". A forked newest timeline has two histories: forked.go
// says why instead.
func (c *Cluster) tokenUnproven(q *Query) string {
	if !q.HasLSN || q.Timeline == 0 || q.Timeline >= c.NewestTimeline || c.ForkOf(c.NewestTimeline) != nil {
		return ""
	}
	var judged *Host
	for i := range c.Hosts {
		h := &c.Hosts[i]
		if (h.Role != RolePrimary && h.Role != RoleReplica) || h.Timeline != c.NewestTimeline || !h.TimelineExact {
			continue
		}
		if h.hasHistory(q.Timeline, h.token(q.MinLSN)) {
			return ""
		}
		if judged == nil || h.Role == RolePrimary {
			judged = h
		}
	}
	if judged == nil {
		return ""
	}
	return unprovenWhy(judged, q)
}

// historyHolds reports whether q's LSN, when it is of an older timeline
// than h's, is in h's history (hasHistory); a token without a timeline,
// or of h's own, passes. Selection asks it of the primary as it asks it of
// every replica (passes): a write lost in a failover is on no host of the
// new timeline, the new primary included.
func historyHolds(h *Host, q *Query) bool {
	return !q.HasLSN || q.Timeline == 0 || q.Timeline >= h.Timeline || h.hasHistory(q.Timeline, h.token(q.MinLSN))
}

// unprovenWhy says why h, on a later timeline than q's, does not prove q's
// LSN in its history: what it knows of where q's timeline ended, and what
// would tell.
func unprovenWhy(h *Host, q *Query) string {
	tl := "timeline " + strconv.FormatUint(uint64(q.Timeline), 10)
	head := q.MinLSN.String() + " on " + tl + " is not proven in timeline " + strconv.FormatUint(uint64(h.Timeline), 10) + "'s history: "
	if h.HistoryFromFile {
		return head + "its history file does not hold it"
	}
	const grant = "no history file read: grant EXECUTE on pg_read_file to the probe role)"
	for _, e := range h.History {
		if e.Timeline == q.Timeline {
			return head + "where " + tl + " ended is not known past " + e.End.String() + " (a switch pgdns watched; " + grant
		}
	}
	return head + "where " + tl + " ended is not known (no switch watched; " + grant
}

// Tokens without a timeline after a failover that lost writes (review 7,
// H4). A token without -tN is compared as a position on the newest
// timeline (rule 9). Below where the old timeline ended (E, its history
// file says) both timelines hold the same WAL, and above it a position
// names timeline N's WAL; but the old writer may have written past E
// before it died (what it had not sent yet: asynchronous replication), and
// a token of such a write names a position that on timeline N holds other
// data, which every host on N has "replayed". The probe saw how far the
// old writer wrote (Cluster.Reached: its last seen insert position I), so
// a token without a timeline in (E, I] may be a write of timeline N−1
// lost in the failover, or one of the first writes of N: no host proves
// it (the same as a restart's window, restarted.go). After a clean
// switchover the old writer sent everything before it stopped, I <= E, and
// the window is empty. With only a watched lower bound of E the window
// starts at that bound: E may be higher, never lower. With no E known at
// all (no history file, no switch watched: a probe role without
// pg_monitor) the window is (0, I]: E may be anywhere below I (review 9,
// R9-2). A client that
// carries -tN is judged by timeline, as ever (tokenLost); one without a
// timeline is safe only where pgdns saw the old writer: a write it made
// after pgdns's last probe of it is not in the window (docs/names.md).

// TimelineReach is how far the probe saw a timeline's writer write.
type TimelineReach struct {
	Timeline uint32
	Insert   LSN // the highest insert position seen of the timeline's writer, or Replica's WAL past it
	// Replica is "" or the replica whose received or replayed position on
	// the timeline, past what its writer was seen to insert, is Insert: WAL only the
	// writer wrote (its last probe came before it, and it died or was cut
	// off from pgdns).
	Replica string
	// Possible is 0 or a position past Insert that PossibleBy, a replica
	// without a WAL receiver, was seen to hold while its timeline was
	// known only to be at least PossibleFloor (at or below Timeline): WAL
	// of this timeline or of a later one. Past where this timeline ended
	// (a newer timeline's history gives it) it may be a write of this
	// timeline that the later ones lack, so a timeline-less token up to it
	// there is refused; with no end known it counts for nothing (the
	// window is then (0, Insert], and a replica of the new timeline would
	// refuse every token below its position).
	Possible      LSN
	PossibleBy    string
	PossibleFloor uint32
}

// seen says how Insert was seen, for the reasons of failedOver, or
// Possible when want is above Insert.
func (r *TimelineReach) seen(want LSN) string {
	if want > r.Insert && r.Possible != 0 {
		return "pgdns saw " + r.PossibleBy + " (in recovery, its timeline not known: at least " +
			strconv.FormatUint(uint64(r.PossibleFloor), 10) + ") hold WAL up to " + r.Possible.String()
	}
	if r.Replica != "" {
		return "pgdns saw " + r.Replica + " (in recovery) hold its WAL up to " + r.Insert.String()
	}
	return "pgdns saw its writer insert up to " + r.Insert.String()
}

// ReachOf returns how far timeline tl's writer was seen to write, or nil.
func (c *Cluster) ReachOf(tl uint32) *TimelineReach {
	for i := range c.Reached {
		if c.Reached[i].Timeline == tl {
			return &c.Reached[i]
		}
	}
	return nil
}

// failedOver returns where q's LSN, taken without a timeline, may be a
// write lost in a failover: the host on the newest timeline whose history
// was judged, the index in it of the ended timeline whose window (its end,
// how far its writer was seen to write] holds the token, and that reach;
// h is nil when none does. The history is the newest timeline's, as every
// exact host on it has it (the probe attaches one per timeline), from a
// file or watched. An older timeline whose writer pgdns saw but whose end
// the history does not give (a probe role without pg_monitor watches no
// switch, and reads no file) has the window (0, reach]: its end may be
// anywhere below; i is then -1 (review 9, R9-2).
func (c *Cluster) failedOver(q *Query) (h *Host, i int, r *TimelineReach) {
	if !q.HasLSN || q.Timeline != 0 || len(c.Reached) == 0 {
		return nil, 0, nil
	}
	h = c.newestHistory()
	if h == nil {
		return nil, 0, nil
	}
	want := h.token(q.MinLSN)
	for i, e := range h.History {
		if r := c.ReachOf(e.Timeline); r != nil && want > e.End && want <= max(r.Insert, r.Possible) {
			return h, i, r
		}
	}
	for ri := range c.Reached {
		r := &c.Reached[ri]
		if r.Timeline < h.Timeline && want <= r.Insert && !slices.ContainsFunc(h.History, func(e TimelineEnd) bool { return e.Timeline == r.Timeline }) {
			return h, -1, r
		}
	}
	return nil, 0, nil
}

// newestHistory returns the answerable host with an exact timeline on the
// cluster's newest timeline whose history failedOver judges: one that
// knows an end when any does, else the first; nil when there is none.
func (c *Cluster) newestHistory() *Host {
	var first *Host
	for hi := range c.Hosts {
		h := &c.Hosts[hi]
		if (h.Role != RolePrimary && h.Role != RoleReplica) || h.Timeline != c.NewestTimeline || !h.TimelineExact {
			continue
		}
		if len(h.History) != 0 {
			return h
		}
		if first == nil {
			first = h
		}
	}
	return first
}

// tokenFailedOver says why q's LSN, taken without a timeline, is proven by
// no host because it may be a write lost in a failover, or "".
func (c *Cluster) tokenFailedOver(q *Query) string {
	h, i, r := c.failedOver(q)
	if h == nil {
		return ""
	}
	if i < 0 {
		tl := strconv.FormatUint(uint64(r.Timeline), 10)
		return q.MinLSN.String() + " may be a write of timeline " + tl + " lost in a failover to " +
			strconv.FormatUint(uint64(h.Timeline), 10) + ": where timeline " + tl + " ended is not known (no switch watched; " +
			"no history file read: grant EXECUTE on pg_read_file to the probe role), and " + r.seen(0)
	}
	e := h.History[i]
	next := h.Timeline
	if i+1 < len(h.History) {
		next = h.History[i+1].Timeline
	}
	tl := strconv.FormatUint(uint64(e.Timeline), 10)
	ended := "timeline " + strconv.FormatUint(uint64(h.Timeline), 10) + "'s history file says timeline " + tl + " ended there"
	at := e.End.String()
	if !h.HistoryFromFile {
		at = e.End.String() + " or later"
		ended = "timeline " + tl + " ended at or after it (a switch pgdns watched; no history file read)"
	}
	return q.MinLSN.String() + " may be a write of timeline " + tl + " lost in the failover to " +
		strconv.FormatUint(uint64(next), 10) + " at " + at + ": " + ended + ", and " + r.seen(h.token(q.MinLSN)) + " (a token with its timeline, -tN, would tell)"
}
