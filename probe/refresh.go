package probe

import (
	"time"

	"github.com/pgdns/pgdns/zone"
)

// refresh is one round of immediate probes of a cluster's live hosts (its
// primary and replicas), asked for by read-your-writes lookups that no
// replica could answer yet.
type refresh struct {
	started time.Time    // when its probes were asked for; zero while it is due
	waiting map[int]bool // flat host indexes whose fresh result is due
	primary int          // flat index of the cluster's primary, -1 when it has none
	// primaryFrom: a probe of the primary started at or after it is fresh
	// enough for the round: its start, or the start of the closing probe
	// of the round before when that is still in flight.
	primaryFrom time.Time
	done        chan struct{}
}

// refreshes are the rounds of one cluster: at most one running, or one
// due at the end of the gap; every lookup arriving meanwhile shares it.
type refreshes struct {
	running *refresh
	next    *refresh  // starts once the gap since the last start is over
	last    time.Time // when the last round started
	timer   bool      // a timer will start next at the end of the gap

	// The closing probe of the primary that the last round asked for
	// (finishRefreshes), while no result of it is in; closingLight: a
	// light one (closing.go), which no round takes for its own probe.
	closing        time.Time
	closingPrimary int
	closingPending bool
	closingLight   bool
}

// Coalesced says why a Refresh call started no round of its own
// (Hooks.RefreshCoalesced). Its value is the metric label.
type Coalesced string

// Why a Refresh call started no round of its own.
const (
	// CoalescedRunning: it shares the round running.
	CoalescedRunning Coalesced = "running"
	// CoalescedMinGap: the cluster's last round started less than
	// Config.MinRefreshGap ago; it waits for the next round, which starts
	// at the end of the gap.
	CoalescedMinGap Coalesced = "min_gap"
)

// Refresh probes the live hosts of cluster, its primary and its replicas
// (each host still has at most one probe in flight), and returns a channel
// that is closed when their results are in a published snapshot. The
// primary is probed too, so that the replicas' lag is measured against a
// primary position as fresh as theirs.
//
// A caller shares the round running, if any: its probes may have read the
// hosts before the caller's write, so a caller whose question its results
// do not answer asks again and gets a round that starts after it asked. A
// round starts at once, or, when the last one started less than
// Config.MinRefreshGap ago, at the end of that gap, shared by every caller
// until then. So lookups, however many, cost at most one probe per host per
// gap. A caller waits on the channel for as long as it can afford
// (dns.lsn_wait).
//
// The hosts are those of the prober's own last snapshot, never the shared
// table's, which may still hold another prober's hosts right after a
// reload.
func (p *Prober) Refresh(cluster string) <-chan struct{} {
	p.refreshMu.Lock()
	defer p.refreshMu.Unlock()
	now := time.Now()
	rs := p.refreshing[cluster]
	if rs == nil {
		rs = &refreshes{}
		p.refreshing[cluster] = rs
	}
	if r := rs.running; r != nil && now.Sub(r.started) >= p.cfg.Timeout {
		// A round whose probes outlived their deadline: let its waiters
		// go and go on.
		close(r.done)
		rs.running = nil
		p.startNext(cluster, rs, now)
	}
	if rs.running != nil {
		p.coalesced(cluster, CoalescedRunning)
		return rs.running.done
	}
	if rs.next != nil {
		p.coalesced(cluster, CoalescedMinGap)
		return rs.next.done
	}
	r := &refresh{done: make(chan struct{})}
	r.waiting, r.primary = p.refreshHosts(cluster)
	if len(r.waiting) == 0 {
		close(r.done)
		return r.done
	}
	rs.next = r
	if now.Sub(rs.last) < p.cfg.MinRefreshGap {
		p.coalesced(cluster, CoalescedMinGap)
	}
	p.startNext(cluster, rs, now)
	return r.done
}

