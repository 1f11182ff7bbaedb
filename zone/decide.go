package zone

import (
	"cmp"
	"net/netip"
	"strconv"
	"time"
)

// Decide sets each host's Role, Note and Aside and the cluster's Primary
// from the observed fields, and updates what the cluster remembers across
// snapshots (Identity, NewestTimeline). The probe calls it on a Cluster it
// is building, before the Snapshot is published. The rules, in order:
//
//   - maxFails failed probes in a row, or no good probe for staleAfter: down;
//   - never probed successfully (and not down yet): unknown;
//   - a system identifier other than the cluster's (see settleIdentity): set
//     aside, since it belongs to another cluster; and every host while no
//     identity is established (unsettled);
//   - the same server as a host listed before it (same system identifier
//     and postmaster start time): set aside, answered once;
//   - with Patroni (LeaderKey), writable but not the member holding
//     Patroni's leader key: set aside, whatever its timeline;
//   - on a timeline older than the newest one proven in the cluster: set
//     aside, writable or not. Its WAL has diverged from the newest
//     timeline's (an old primary), or it follows such a host, or it has
//     not yet switched to the newest timeline; either way its data is not
//     the cluster's. The newest timeline is remembered: a superseded
//     primary that outlives its successor is still never answered. So is
//     a host below MinTimeline, which is a floor, never remembered. Only
//     a writable host or a replica whose WAL receiver streams a timeline
//     proves it; a replica's lower bound (no WAL receiver, or a timeline
//     the probe role may not read) does not. With Patroni, the writable
//     leader's timeline is the newest: a newer one it does not follow is a
//     branch the cluster abandoned. A replica whose timeline the probe role
//     may not read (TimelineHidden) has only a lower bound of it, which
//     proves nothing, below the newest timeline or at it (a later one
//     pgdns never saw may hide behind it): it is set aside while a
//     writable host on an older timeline streams to a standby it may be,
//     and unless the primary's statistics are readable and exactly one of
//     its WAL senders is provably the replica's own, by a slot or
//     application name no other host shares (hidden.go);
//   - on a timeline above the newest proven one (a branch the cluster
//     left, or a lower bound above it): set aside;
//   - without Patroni, on a timeline below a live replica's lower bound
//     above the newest proven one (timelineWitness): set aside, writable
//     or not, although that timeline is not proven: a replica can have
//     replayed WAL of timeline N only after a promotion created N, so a
//     writable host below N may be a primary that promotion superseded
//     (review 6, G1). The replica itself stays set aside (abandoned):
//     whether N is the cluster's or a branch it left is not proven. N is
//     kept (Witnessed) while the replica is down or gone;
//   - writable but shutting down (Stopping: it admits no new session,
//     while other sessions on it remain): set aside, as a host that
//     refuses new sessions is down; the probe keeps watching what those
//     sessions write. It is no primary, but the replicas proven on
//     another branch than its stay aside (setAsideForkedFromTheDown);
//   - in recovery: replica;
//   - writable: primary if it is the only writable host on the newest
//     timeline; two writable hosts there cannot be told apart (split
//     brain), and neither is answered; nor is any replica on that
//     timeline (setAsideSplitBranches): each follows one of the branches,
//     and one branch's writes will be thrown away;
//   - a replica on the primary's timeline number but another branch of it
//     (see forkedFrom), or streaming from another host last seen writable
//     on it (otherWriterNote): set aside; so is one on a timeline above 1 that
//     neither history files nor one of the primary's WAL senders prove on
//     the primary's branch (setAsideUnprovenBranch; on a timeline known
//     forked only a WAL sender proves it: two promotions from one point
//     write equal history files);
//   - with no primary and no split brain, a replica on another branch
//     than the server last seen writable on its timeline, down now or
//     shutting down, and every replica of a timeline known forked: set
//     aside, as forked (setAsideForkedFromTheDown);
//   - with no primary and no split brain, a replica on a timeline above 1
//     whose branch nothing proves against the last writer of its timeline
//     (down or shutting down: history files, its WAL sender, its receiver
//     streaming, or seen streaming in this run, from that writer), or,
//     with no such writer, streaming from a host the cluster does not
//     list: set aside, branch_unproven (setAsideUnprovenWithoutPrimary);
//   - in recovery without an exact timeline (no WAL receiver streams to
//     it, its statistics readable or not) at the newest timeline, unless
//     the probe saw it stream that timeline earlier in the same server
//     run: set aside (setAsideUnwatched);
//   - a primary whose new sessions are read-only (default_transaction_read_only,
//     unless a setting of pgdns's own hides the server's) is ReadOnly:
//     primary does not answer it (readonly.go).
func (c *Cluster) Decide(now time.Time, staleAfter time.Duration, maxFails int) {
	c.Primary = -1
	c.ipsDistinct = distinctIPs(c.Hosts)
	live := make([]bool, len(c.Hosts))
	for i := range c.Hosts {
		h := &c.Hosts[i]
		h.Note, h.Aside = "", NotAside
		switch {
		case h.Fails >= maxFails:
			h.Role = RoleDown
		case !h.Seen:
			h.Role = RoleUnknown
		case !h.Fresh(now, staleAfter):
			h.Role = RoleDown
			h.Note = "no successful probe for " + now.Sub(h.ProbedAt).Round(time.Millisecond).String()
		default:
			live[i] = true
		}
	}

	c.settleIdentity(live)
	for i := range c.Hosts {
		if live[i] && c.Identity != 0 && c.Hosts[i].SystemID == c.Identity {
			c.Hosts[i].OfIdentity = c.Identity
		}
	}
	runs := make(map[serverRun]int, len(c.Hosts))
	for i := range c.Hosts {
		h := &c.Hosts[i]
		switch {
		case !live[i]:
		case h.SystemID != c.Identity && c.Identity == 0:
			c.setAside(h, AsideUnsettled, "system identifier "+strconv.FormatUint(h.SystemID, 10)+
				": no identity is shared by a majority of the hosts yet")
			live[i] = false
		case h.SystemID != c.Identity && h.SystemID == c.Unfollowed:
			c.setAside(h, AsideForeign, "system identifier "+strconv.FormatUint(h.SystemID, 10)+
				" is not the cluster's "+strconv.FormatUint(c.Identity, 10)+": a majority of the configured hosts show it, "+
				"but none was seen with "+strconv.FormatUint(c.Identity, 10)+" (another cluster's hosts listed by mistake?); "+
				"pin clusters."+c.Name+".system_identifier or run pgdns -reset-state to follow it")
			live[i] = false
		case h.SystemID != c.Identity:
			c.setAside(h, AsideForeign, "system identifier "+strconv.FormatUint(h.SystemID, 10)+
				" is not the cluster's "+strconv.FormatUint(c.Identity, 10))
			live[i] = false
		default:
			if d := c.duplicateOf(i, runs); d >= 0 {
				c.setAside(h, AsideDuplicate, "the same server as "+c.Hosts[d].Addr+
					" (same system identifier and start time): answered once, under that address")
				live[i] = false
			}
		}
	}

	for i := range c.Hosts {
		if h := &c.Hosts[i]; live[i] && (h.TimelineExact || !h.InRecovery) {
			c.NewestTimeline = max(c.NewestTimeline, h.Timeline)
		}
	}
	leader := c.leaderHost(live)
	if leader >= 0 && !c.Hosts[leader].InRecovery {
		c.NewestTimeline = c.Hosts[leader].Timeline
	}
	if w := c.timelineWitness(live); w != nil && w.Timeline > c.Witnessed {
		c.Witnessed, c.WitnessedBy, c.WitnessedRun = w.Timeline, w.Addr, w.StartedAt
	}
	if c.LeaderKey || c.Witnessed <= c.NewestTimeline {
		c.Witnessed, c.WitnessedBy, c.WitnessedRun = 0, "", time.Time{}
	}
	writable := 0
	sender := c.olderSender(live)
	for i := range c.Hosts {
		h := &c.Hosts[i]
		switch {
		case !live[i]:
		case c.LeaderKey && !h.InRecovery && i != leader:
			holder := "no member"
			if c.Leader != "" {
				holder = c.Leader
			}
			c.setAside(h, AsideNotLeader, "writable on timeline "+strconv.FormatUint(uint64(h.Timeline), 10)+
				", but Patroni's leader key is held by "+holder)
		case h.Timeline > c.NewestTimeline:
			c.setAside(h, AsideAbandoned, "on timeline "+strconv.FormatUint(uint64(h.Timeline), 10)+
				", above the cluster's newest proven timeline "+strconv.FormatUint(uint64(c.NewestTimeline), 10))
		case h.Timeline < c.NewestTimeline && h.TimelineHidden && sender != nil:
			c.setAside(h, AsideSuperseded, hiddenTimelineNote(h, sender))
		case h.Timeline < c.NewestTimeline && !h.TimelineHidden:
			c.setAside(h, AsideSuperseded, h.timelineKind()+" on timeline "+strconv.FormatUint(uint64(h.Timeline), 10)+
				", superseded by timeline "+strconv.FormatUint(uint64(c.NewestTimeline), 10))
		case h.Timeline < c.Witnessed:
			c.setAside(h, AsideSuperseded, c.witnessedNote(h))
		case h.Timeline < c.MinTimeline:
			// The configured floor: set aside as superseded, but not
			// learned, so that lowering it takes effect at once.
			c.setAside(h, AsideSuperseded, h.timelineKind()+" on timeline "+strconv.FormatUint(uint64(h.Timeline), 10)+
				", below the configured min_timeline "+strconv.FormatUint(uint64(c.MinTimeline), 10))
		case h.Stopping && !h.InRecovery:
			c.setAside(h, AsideStopping, stoppingNote)
		case h.InRecovery:
			h.Role = RoleReplica
		default:
			writable++
			c.Primary = i
		}
	}
	c.SplitBrain = writable > 1
	if c.SplitBrain {
		c.Primary = -1
	}
	for i := range c.Hosts {
		h := &c.Hosts[i]
		if !live[i] || h.InRecovery || h.Aside != NotAside {
			continue
		}
		if c.SplitBrain {
			c.setAside(h, AsideSplitBrain, "split brain: "+strconv.Itoa(writable)+" writable hosts on timeline "+
				strconv.FormatUint(uint64(c.NewestTimeline), 10))
		} else {
			h.Role = RolePrimary
		}
	}
	if p := c.PrimaryHost(); p != nil {
		for i := range c.Hosts {
			if h := &c.Hosts[i]; h.Role == RoleReplica {
				if note := forkedFrom(h, p); note != "" {
					c.setAside(h, AsideForked, note)
				} else if note := c.otherWriterNote(h, p); note != "" {
					c.setAside(h, AsideForked, note)
				}
			}
		}
	} else if c.SplitBrain {
		c.setAsideSplitBranches(writable)
	} else {
		c.setAsideForkedFromTheDown(live)
	}
	c.setAsideUnproven()
	c.setAsideUnprovenBranch(live)
	c.setAsideUnwatched()
	c.markSyncStandbys()
	c.markDrains()
	c.markReadOnly()
}

