package probe

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pgdns/pgdns/zone"
)

// What an authority outside the probe tells a prober: which member holds
// Patroni's leader key (SetLeader), how Patroni tags its members
// (SetTags), and that a timeline is to be forgotten
// (ForgetTimeline, an operator's deliberate act).

// leaderUpdate is a SetLeader call for the aggregator.
type leaderUpdate struct {
	cluster, addr string
}

// MemberTags is what Patroni's tags say about one member for the answers.
type MemberTags struct {
	NoLoadBalance bool   // tagged noloadbalance: drained (zone.DrainByTag)
	Note          string // what was odd about the tag, for the host's note; "" when nothing
}

// tagsUpdate is a SetTags call for the aggregator.
type tagsUpdate struct {
	cluster string
	tags    map[string]MemberTags
}

// forgetRequest is a ForgetTimeline call for the aggregator.
type forgetRequest struct {
	cluster  string
	timeline uint32
	reply    chan forgetReply
}

type forgetReply struct {
	before, after uint32
	err           error
}

// ErrUnknownCluster is returned for a cluster the prober does not probe.
var ErrUnknownCluster = errors.New("no such cluster")

// ErrTimelineNotKnown is returned when asked to forget a timeline above the
// cluster's newest proven one, or timeline 0.
var ErrTimelineNotKnown = errors.New("timeline is not among the cluster's proven timelines")

// SetLeader tells the prober which member holds the Patroni leader key of
// cluster: addr as Patroni reports it, "" when none does. It applies at
// the next publish, which it causes; it does not block on a stopped prober.
func (p *Prober) SetLeader(cluster, addr string) {
	select {
	case p.updates <- leaderUpdate{cluster, addr}:
	case <-p.stopped:
	}
}

// SetTags tells the prober the Patroni tags of cluster's members, by
// "host:port" as Patroni reports it; a host not in tags has none. It
// applies at the next publish, which it causes; it does not block on a
// stopped prober. The caller must not modify tags afterwards.
func (p *Prober) SetTags(cluster string, tags map[string]MemberTags) {
	select {
	case p.updates <- tagsUpdate{cluster, tags}:
	case <-p.stopped:
	}
}

// ForgetTimeline makes the prober forget that timeline tl and every later
// one of cluster were proven: its newest timeline becomes tl-1, or what a
// live host proves now if that is more, and the histories of the
// forgotten timelines are dropped (so is what Hooks.Learned reports, and
// with it the state file). It returns the newest timeline before and
// after, as the next snapshot decides it.
func (p *Prober) ForgetTimeline(ctx context.Context, cluster string, tl uint32) (before, after uint32, err error) {
	req := forgetRequest{cluster: cluster, timeline: tl, reply: make(chan forgetReply, 1)}
	select {
	case p.requests <- req:
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	case <-p.stopped:
		return 0, 0, errors.New("the prober has stopped")
	}
	select {
	case r := <-req.reply:
		return r.before, r.after, r.err
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
}

// setLeader applies u. Only the aggregator calls it.
func (p *Prober) setLeader(u leaderUpdate) {
	for ci, c := range p.state {
		if c.Name == u.cluster {
			c.Leader = u.addr
			p.markRebuild(ci)
		}
	}
}

// setTags applies u. Only the aggregator calls it.
func (p *Prober) setTags(u tagsUpdate) {
	for ci, c := range p.state {
		if c.Name == u.cluster {
			p.markRebuild(ci)
			for i := range c.Hosts {
				h := &c.Hosts[i]
				t := u.tags[h.Addr]
				h.TagNoLoadBalance, h.TagNote = t.NoLoadBalance, t.Note
			}
		}
	}
}

// forget applies r before the publish that follows; the aggregator
// replies with the newest timeline that publish decided (forgotten).
func (p *Prober) forget(r forgetRequest) (ci int, before uint32, err error) {
	for ci, c := range p.state {
		if c.Name != r.cluster {
			continue
		}
		if r.timeline == 0 || r.timeline > max(c.NewestTimeline, c.Witnessed) {
			return -1, 0, fmt.Errorf("%w: timeline %d, newest %d", ErrTimelineNotKnown, r.timeline, c.NewestTimeline)
		}
		before = c.NewestTimeline
		c.NewestTimeline = min(c.NewestTimeline, r.timeline-1)
		if c.Witnessed >= r.timeline {
			// A replica's lower bound showed it (zone.Cluster.Witnessed):
			// forgotten too, unless a live replica shows it again.
			c.Witnessed, c.WitnessedBy, c.WitnessedRun = 0, "", time.Time{}
		}
		p.markRebuild(ci)
		for tl := range p.timelines[ci] {
			if tl >= r.timeline {
				delete(p.timelines[ci], tl)
			}
		}
		for h, last := range p.lastExact {
			if last.Timeline >= r.timeline && p.inCluster(ci, h) {
				delete(p.lastExact, h)
			}
		}
		return ci, before, nil
	}
	return -1, 0, ErrUnknownCluster
}

// inCluster reports whether h is one of cluster ci's hosts.
func (p *Prober) inCluster(ci int, h *zone.Host) bool {
	hosts := p.state[ci].Hosts
	for i := range hosts {
		if &hosts[i] == h {
			return true
		}
	}
	return false
}

// leaderUnsure calls Hooks.LeaderUnsure for each cluster of snap whose
// leader key does not settle what the probe sees: a writable host that is
// not the member Patroni last named. Patroni takes the key before it
// promotes, so reading it again at once usually settles it.
func (p *Prober) leaderUnsure(snap *zone.Snapshot) {
	hook := p.cfg.Hooks.LeaderUnsure
	if hook == nil {
		return
	}
	for ci, c := range snap.Clusters {
		if ci < len(p.notLeader) && p.notLeader[ci] { // set when c was built (build.go)
			hook(c.Name)
		}
	}
}
