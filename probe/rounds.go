package probe

import (
	"time"

	"github.com/pgdns/pgdns/zone"
)

// Probe rounds keep the primary's samples close to its replicas', so that
// the lag bounds (lag.go) are tight: a time lag is bounded by the last
// primary sample before the replica's, a byte lag by the first one after.
// Each probe of the primary on its own tick opens a round: the aggregator
// kicks the cluster's replicas at once, and when all of them have answered
// it kicks the primary once more to close the round. Replicas that rounds
// drive skip their own ticks; should the rounds stop (no primary, or a
// hung one), their ticks take over within two intervals.

// round is one probe round of a cluster. The aggregator owns it.
type round struct {
	started time.Time
	primary int          // flat index of the primary that opened it
	waiting map[int]bool // flat indexes of the replicas still to answer
	closed  time.Time    // when the last replica answered and the primary was kicked
}

// advanceRound moves the cluster's round along with result r: a result of
// the primary opens a round, and the last replica result of a round kicks
// the closing probe of the primary. It reads the roles of the prober's
// last snapshot.
func (p *Prober) advanceRound(r result) {
	flat := p.flatIndex(r.cluster, r.host)
	if r.started.After(p.answered[flat]) {
		p.answered[flat] = r.started
	}
	if p.last == nil || !p.last.Ready || r.err != nil {
		return
	}
	c := p.last.Clusters[r.cluster]
	rd := p.rounds[r.cluster]
	if r.host == c.Primary {
		if r.ticked { // not the closing probe, nor a Refresh's
			p.openRound(r.cluster, c, flat)
		} else if rd != nil && len(rd.waiting) == 0 && !r.started.Before(rd.closed) {
			p.rounds[r.cluster] = nil // the closing probe: the round is over
		}
		return
	}
	if rd == nil || !rd.waiting[flat] || r.started.Before(rd.started) {
		return
	}
	delete(rd.waiting, flat)
	if len(rd.waiting) == 0 {
		rd.closed = time.Now()
		p.kick(rd.primary)
	}
}

// openRound kicks every replica of c, primary being c's primary.
func (p *Prober) openRound(ci int, c *zone.Cluster, primary int) {
	rd := &round{started: time.Now(), primary: primary, waiting: map[int]bool{}}
	base := p.flatIndex(ci, 0)
	for hi := range c.Hosts {
		if c.Hosts[hi].Role != zone.RoleReplica {
			continue
		}
		flat := base + hi
		// A replica still busy with the probe an earlier round asked for
		// (slow, or hung) gives this round no fresh result before it is
		// done: the round does not wait for it, so that it closes, and
		// its closing probe frames the other replicas' samples (a byte
		// bound needs a primary probe started after the replica's ended,
		// lag.go), as soon as they have answered. Busy: no result of a
		// probe started after the last round's kick.
		if !p.roundKicked[flat].After(p.answered[flat]) {
			rd.waiting[flat] = true
		}
		p.roundKicked[flat] = rd.started
		p.driven[flat].Store(rd.started.UnixNano())
		p.kick(flat)
	}
	p.rounds[ci] = rd
	if len(rd.waiting) == 0 {
		p.rounds[ci] = nil
	}
}

// kick asks host flat for a probe now, unless one is already asked for.
func (p *Prober) kick(flat int) {
	select {
	case p.kicks[flat] <- struct{}{}:
	default:
	}
}

// skipTick reports whether host flat, last probed at lastStart, leaves its
// own tick to the rounds that drive it.
func (p *Prober) skipTick(flat int, lastStart time.Time) bool {
	since := time.Since(time.Unix(0, p.driven[flat].Load()))
	return since < 2*p.cfg.Interval && time.Since(lastStart) < p.cfg.Interval*3/2
}

// driveOnReady marks the replicas of a snapshot that has just become ready
// as driven, so that they wait for the primary's first round instead of
// probing on their own ticks, out of step with it, meanwhile.
func (p *Prober) driveOnReady(snap *zone.Snapshot) {
	if !snap.Ready || (p.last != nil && p.last.Ready) {
		return
	}
	now := time.Now().UnixNano()
	for ci, c := range snap.Clusters {
		base := p.flatIndex(ci, 0)
		for hi := range c.Hosts {
			if c.Hosts[hi].Role == zone.RoleReplica {
				p.driven[base+hi].Store(now)
			}
		}
	}
}