// forkedFrom says why replica h is not primary p's replica although it
// is on p's timeline number, or "". A timeline is a number and a history:
// two servers promoted independently (one never saw the other's history
// file) may both pick the next number, and their WAL differs from their
// fork on. h is on another branch when it has replayed WAL past p's
// position read after it (the probe sets DivergedFrom), or when its own
// history file says an earlier timeline ended elsewhere than p's does.
// The proof names p's server: its address (a restart keeps its WAL) or,
// under any address, its server run (divergedFromRun).
func forkedFrom(h, p *Host) string {
	if h.DivergedFrom != "" && (h.DivergedFrom == p.Addr || h.divergedFromRun(p)) {
		return h.DivergedNote
	}
	if !h.TimelineExact || h.Timeline != p.Timeline || h.OwnHistory == nil || p.OwnHistory == nil {
		return ""
	}
	tl := strconv.FormatUint(uint64(h.Timeline), 10)
	for i, e := range h.OwnHistory {
		if i >= len(p.OwnHistory) || p.OwnHistory[i] != e {
			theirs := "no such entry"
			if i < len(p.OwnHistory) {
				theirs = "timeline " + strconv.FormatUint(uint64(p.OwnHistory[i].Timeline), 10) + " ended at " + p.OwnHistory[i].End.String()
			}
			return "another branch of timeline " + tl + ": its history says timeline " +
				strconv.FormatUint(uint64(e.Timeline), 10) + " ended at " + e.End.String() + ", the primary's " + theirs
		}
	}
	if len(p.OwnHistory) > len(h.OwnHistory) {
		return "another branch of timeline " + tl + ": its history has " + strconv.Itoa(len(h.OwnHistory)) +
			" entries, the primary's " + strconv.Itoa(len(p.OwnHistory))
	}
	return ""
}

