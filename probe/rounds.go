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
// hung one), their ticks take over: the first tick two intervals after the
// last round's kick and their last probe probes (so within three).

// round is one probe round of a cluster. The aggregator owns it.
type round struct {
	cluster int
	started time.Time
	primary int       // flat index of the primary that opened it
	waiting []bool    // by host of the cluster: a replica still to answer
	left    int       // how many are
	closed  time.Time // when the last replica answered and the primary was kicked
	// primaryAgain: a result of the primary came since the round
	// opened, the closing probe or another: the round's build waits no
	// longer (hold.go, deferBuild).
	primaryAgain bool
	// moved is when a replica's result last moved the round along
	// (waiting cleared): a round whose replicas keep answering is
	// under way, however long it spans (hold.go, deferBuild).
	moved time.Time
	// few is waiting's room for a cluster of up to 4 hosts: a round is
	// then one allocation, not two (a round opens every interval in
	// every cluster with a primary).
	few [4]bool
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
	if r.ticked {
		p.askedOf(r.cluster, p.tickCause(r), 1)
	}
	if p.last == nil || !p.last.Ready || r.err != nil {
		return
	}
	c := p.last.Clusters[r.cluster]
	rd := p.rounds[r.cluster]
	if r.host == c.Primary {
		if r.ticked { // not the closing probe, nor a Refresh's
			p.openRound(r.cluster, c, flat)
		} else if rd != nil {
			rd.primaryAgain = true
			if rd.left == 0 && !r.started.Before(rd.closed) {
				p.rounds[r.cluster] = nil // the closing probe: the round is over
			}
		}
		return
	}
	if rd == nil || !rd.waiting[r.host] || r.started.Before(rd.started) {
		return
	}
	rd.waiting[r.host] = false
	rd.moved = time.Now()
	if rd.left--; rd.left == 0 {
		rd.closed = rd.moved
		p.closing = append(p.closing, rd) // hold.go
		// The closing probe is a light one (closing.go).
		if p.kickClosing(rd.primary) {
			p.askedOf(r.cluster, ProbeClosing, 1)
		}
	}
}

// openRound kicks every replica of c, primary being c's primary.
func (p *Prober) openRound(ci int, c *zone.Cluster, primary int) {
	rd := &round{cluster: ci, started: time.Now(), primary: primary}
	if len(c.Hosts) <= len(rd.few) {
		rd.waiting = rd.few[:len(c.Hosts)]
	} else {
		rd.waiting = make([]bool, len(c.Hosts))
	}
	base, kicked := p.flatIndex(ci, 0), 0
	defer func() { p.askedOf(ci, ProbeRound, kicked) }()
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
			rd.waiting[hi] = true
			rd.left++
		}
		p.roundKicked[flat] = rd.started
		p.driven[flat].Store(rd.started.UnixNano())
		if p.kick(flat) {
			kicked++
		}
	}
	p.rounds[ci] = rd
	if rd.left == 0 {
		p.rounds[ci] = nil
		return
	}
	p.opened = append(p.opened, rd) // hold.go
}

// kick asks host flat for a probe now, unless one is already asked for,
// and reports whether it asked. A host's goroutine waiting on its session
// (intake.go, idle) is woken by its alarm, as it reads no channel then.
// The probe is a full one (a round's closing kick alone asks for a light
// one: kickClosing).
func (p *Prober) kick(flat int) bool {
	p.kickModes[flat].Store(kickFull)
	return p.sendKick(flat)
}

// sendKick is kick without a say in what the probe is.
func (p *Prober) sendKick(flat int) bool {
	select {
	case p.kicks[flat] <- struct{}{}:
		if a := p.wakeups[flat].Load(); a != nil {
			a.kick()
		}
		return true
	default:
		return false
	}
}

// skipTick reports whether host flat, last probed at lastStart, leaves its
// own tick to the rounds that drive it: while a round kicked it less than
// two intervals ago and it probed less than two intervals ago. Rounds open
// when the primary's answer to its tick reaches the aggregator, which at a
// thousand hosts on a loaded machine is up to an interval late at times;
// a replica whose tick fell in such a gap probed on it, and again at the
// late round's kick a moment later (issue 28: 7% over the configured
// rate, when a tick probed at 1.5 intervals).
func (p *Prober) skipTick(flat int, lastStart time.Time) bool {
	since := time.Since(time.Unix(0, p.driven[flat].Load()))
	return since < 2*p.cfg.Interval && time.Since(lastStart) < 2*p.cfg.Interval
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

// ProbeCause says why a host was probed when it was (Hooks.Probes). Its
// value is the metric label.
type ProbeCause string

// Why a host was probed.
const (
	// ProbeTick: on the host's own tick. A primary's opens a round; a
	// host of a cluster without a primary probes on its tick alone.
	ProbeTick ProbeCause = "tick"
	// ProbeTickDriven: a replica's own tick while its cluster has a
	// primary, whose rounds did not drive it then (skipTick).
	ProbeTickDriven ProbeCause = "tick_driven"
	// ProbeRound: kicked by a probe round of its primary (openRound).
	ProbeRound ProbeCause = "round"
	// ProbeClosing: the primary kicked to close a round (advanceRound).
	ProbeClosing ProbeCause = "closing"
	// ProbeFlux: kicked while its cluster is in flux (flux.go).
	ProbeFlux ProbeCause = "flux"
	// ProbeRefresh: kicked by a Refresh for lsn- lookups (refresh.go).
	ProbeRefresh ProbeCause = "refresh"
)

// asked tells Hooks.Probes of n probes of cluster asked for by why.
func (p *Prober) asked(cluster string, why ProbeCause, n int) {
	if hook := p.cfg.Hooks.Probes; hook != nil && n > 0 {
		hook(cluster, why, n)
	}
}

// askedOf is asked of cluster ci, by the function Hooks.ClusterProbes
// gave for it when there is one: the counts of every round.
func (p *Prober) askedOf(ci int, why ProbeCause, n int) {
	if n <= 0 {
		return
	}
	if p.probesOf != nil {
		if count := p.probesOf[ci]; count != nil {
			count(why, n)
		}
		return
	}
	p.asked(p.state[ci].Name, why, n)
}

// tickCause is why r, a result of a probe on its host's tick, was one.
func (p *Prober) tickCause(r result) ProbeCause {
	if p.last == nil || !p.last.Ready {
		return ProbeTick
	}
	c := p.last.Clusters[r.cluster]
	if r.host != c.Primary && c.Primary >= 0 && c.Hosts[r.host].Role == zone.RoleReplica {
		return ProbeTickDriven
	}
	return ProbeTick
}
