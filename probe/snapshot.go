package probe

import (
	"strings"
	"time"

	"github.com/pgdns/pgdns/zone"
)

// This file turns probe results into published snapshots: the observed
// state, roles (zone.Decide), lags (lag.go) and the log of changes.

// record folds one result into the observed state.
func (p *Prober) record(r result) {
	h := &p.state[r.cluster].Hosts[r.host]
	p.noteRefreshed(r)
	if idx := p.flatIndex(r.cluster, r.host); !p.done[idx] {
		p.done[idx] = true
		p.probed++
	}
	if r.err != nil {
		h.Fails++
		h.LastError = r.err.Error()
		return
	}
	s := r.sample
	if h.Seen && s.Timeline > h.Timeline && h.Timeline > 0 {
		// A timeline switch the probe watched happen: the old timeline
		// ended at or after the last position the host had replayed on
		// it (PostgreSQL refuses to follow a timeline that forked off
		// before its own position). A safe lower bound when the history
		// file cannot be read. A new slice: published snapshots share
		// the old one.
		old := p.observed[h]
		p.observed[h] = append(old[:len(old):len(old)], zone.TimelineEnd{Timeline: h.Timeline, End: h.ReplayLSN})
	}
	h.Seen, h.ProbedAt, h.Fails, h.LastError = true, s.At, 0, ""
	h.IP, h.InRecovery, h.Timeline, h.SystemID = s.IP, s.InRecovery, s.Timeline, s.SystemID
	h.WriteLSN, h.ReceiveLSN, h.ReplayLSN = s.WriteLSN, s.ReceiveLSN, s.ReplayLSN
	h.AppName, h.SyncStandbys = s.AppName, s.SyncStandbys
	h.History = s.History
	if len(h.History) == 0 {
		h.History = p.observed[h]
	}

	// The WAL clock of a writable host. It starts over when the host
	// changes timeline or goes back into recovery: positions on another
	// timeline are not comparable.
	w := p.history[h]
	if s.InRecovery {
		delete(p.history, h)
		return
	}
	if w == nil || w.timeline != s.Timeline {
		w = &walHistory{owner: h.Addr, timeline: s.Timeline}
		p.history[h] = w
	}
	w.add(s.At, s.WriteLSN)
}

func (p *Prober) flatIndex(ci, hi int) int {
	n := 0
	for _, c := range p.state[:ci] {
		n += len(c.Hosts)
	}
	return n + hi
}

// publish builds a new snapshot from the observed state, derives roles and
// lags, logs what changed, and stores it.
func (p *Prober) publish() {
	now := p.now()
	stale := p.cfg.StaleAfter()
	snap := &zone.Snapshot{
		Ready:      p.probed == len(p.done),
		Built:      now,
		StaleAfter: stale,
		Default:    p.defCluster,
	}
	for _, src := range p.state {
		c := &zone.Cluster{Name: src.Name, AsyncOnly: src.AsyncOnly, Hosts: append([]zone.Host(nil), src.Hosts...)}
		c.Decide(now, stale, p.cfg.MaxFails)
		p.computeLag(src, c, now, stale)
		inheritHistory(c)
		snap.Clusters = append(snap.Clusters, c)
	}
	snap.StampSerials(p.serialBase())
	p.logChanges(snap)
	p.last = snap
	if snap.Ready {
		p.readyOnce.Do(func() { close(p.ready) })
	}
	if p.active.Load() {
		p.table.Store(snap)
	}
}

// computeLag fills Lag, LagBytes and LagKnown of every replica of c from
// the WAL clock of c's primary (see lag.go). src holds the same hosts in
// the same order; its elements key the history.
func (p *Prober) computeLag(src, c *zone.Cluster, now time.Time, stale time.Duration) {
	pi := c.Primary
	if pi < 0 {
		return
	}
	primary := &c.Hosts[pi]
	primary.LagKnown = true
	w := p.history[&src.Hosts[pi]]
	if w == nil || now.Sub(primary.ProbedAt) > stale {
		return
	}
	for i := range c.Hosts {
		h := &c.Hosts[i]
		if h.Role != zone.RoleReplica || h.Timeline != primary.Timeline {
			continue // WAL positions on different timelines do not compare
		}
		h.LagBytes, h.Lag, h.LagKnown = w.lag(h.ProbedAt, h.ReplayLSN)
	}
}

// inheritHistory gives replicas on the primary's timeline, whose own
// history is not known, the primary's: one timeline of one cluster has
// one history.
func inheritHistory(c *zone.Cluster) {
	p := c.PrimaryHost()
	if p == nil {
		return
	}
	for i := range c.Hosts {
		h := &c.Hosts[i]
		if h.Role == zone.RoleReplica && len(h.History) == 0 && h.Timeline == p.Timeline {
			h.History = p.History
		}
	}
}

// logChanges logs each host whose role or note changed since the last
// snapshot, and each cluster entering or leaving split brain: once per
// change, never on every probe.
func (p *Prober) logChanges(snap *zone.Snapshot) {
	if !snap.Ready {
		return
	}
	for ci, c := range snap.Clusters {
		wasSplit := p.last != nil && p.last.Ready && p.last.Clusters[ci].SplitBrain
		switch {
		case c.SplitBrain && !wasSplit:
			var writable []string
			for i := range c.Hosts {
				if strings.HasPrefix(c.Hosts[i].Note, "split brain") {
					writable = append(writable, c.Hosts[i].Addr)
				}
			}
			p.log.Error("split brain: writable hosts on the same timeline; answering no primary until it is resolved",
				"cluster", c.Name, "hosts", strings.Join(writable, ","))
			if hook := p.cfg.Hooks.SplitBrain; hook != nil {
				hook(c.Name)
			}
		case !c.SplitBrain && wasSplit:
			p.log.Info("split brain resolved", "cluster", c.Name)
		}
		for hi := range c.Hosts {
			h := &c.Hosts[hi]
			was, wasNote := zone.RoleUnknown, ""
			if p.last != nil && p.last.Ready {
				old := &p.last.Clusters[ci].Hosts[hi]
				was, wasNote = old.Role, old.Note
			} else if h.Role == zone.RoleUnknown && h.Note == "" && h.LastError == "" {
				continue
			}
			if h.Role == was && h.Note == wasNote {
				continue
			}
			attrs := []any{"cluster", c.Name, "host", h.Addr, "from", was.String(), "to", h.Role.String()}
			if h.Note != "" {
				attrs = append(attrs, "why", h.Note)
			}
			if h.LastError != "" {
				attrs = append(attrs, "error", h.LastError)
			}
			if hook := p.cfg.Hooks.RoleChanged; hook != nil && h.Role != was {
				hook(c.Name, h.Addr, was, h.Role)
			}
			if h.Role == zone.RoleDown || h.Note != "" {
				p.log.Warn("host state changed", attrs...)
			} else {
				p.log.Info("host state changed", attrs...)
			}
		}
	}
}