// setAsideForkedFromTheDown keeps out, while no primary is answered, each
// replica on another branch (forkedFrom, otherWriterNote) than the server
// of the cluster last seen writable on the replica's timeline, down now or
// shutting down (AsideStopping): the primary it was judged against
// stopped, crashed or was cut off, or is stopping, and its data is still
// the other branch's, whatever becomes of that server (review 13, R13b-4:
// a replica proven on a dead branch of timeline 2 was answered by replica,
// any and prefer-replica the moment the primary it was proven against went
// down; R13b-6: the same for one streaming from the other writer of a
// split brain). A writer stopping in smart mode while other sessions on it
// remain is live (the probe keeps its session to see what they write,
// probe/lingering.go) but no primary, so it is such a server too: before,
// only down servers were looked at, and the replicas proven on another
// branch than the stopping primary's were answered by every name, lsn-
// tokens of its writes included, for as long as the stop lasted. The last
// one seen writable is the one that was the primary; a replica of an
// earlier writer of the timeline is not its. On a timeline known forked
// (ForkedTimelines) every replica not so judged is set aside too: nothing
// then says which branch it is on. A server listed at the address a
// replica's proof names and not seen since pgdns started (a restart from
// the state file, which keeps the proof, while it is down) counts as such
// a server for a replica on the newest timeline. A replica of the last
// writer, or proven against no such server (a writer on another timeline,
// or not listed), is judged as before.
func (c *Cluster) setAsideForkedFromTheDown(live []bool) {
	for i := range c.Hosts {
		h := &c.Hosts[i]
		if h.Role != RoleReplica {
			continue
		}
		note, why := "", "that server is down"
		for j := range c.Hosts {
			if w := &c.Hosts[j]; j != i && !live[j] && !w.Seen && note == "" &&
				h.DivergedFrom == w.Addr && h.Timeline == c.NewestTimeline {
				note = cmp.Or(h.DivergedNote, "proven on another branch than "+w.Addr+"'s")
			}
		}
		if last := c.lastWriter(i, live); last != nil {
			if n := cmp.Or(forkedFrom(h, last), c.otherWriterNote(h, last)); n != "" {
				note = n
				if last.Aside == AsideStopping {
					why = "that server is shutting down"
				}
			}
		}
		if f := c.ForkOf(h.Timeline); note == "" && f != nil {
			// Two servers wrote the timeline: with no primary, nothing
			// says which branch a replica of it is on (history files
			// agree across two promotions from one point, and its WAL
			// receiver may stream over an address pgdns does not list).
			note = "timeline " + strconv.FormatUint(uint64(h.Timeline), 10) + " forked (" + f.Note + "): its branch is unknown"
		}
		if note != "" {
			c.setAside(h, AsideForked, note+" ("+why+": no primary is answered)")
		}
	}
}

