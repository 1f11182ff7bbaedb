package probe

import (
	"time"

	"github.com/pgdns/pgdns/zone"
)

// refresh is one round of immediate probes of a cluster's replicas, asked
// for by read-your-writes lookups that no replica could answer yet. All
// lookups that arrive while it runs share it.
type refresh struct {
	started time.Time
	waiting map[int]bool // flat host indexes whose fresh result is due
	done    chan struct{}
}

// Refresh probes the live replicas of cluster at once (each host still has
// at most one probe in flight) and returns a channel that is closed when
// their results are in a published snapshot. Concurrent callers share one
// round. A caller waits on it for as long as it can afford (dns.lsn_wait).
func (p *Prober) Refresh(cluster string) <-chan struct{} {
	p.refreshMu.Lock()
	defer p.refreshMu.Unlock()
	if r := p.refreshing[cluster]; r != nil {
		if time.Since(r.started) < p.cfg.Timeout {
			return r.done
		}
		// A round whose probes outlived their deadline: let its waiters
		// go and start over.
		close(r.done)
		delete(p.refreshing, cluster)
	}

	r := &refresh{started: time.Now(), waiting: map[int]bool{}, done: make(chan struct{})}
	snap := p.table.Load()
	for ci, c := range snap.Clusters {
		if c.Name != cluster || ci >= len(p.state) {
			continue
		}
		for hi := range c.Hosts {
			if c.Hosts[hi].Role != zone.RoleReplica {
				continue
			}
			flat := p.flatIndex(ci, hi)
			r.waiting[flat] = true
			select {
			case p.kicks[flat] <- struct{}{}:
			default: // already kicked
			}
		}
	}
	if len(r.waiting) == 0 {
		close(r.done)
		return r.done
	}
	p.refreshing[cluster] = r
	return r.done
}

// noteRefreshed marks a result as the fresh one a refresh waits for, if it
// was started after the refresh was asked for.
func (p *Prober) noteRefreshed(res result) {
	p.refreshMu.Lock()
	defer p.refreshMu.Unlock()
	r := p.refreshing[p.state[res.cluster].Name]
	if r != nil && !res.started.Before(r.started) {
		delete(r.waiting, p.flatIndex(res.cluster, res.host))
	}
}

// finishRefreshes releases the waiters of every round whose results have
// all been published. The aggregator calls it after each publish.
func (p *Prober) finishRefreshes() {
	p.refreshMu.Lock()
	defer p.refreshMu.Unlock()
	for name, r := range p.refreshing {
		if len(r.waiting) == 0 {
			close(r.done)
			delete(p.refreshing, name)
		}
	}
}
