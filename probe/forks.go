package probe

import (
	"strconv"
	"time"

	"github.com/pgdns/pgdns/zone"
)

// Two branches under one timeline number. A server promoted without
// having seen another's history file for the next timeline picks that
// same number: after a failover that stalled (the first promoted primary
// cut off, a second one promoted), two branches of "timeline 3" exist, and
// a replica of the first one streams or replays WAL the second one never
// wrote. Its position compares with the second one's as if they were one
// timeline. What tells them apart: a replica of a writable host can never
// have replayed past what that host had written when the replica was
// read, since WAL reaches replicas only once written. So a replica whose
// replay position, read before a probe of the writable host started, is
// past the position that probe read, is not that host's replica, nor will
// it become one by replaying more (zone.Host.DivergedFrom). The timeline
// history files tell the branches apart too, when they forked at
// different points (zone.forkedFrom).

// replayWatch is the earliest reading of a replica's current replay
// position in its current run: the position, the exact timeline it was
// on, and a time by which it had surely been read (when the aggregator
// took the result, after the probe ended).
type replayWatch struct {
	replay   zone.LSN
	timeline uint32
	read     time.Time
}

// watchReplay keeps the earliest reading of replica h's replay position;
// h still holds what its previous sample said. continuous is as in record.
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
	if !s.InRecovery || !exact {
		delete(p.replays, h)
		return
	}
	if w, ok := p.replays[h]; ok && continuous && w.timeline == tl && w.replay == s.ReplayLSN {
		return
	}
	p.replays[h] = replayWatch{replay: s.ReplayLSN, timeline: tl, read: time.Now()} // the clock of result.started
}

// checkForks marks the replicas of cluster ci that writable host w, found
// at position pos by a probe that started at started, proves to be on
// another branch of its timeline: read at a replay position past pos
// before that probe started. A proof names w's server (followServer).
func (p *Prober) checkForks(ci int, w *zone.Host, started time.Time, pos zone.LSN) {
	c := p.state[ci]
	for i := range c.Hosts {
		h := &c.Hosts[i]
		if h.DivergedFrom != "" && h != w {
			followServer(h, w)
		}
		rw, ok := p.replays[h]
		if !ok || h == w || h.DivergedFrom == w.Addr || h.SystemID != w.SystemID || rw.timeline != w.Timeline ||
			rw.read.After(started) || rw.replay <= pos {
			continue
		}
		h.DivergedFrom, h.DivergedRun = w.Addr, w.StartedAt
		h.DivergedNote = "another branch of timeline " + strconv.FormatUint(uint64(w.Timeline), 10) + ": replayed to " + rw.replay.String() +
			", past " + pos.String() + " where " + w.Addr + " was read after it"
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