// lastWriter returns the server of the cluster last seen writable on the
// timeline of host i, down now or shutting down (AsideStopping: live, and
// still probed), or nil: with no primary answered, the one a replica of
// that timeline was judged against (setAsideForkedFromTheDown,
// setAsideUnprovenWithoutPrimary). A down host keeps its last sample (its
// history file, its WAL senders). A writer of an earlier run of the
// timeline is not the last one; a host never seen since pgdns started is
// none.
func (c *Cluster) lastWriter(i int, live []bool) *Host {
	h := &c.Hosts[i]
	var last *Host
	for j := range c.Hosts {
		w := &c.Hosts[j]
		switch {
		case j == i || live[j] && w.Aside != AsideStopping: // stopping: the writer it was judged against, still live
		case !w.Seen:
		case !w.InRecovery && w.SystemID == c.Identity && w.Timeline == h.Timeline:
			if last == nil || w.ProbedAt.After(last.ProbedAt) {
				last = w
			}
		}
	}
	return last
}

// divergedFromRun reports whether replica h was proven not to follow the
// server run p is: the same system identifier and postmaster start time,
// whatever address each was listed under.
func (h *Host) divergedFromRun(p *Host) bool {
	return !h.DivergedRun.IsZero() && h.DivergedRun.Equal(p.StartedAt) && h.SystemID == p.SystemID
}