// startNext starts the cluster's next round if none is running and the gap
// since the last one is over, or sets a timer for the end of the gap. The
// caller holds refreshMu.
func (p *Prober) startNext(cluster string, rs *refreshes, now time.Time) {
	r := rs.next
	if r == nil || rs.running != nil {
		return // finishRefreshes starts it
	}
	if wait := rs.last.Add(p.cfg.MinRefreshGap).Sub(now); wait > 0 {
		if !rs.timer {
			rs.timer = true
			time.AfterFunc(wait, func() {
				p.refreshMu.Lock()
				defer p.refreshMu.Unlock()
				rs.timer = false
				p.startNext(cluster, rs, time.Now())
			})
		}
		return
	}
	rs.running, rs.next, rs.last = r, nil, now
	r.started, r.primaryFrom = now, now
	if rs.closingPending && !rs.closingLight && r.primary == rs.closingPrimary && now.Sub(rs.closing) < p.cfg.Timeout {
		// The last round's closing probe of the primary, a full one, is
		// in flight: it started a moment ago, as fresh as a probe asked
		// for now, which would only queue behind it. A light one reads
		// too little for the round's own (closing.go): the round kicks
		// the primary, probed in full once the light probe is done.
		r.primaryFrom = rs.closing
	}
	kicked := 0
	for flat := range r.waiting {
		if flat == r.primary && !r.primaryFrom.Equal(r.started) {
			continue
		}
		if p.kick(flat) { // unless already kicked
			kicked++
		}
	}
	p.asked(cluster, ProbeRefresh, kicked)
	if hook := p.cfg.Hooks.RefreshRound; hook != nil {
		hook(cluster)
	}
}

func (p *Prober) coalesced(cluster string, why Coalesced) {
	if hook := p.cfg.Hooks.RefreshCoalesced; hook != nil {
		hook(cluster, why)
	}
}

// refreshHosts returns the flat indexes of cluster's primary and replicas
// in the prober's own last published snapshot, whose clusters and hosts
// are in the prober's configured order, and the primary's (-1: none).
func (p *Prober) refreshHosts(cluster string) (hosts map[int]bool, primary int) {
	hosts, primary = map[int]bool{}, -1
	snap := p.published.Load()
	if snap == nil {
		return hosts, primary
	}
	flat := 0
	for _, c := range snap.Clusters {
		if c.Name == cluster {
			for hi := range c.Hosts {
				if r := c.Hosts[hi].Role; (r == zone.RolePrimary || r == zone.RoleReplica) && flat+hi < len(p.kicks) {
					hosts[flat+hi] = true
					if r == zone.RolePrimary {
						primary = flat + hi
					}
				}
			}
		}
		flat += len(c.Hosts)
	}
	return hosts, primary
}

// noteRefreshed marks a result as the fresh one a running round waits
// for, if its probe started after the round's probes were asked for (the
// primary's: see primaryFrom).
func (p *Prober) noteRefreshed(res result) {
	p.refreshMu.Lock()
	defer p.refreshMu.Unlock()
	rs := p.refreshing[p.state[res.cluster].Name]
	if rs == nil {
		return
	}
	flat := p.flatIndex(res.cluster, res.host)
	if rs.closingPending && flat == rs.closingPrimary && !res.started.Before(rs.closing) {
		rs.closingPending = false
	}
	if r := rs.running; r != nil {
		from := r.started
		if flat == r.primary {
			from = r.primaryFrom
		}
		if !res.started.Before(from) {
			delete(r.waiting, flat)
		}
	}
}

// finishRefreshes releases the waiters of every running round whose
// results have all been published. The aggregator calls it after each
// publish.
//
// A finished round then probes its primary once more, as a probe round
// closes (rounds.go): the round probed the primary alongside the
// replicas, so that their time lag is measured against a primary position
// as fresh as theirs, but a byte bound needs a primary probe that started
// after the replica's ended (lag.go). Its waiters do not wait for it.
//
// That probe is a light one (closing.go), as a probe round's closing
// probe is: the byte bounds need no more of it, and the round's own full
// probe of the primary, a moment before, read the rest. Under a steady
// stream of lsn- lookups a full one doubled the primary's full probes,
// one for each round and one to close it (issue 28: 364 probes/s of the
// primary under the refresh bound, 183 of a replica). When the gap since
// the round started is already over, a round asked for next starts at
// once, while the closing probe is in flight: that one is a full probe,
// which such a round takes for its own probe of the primary (startNext),
// so that one probe both frames the last round's replica samples and is
// the new round's.
func (p *Prober) finishRefreshes() {
	p.refreshMu.Lock()
	defer p.refreshMu.Unlock()
	now := time.Now()
	for name, rs := range p.refreshing {
		if r := rs.running; r != nil && len(r.waiting) == 0 {
			if r.primary >= 0 {
				light := now.Sub(rs.last) < p.cfg.MinRefreshGap
				kick := p.kick
				if light {
					kick = p.kickClosing
				}
				if kick(r.primary) {
					p.asked(name, ProbeRefresh, 1)
				}
				rs.closing, rs.closingPrimary, rs.closingPending, rs.closingLight = now, r.primary, true, light
			}
			close(r.done)
			rs.running = nil
			p.startNext(name, rs, now)
		}
	}
}
