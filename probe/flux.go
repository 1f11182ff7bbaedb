package probe

import (
	"time"

	"github.com/pgdns/pgdns/zone"
)

// A cluster is in flux from the moment its role answer changes (its
// primary goes down or changes, a host changes role: what moves the SOA
// serial, zone.SameRoleAnswer), until a primary is known and nothing has
// changed for fluxSettleRounds flux rounds, or for at most
// Config.FluxDuration. While in flux every host of the cluster is probed
// every Config.FluxInterval, so a promotion is seen within that, whatever
// probe.interval is. The bound keeps a cluster without a primary for an
// hour from being probed at that rate for an hour: after an episode that
// ran its full duration, the next may start only FluxDuration later; until
// then the cluster is probed at the normal interval.

// Defaults of the flux settings when Config leaves them zero.
const (
	DefaultFluxInterval = 10 * time.Millisecond
	DefaultFluxDuration = 3 * time.Second
)

// fluxSettleRounds is how many flux rounds without a change, with a
// primary known, end an episode early.
const fluxSettleRounds = 10

// fluxMaxHosts bounds the hosts of the clusters in flux at once, across
// the fleet: an episode begins only while the clusters already in flux
// have fewer hosts than this (so one cluster, however large, always may).
// A flux probes its hosts a hundred times a second (at the default
// flux_interval), each probe costing pgdns about what an interval's probe
// does; a change seen at many clusters at once (pgdns itself stalled, or
// starved of CPU, and its hosts aged out together; every cluster taking
// its roles at the start) put thousands of clusters in flux at once, a
// hundredfold the configured probe rate, which starved the aggregator
// and the DNS answering and aged more hosts out (issue 28: at 10,000
// hosts, 6,057 episodes in the first 35 s and not one probe round, and
// never all hosts live). A cluster whose change finds no room is probed at
// the normal interval, with its rounds, and enters flux at its next
// change that finds room.
const fluxMaxHosts = 32

// flux is the episode state of one cluster. The aggregator owns it.
type flux struct {
	active        bool
	started       time.Time
	lastChange    time.Time
	cooldownUntil time.Time
}

// updateFlux starts, extends or ends each cluster's episode from the
// snapshot just built, compared with the last one.
func (p *Prober) updateFlux(snap *zone.Snapshot, now time.Time) {
	if p.last == nil || !p.last.Ready || !snap.Ready {
		return
	}
	interval, duration := p.fluxSettings()
	if changed, ok := snap.ChangedSince(p.last); ok && p.fluxActive == 0 {
		// The usual case: no episode to end, and a cluster shared with
		// the last snapshot has the same answer. No look at the others.
		for _, ci := range changed {
			p.updateFluxOf(snap, ci, now, interval, duration)
		}
		return
	}
	for ci := range snap.Clusters {
		p.updateFluxOf(snap, ci, now, interval, duration)
	}
}

// updateFluxOf is updateFlux of cluster ci.
func (p *Prober) updateFluxOf(snap *zone.Snapshot, ci int, now time.Time, interval, duration time.Duration) {
	c, f := snap.Clusters[ci], &p.flux[ci]
	p.dirty.looked++
	if !f.active && p.last.Clusters[ci] == c {
		return // shared: the same answer, and no episode to end
	}
	if !zone.SameRoleAnswer(p.last.Clusters[ci], c) {
		if !f.active && !now.Before(f.cooldownUntil) && (p.fluxActive == 0 || p.fluxHosts < fluxMaxHosts) {
			f.active, f.started = true, now
			p.fluxActive++
			p.fluxHosts += len(c.Hosts)
			if hook := p.cfg.Hooks.FluxBegan; hook != nil && p.active.Load() {
				hook(c.Name)
			}
		}
		f.lastChange = now
	}
	if !f.active {
		return
	}
	switch {
	case now.Sub(f.started) >= duration:
		f.active, f.cooldownUntil = false, now.Add(duration)
		p.fluxActive--
		p.fluxHosts -= len(c.Hosts)
	case c.Primary >= 0 && now.Sub(f.lastChange) >= fluxSettleRounds*interval:
		f.active = false
		p.fluxActive--
		p.fluxHosts -= len(c.Hosts)
	}
}

// fluxRound kicks every host of every cluster in flux, and reports
// whether any is.
func (p *Prober) fluxRound() bool {
	if p.fluxActive == 0 {
		return false // the usual case, asked after every publish: no look at every cluster
	}
	any := false
	for ci, c := range p.state {
		if !p.flux[ci].active {
			continue
		}
		any = true
		base, kicked := p.flatIndex(ci, 0), 0
		now := time.Now().UnixNano()
		for hi := range c.Hosts {
			// Replicas probed in step with the primary stay driven (rounds.go)
			// when the flux ends, until the primary's next tick opens a
			// round: a replica probing on its own tick, out of step with
			// the primary, would have loose lag bounds meanwhile.
			if p.last != nil && p.last.Ready && p.last.Clusters[ci].Hosts[hi].Role == zone.RoleReplica {
				p.driven[base+hi].Store(now)
			}
			if p.kick(base + hi) {
				kicked++
			}
		}
		if hook := p.cfg.Hooks.FluxProbes; hook != nil {
			hook(c.Name, len(c.Hosts))
		}
		p.asked(c.Name, ProbeFlux, kicked)
	}
	return any
}

func (p *Prober) fluxSettings() (interval, duration time.Duration) {
	interval, duration = p.cfg.FluxInterval, p.cfg.FluxDuration
	if interval <= 0 {
		interval = DefaultFluxInterval
	}
	if duration <= 0 {
		duration = DefaultFluxDuration
	}
	return interval, duration
}