// timelineKind says what a host on a superseded timeline is, for notes.
func (h *Host) timelineKind() string {
	if h.InRecovery {
		return "replica"
	}
	return "writable"
}

// leaderHost returns the index of the live host holding Patroni's leader
// key, or -1: the host listed under the address Patroni reports, or the
// same server run listed under another address (a configured name), since
// Decide answers a server once, under the address listed first.
func (c *Cluster) leaderHost(live []bool) int {
	if !c.LeaderKey || c.Leader == "" {
		return -1
	}
	var run serverRun
	known := false
	for i := range c.Hosts {
		if h := &c.Hosts[i]; h.Addr == c.Leader && h.Seen && !h.StartedAt.IsZero() {
			run, known = serverRun{h.SystemID, h.StartedAt.Unix(), h.StartedAt.Nanosecond()}, true
		}
	}
	for i := range c.Hosts {
		h := &c.Hosts[i]
		if live[i] && (h.Addr == c.Leader || known && run == serverRun{h.SystemID, h.StartedAt.Unix(), h.StartedAt.Nanosecond()}) {
			return i
		}
	}
	return -1
}

// stoppingNote is the reason of a host set aside as AsideStopping.
const stoppingNote = "shutting down: it admits no new session; other sessions on it remain, and pgdns keeps probing it " +
	"to see what they write, until they end (then it closes its own, so that the stop can complete)"

func (c *Cluster) setAside(h *Host, why Aside, note string) {
	h.Role, h.Aside, h.Note = RoleUnknown, why, note
}

// serverRun identifies one run of one server: one system identifier and
// one postmaster start time, to the microsecond.
type serverRun struct {
	systemID uint64
	sec      int64
	nsec     int
}

// duplicateOf returns the index of a live host listed before i that is the
// same server as host i (two spellings of one address, or a configured
// name and the address Patroni reports), or -1. One server run has one
// system identifier and one postmaster start time, to the microsecond.
// runs holds the first live host of each run seen so far: Decide calls it
// in host order, on live hosts only, so that a cluster of n hosts costs n
// lookups rather than n²/2 comparisons (a thousand hosts, every publish).
func (c *Cluster) duplicateOf(i int, runs map[serverRun]int) int {
	h := &c.Hosts[i]
	if h.StartedAt.IsZero() {
		return -1
	}
	run := serverRun{h.SystemID, h.StartedAt.Unix(), h.StartedAt.Nanosecond()}
	if j, ok := runs[run]; ok {
		return j
	}
	runs[run] = i
	return -1
}

// markSyncStandbys decides for every replica whether it is a synchronous
// standby of the primary, both ways: SyncProven (the sync filter: proven
// one) and Sync ("replicas: async" leaves it out: it is one or may be).
// Both rest on the one row of the primary's pg_stat_replication that is
// provably the replica's own (senderIndex.own: its WAL receiver streams
// from the primary, and a slot or an application name unique among the
// primary's rows ties it). A replica with no such row is unknown, and
// unknown fails closed both ways: no sync answer, and counted as
// synchronous (SyncUnsure) for "replicas: async", which costs a replica
// but never sends reads to a standby that commits wait for. It is surely
// not synchronous only when its own row says so, when no commit waits
// for any standby (synchronous_standby_names is empty, or no row of the
// primary reports sync or quorum), or when its WAL receiver streams from
// another listed host seen in recovery (cascadesFrom: a standby's WAL
// senders are never synchronous). Without a primary nobody is one.
func (c *Cluster) markSyncStandbys() {
	p := c.PrimaryHost()
	senders := c.senderIndex(p)
	anySync := false
	if p != nil {
		for _, r := range p.Standbys {
			anySync = anySync || r.Sync
		}
	}
	for i := range c.Hosts {
		h := &c.Hosts[i]
		h.Sync, h.SyncUnsure = false, false
		h.SyncProven, h.SyncWhy = false, ""
		if h.Role != RoleReplica {
			continue
		}
		unknown := false
		h.SyncProven, unknown, h.SyncWhy = provenSync(p, h, senders)
		if unknown && p != nil && !p.StatsHidden {
			if up := c.cascadesFrom(h); up != nil {
				unknown = false
				h.SyncWhy = "not a synchronous standby: its WAL receiver streams from " + up.Addr +
					", a standby, and only the primary's own WAL senders are synchronous"
			}
		}
		switch {
		case p == nil:
		case p.StatsHidden:
			markHiddenSync(p, h)
		case h.SyncProven:
			h.Sync = true
		case !p.SyncNamesSet || !anySync:
		case unknown:
			h.Sync, h.SyncUnsure = true, true
			if h.Note == "" {
				h.Note = h.SyncWhy + "; counted as synchronous (replicas: async leaves it out)"
			}
		}
	}
}

