package probe

import (
	"strconv"
	"strings"
	"time"

	"github.com/pgdns/pgdns/zone"
)

// Two branches under one timeline number. A server promoted without
// having seen another's history file for the next timeline picks that
// same number: after a failover that stalled (the first promoted primary
// cut off, a second one promoted), two branches of "timeline 3" exist, and
// a replica of the first one streams or replays WAL the second one never
// wrote; a primary restored in place from a snapshot writes a second
// branch of its own timeline, and its replicas had the first. Positions
// compare as if they were one timeline. What tells them apart: a replica
// of a writable host can never have received or replayed past what that
// host had written when the replica was read, since WAL reaches replicas
// only once written (flushed: a WAL sender sends no further). So a replica
// whose received or replayed position, read before a probe of the writable
// host started, is past the position that probe read, is not that host's
// replica, nor will it become one by replaying more
// (zone.Host.DivergedFrom). This needs no WAL receiver: a replica whose
// upstream is gone, or whose receiver the restored primary refuses (it
// asks from a position past the primary's flush), replays nothing more
// and is the usual replica with the lost writes (review 7, H2). Its
// timeline is then a lower bound, and it is compared only when the bound
// is the writable host's timeline and that is the newest one known: on a
// later timeline it may follow a promotion, which supersedes the writable
// host instead (rule 1). A replica whose WAL receiver streams from a
// replica proven on another branch is on that branch too, whatever its
// own position (inheritFork: review 7, H3). The timeline history files
// tell the branches apart too, when they forked at different points
// (zone.forkedFrom).

// replayWatch is the earliest reading of a replica's current position in
// its current run: its replay and receive positions, the timeline it was
// on (exact, or a lower bound), and a time by which it had surely been
// read (when the aggregator took the result, after the probe ended).
type replayWatch struct {
	replay, receive zone.LSN
	timeline        uint32
	exact           bool // timeline is the WAL receiver's, not a lower bound
	read            time.Time
}

// reach is the furthest position the reading shows the replica had: what
// it replayed, or what its WAL receiver had received and flushed, if more.
func (w replayWatch) reach() (zone.LSN, string) {
	if w.receive > w.replay {
		return w.receive, "received to "
	}
	return w.replay, "replayed to "
}

// watchReplay keeps the earliest reading of replica h's positions; h still
// holds what its previous sample said. continuous is as in record; tl is
// the sample's timeline, exact or (without a streaming WAL receiver) a
// lower bound.
func (p *Prober) watchReplay(h *zone.Host, continuous bool, s Sample, tl uint32, exact bool) {
	if !s.InRecovery {
		// Writable: a promotion, the operator's choice of this data; its
		// own writes start a history of their own (rule 1 judges it).
		h.DivergedFrom, h.DivergedNote, h.DivergedRun = "", "", time.Time{}
	}
	// A new run of the replica's server keeps the proof: a restart keeps
	// the data directory, which still holds the other branch's writes
	// (PostgreSQL may even replay the primary's WAL on top of them: a
	// corrupted replica at lag 0). Nothing pgdns reads proves a re-clone
	// or a pg_rewind (pg_control_* show positions and timelines, which two
	// branches of one timeline share, and a re-clone keeps the system
	// identifier), so the proof ends only at a promotion or by an operator
	// (pgdns -reset-state): review 6, G7b.
	if !s.InRecovery {
		delete(p.replays, h)
		return
	}
	if w, ok := p.replays[h]; ok && continuous && w.timeline == tl && w.exact == exact &&
		w.replay == s.ReplayLSN && w.receive == s.ReceiveLSN {
		return
	}
	p.replays[h] = replayWatch{replay: s.ReplayLSN, receive: s.ReceiveLSN, timeline: tl, exact: exact,
		read: time.Now()} // the clock of result.started
}

// checkForks marks the replicas of cluster ci that writable host w, found
// at position pos by a probe that started at started, proves to be on
// another branch of its timeline: read at a position past pos before that
// probe started. A proof names w's server (followServer).
func (p *Prober) checkForks(ci int, w *zone.Host, started time.Time, pos zone.LSN) {
	c := p.state[ci]
	for i := range c.Hosts {
		h := &c.Hosts[i]
		if h.DivergedFrom != "" && h != w {
			followServer(h, w)
		}
		rw, ok := p.replays[h]
		if !ok || h == w || h.DivergedFrom == w.Addr || h.SystemID != w.SystemID || rw.timeline != w.Timeline ||
			rw.read.After(started) {
			continue
		}
		if !rw.exact && (w.Timeline < c.NewestTimeline || w.Timeline < c.Witnessed) {
			// The lower bound is w's timeline, but a later one is known:
			// the replica may be on it, past w's position (rule 1 sets w
			// aside, not the replica).
			continue
		}
		at, how := rw.reach()
		if at <= pos {
			continue
		}
		h.DivergedFrom, h.DivergedRun = w.Addr, w.StartedAt
		p.proven(ci, h, h.StartedAt)
		h.DivergedNote = "another branch of timeline " + strconv.FormatUint(uint64(w.Timeline), 10) + ": " + how + at.String() +
			", past " + pos.String() + " where " + w.Addr + " was read after it"
	}
}

// inheritFork sets replica h of cluster ci aside with the replica it
// streams from, when that one is proven on another branch: every WAL
// record h receives is its upstream's, so it is on that branch too, even
// behind the primary's position, where no position of its own can prove
// it (review 7, H3). The proof is its upstream's, against the same
// writable server, and stays with h as any proof does (watchReplay). Only
// a WAL receiver shown streaming, from a configured host of the cluster's
// system identifier (zone.Host.ReceivesFrom, as rule 7 tells cascades),
// is taken: a replica streaming from a host pgdns does not probe shows
// nothing.
func (p *Prober) inheritFork(ci int, h *zone.Host) {
	if !h.InRecovery || h.DivergedFrom != "" || h.Receiver != "streaming" {
		return
	}
	c := p.state[ci]
	for i := range c.Hosts {
		u := &c.Hosts[i]
		if u == h || u.DivergedFrom == "" || !u.InRecovery || u.SystemID != h.SystemID || !h.ReceivesFrom(u) {
			continue
		}
		note := "which " + u.DivergedNote // "which streams from …" down a chain of cascades
		if strings.HasPrefix(u.DivergedNote, "another branch") {
			note = "which is on " + u.DivergedNote
		}
		h.DivergedFrom, h.DivergedRun = u.DivergedFrom, u.DivergedRun
		h.DivergedNote = "streams from " + u.Addr + ", " + note
		p.proven(ci, h, h.StartedAt)
		return
	}
}

// followServer keeps replica h's proof on the server it names when
// writable host w is that server under another name: the same server run
// listed under another address (a DNS name for it, a second IP, a
// forwarder, Patroni's address) takes the address, so that a later
// restart there is still that server; a new run at the proof's address (a
// restart, which keeps its WAL) takes the run, so that the run listed
// under another address next is too. Either way the replica stays aside
// (zone.forkedFrom): a proof is never lost to a change of spelling
// (review 6, G7). A new server given the old address keeps the replica
// aside too: failing closed.
func followServer(h, w *zone.Host) {
	if h.SystemID != w.SystemID {
		return
	}
	switch {
	case h.DivergedFrom == w.Addr:
		h.DivergedRun = w.StartedAt
	case !h.DivergedRun.IsZero() && h.DivergedRun.Equal(w.StartedAt):
		h.DivergedFrom = w.Addr
	}
}