// provenSync decides whether replica h is provably a synchronous standby
// of primary p, for the sync filter, and says why not: the primary's
// sync_state is readable, and exactly one of its WAL senders is provably
// h's (senderIndex.own) and reports sync or quorum. Whatever cannot be
// told is a no, and unknown (not a proven "not synchronous").
func provenSync(p, h *Host, senders *senderIndex) (proven, unknown bool, why string) {
	switch {
	case p == nil:
		return false, true, "sync unknown: no primary"
	case p.StatsHidden:
		return false, true, "sync unknown: the probe role cannot read the primary's sync_state (grant pg_monitor)"
	case !p.SyncNamesSet:
		return false, false, "not a synchronous standby: synchronous_standby_names is empty on the primary"
	}
	row, why := senders.own(h)
	if row < 0 {
		return false, true, "sync unknown: " + why
	}
	r := &p.Standbys[row]
	if !r.Sync {
		return false, false, "not a synchronous standby: its WAL sender's sync_state is neither sync nor quorum"
	}
	// A standby that became synchronous (rejoined after an outage, or
	// added to synchronous_standby_names) may lack the commits that
	// returned before then, which waited for other standbys: its sender
	// turned sync once it had sent it the WAL, not once it had replayed
	// it. It is one (replicas: async leaves it out), but the sync filter
	// passes it only once it has replayed what the primary held then
	// (Standby.SyncFrom; review 14a, finding 1).
	switch {
	case r.SyncFrom == SyncPending:
		return false, true, "sync unknown: synchronous only since the primary's latest probe, whose position it must replay first (commits that returned before then waited for other standbys, not for it)"
	case h.ReplayLSN < r.SyncFrom:
		return false, true, "sync unknown: synchronous only since the primary was at " + r.SyncFrom.String() +
			", which it has not replayed yet (replayed to " + h.ReplayLSN.String() + "): commits that returned before then waited for other standbys, not for it"
	}
	return true, false, ""
}

// settleIdentity decides which system identifier is the cluster's. A
// pinned identity never changes. Otherwise an identity is established
// when a strict majority of all configured hosts, live or not, share it;
// or, once every host has been probed at least once, when at least two
// live hosts and a strict majority of the live ones do. Never from
// whichever host happens to answer first, and never from a lone host of a
// larger cluster: a stray host, even the only one up, never takes the
// cluster over. On a tie nothing is established and every host is set
// aside. Once established the identity is kept while any live host has
// it, and changes only when none does and a strict majority of the
// configured hosts agree on another (the cluster was rebuilt), counting
// only hosts that were seen with the old identity (Host.OfIdentity): a
// rebuild shows the new one at addresses pgdns saw with the old, while
// another cluster's hosts listed by mistake (a reload, Patroni) were never
// seen with it and never outvote it, even once every host of the cluster
// is down: the cluster then has no primary, its foreign hosts are set
// aside with a note saying why and Unfollowed names their identity, until
// one of its own is back or an operator pins system_identifier or resets
// the state (review 7, H6). Which hosts were seen with the identity the
// probe carries across reloads and restarts, with the identity's
// knowledge (a blue/green swap hands both to the name the hosts moved to).
//
// Votes are servers, not entries: a live host that is the same server run
// as one counted before it (a name and its address, one address twice, a
// configured host and the address Patroni reports) counts once, and the
// configured hosts are counted without it, so one stray server listed
// twice is one vote. A host that is down cannot be told apart from
// another and counts as one.
func (c *Cluster) settleIdentity(live []bool) {
	c.Unfollowed = 0
	if c.IdentityPinned {
		return
	}
	counts, former := map[uint64]int{}, map[uint64]int{}
	nLive, nHosts, probedAll := 0, len(c.Hosts), true
	runs := make(map[serverRun]bool, len(c.Hosts))
	for i := range c.Hosts {
		h := &c.Hosts[i]
		probedAll = probedAll && (h.Seen || h.Fails > 0)
		if !live[i] {
			continue
		}
		if !h.StartedAt.IsZero() {
			run := serverRun{h.SystemID, h.StartedAt.Unix(), h.StartedAt.Nanosecond()}
			if runs[run] {
				nHosts--
				continue
			}
			runs[run] = true
		}
		counts[h.SystemID]++
		if c.Identity != 0 && h.OfIdentity == c.Identity {
			former[h.SystemID]++
		}
		nLive++
	}
	if c.Identity != 0 && counts[c.Identity] > 0 {
		return
	}
	if c.Identity != 0 {
		for id, n := range counts {
			if 2*n > nHosts && 2*former[id] <= nHosts {
				c.Unfollowed = id // a majority, but not of hosts seen with the identity
			}
		}
		counts = former // a replacement: only hosts seen with the old identity vote
	}
	for id, n := range counts {
		byLive := c.Identity == 0 && probedAll && n >= 2 && 2*n > nLive
		if 2*n > nHosts || byLive {
			c.Identity, c.NewestTimeline, c.Unfollowed = id, 0, 0
			c.Witnessed, c.WitnessedBy, c.WitnessedRun = 0, "", time.Time{}
			return
		}
	}
}

// distinctIPs reports whether no two hosts share a known address (several
// servers on one machine, on different ports), in which case address
// answers need not look for a repeat (forAddresses).
// distinctIPs reports whether no two hosts share an address (Address:
// the one last connected to, else the configured IP), and sets each
// host's SharesIP: its address is another host's on another port. Every
// configured host counts, down or not, so that which addresses an A
// answer may hold does not change with who is up.
func distinctIPs(hosts []Host) bool {
	port := make(map[netip.Addr]uint16, len(hosts))
	mixed := map[netip.Addr]bool{}
	distinct := true
	for i := range hosts {
		ip := hosts[i].Address()
		if !ip.IsValid() {
			continue
		}
		if p, ok := port[ip]; ok {
			distinct = false
			if p != hosts[i].Port {
				mixed[ip] = true
			}
			continue
		}
		port[ip] = hosts[i].Port
	}
	for i := range hosts {
		hosts[i].SharesIP = mixed[hosts[i].Address()]
	}
	return distinct
}

// timelineWitness returns the live replica of the cluster's identity whose
// lower bound of its timeline (its last restartpoint's, or its minimum
// recovery point's: no WAL receiver, or one whose timeline the probe role
// may not read) is the highest above the newest proven timeline, or nil;
// Decide keeps its timeline in Witnessed while that is above the newest
// (the witness may restart, or be gone: the promotion stays a fact; review
// 6, G1c).
// Such a bound proves that its timeline exists: a standby restarts on, or
// flushes a page of, timeline N only after replaying WAL of N, which only
// a promotion to N writes. It does not prove that N is the cluster's
// (a standby left behind on a branch the cluster abandoned shows the
// same), so it never raises the newest timeline: the witness stays set
// aside (abandoned), and so do the hosts below it (Decide), until the
// newest timeline reaches it or an operator forgets it. With Patroni the leader
// key says whose timeline is the cluster's: no witness.
func (c *Cluster) timelineWitness(live []bool) *Host {
	if c.LeaderKey {
		return nil
	}
	var w *Host
	for i := range c.Hosts {
		h := &c.Hosts[i]
		if live[i] && h.InRecovery && !h.TimelineExact && h.Timeline > c.NewestTimeline && (w == nil || h.Timeline > w.Timeline) {
			w = h
		}
	}
	return w
}

// witnessedNote says why h, on a timeline below the witnessed one, is set
// aside.
func (c *Cluster) witnessedNote(h *Host) string {
	tl := strconv.FormatUint(uint64(c.Witnessed), 10)
	return h.timelineKind() + " on timeline " + strconv.FormatUint(uint64(h.Timeline), 10) + ", superseded by timeline " + tl +
		": " + c.WitnessedBy + " (in recovery) has replayed timeline " + tl +
		" (its last restartpoint or minimum recovery point was on it), which only a promotion creates"
}
