package probe

import (
	"slices"
	"time"

	"github.com/pgdns/pgdns/zone"
)

// Publishing a snapshot builds anew every cluster with a new result
// (zone.Decide, lags, histories: build.go). With a thousand hosts whose
// results arrive in bursts through a probe round, publishing after each
// burst, when a publish rebuilt every host, was a large share of pgdns's
// CPU and most of its garbage (issue 17); a publish now costs the
// clusters that changed, and holding saves a build per result. So while
// a round is under way, results that change no host's standing are held
// and published together when the round closes (the primary's closing
// probe), and meanwhile at most once every holdMax (a round waiting only
// for its closing probe is waited for, up to holdMax after it was asked
// for: its replicas' byte bounds come with it). Anything that may change an answer's
// membership — a failure, a host coming back (from failures, or from
// down by age), a role, timeline, server run, standby, drain or offline
// setting change — is published at once, as are all results while
// a cluster is in flux or a Refresh (lsn_wait) is waiting for them; and
// the Interval tick still publishes at least once an interval. What is
// held is only a host's newer position: its answers are as of its
// previous sample for up to holdMax longer, with the lag it had then.

// holdMax is how long results may be held for the round under way.
func (p *Prober) holdMax() time.Duration { return p.cfg.Interval / 4 }

// steady reports whether result r, not yet recorded, only moves a host
// along: a good probe of a host that was good and not down (by the age of
// its last good probe) before, in the same role, timeline, server run,
// (for a primary) standbys and pgdns.drain, pgdns.offline settings.
func (p *Prober) steady(r result) bool {
	if r.err != nil || p.last == nil || !p.last.Ready || p.last.Clusters[r.cluster].Hosts[r.host].Role == zone.RoleDown {
		return false
	}
	h := &p.state[r.cluster].Hosts[r.host]
	s := &r.sample
	if !h.Seen || h.Fails != 0 || h.InRecovery != s.InRecovery || h.SystemID != s.SystemID ||
		h.DrainSetting != s.DrainSetting || h.OfflineSetting != s.OfflineSetting || h.SettingShadowed != s.SettingShadowed ||
		!h.StartedAt.Equal(s.StartedAt) || h.IP != s.IP || !slices.Equal(h.Standbys, s.Standbys) ||
		h.StatsHidden != s.StatsHidden || h.TimelineHidden != s.TimelineHidden || h.SyncNamesSet != s.SyncNamesSet ||
		h.AppName != s.AppName || h.AppNameWhy != s.AppNameWhy || h.SlotName != s.SlotName ||
		h.Receiver != s.Receiver || s.Receiver != "" && (h.SenderHost != s.SenderHost || h.SenderPort != s.SenderPort) { // no receiver: a watched sender is kept (record)
		return false
	}
	if s.Timeline != 0 {
		return h.TimelineExact && h.Timeline == s.Timeline
	}
	return !h.TimelineExact && s.CheckpointTimeline <= h.Timeline // no WAL receiver, as before
}

// holdUntil reports whether steady results may be held, and until when:
// while a probe round is under way (for an interval at most: a round a
// hung replica never closes stops holding), no cluster is in flux and no
// Refresh is waiting, at most holdMax after the last publish.
//
// The aggregator asks after every batch of results, which at ten thousand
// hosts is thousands of times a second: it costs what changed since it
// last asked, never a look at every cluster (p.opened, p.fluxActive).
func (p *Prober) holdUntil(lastPublish time.Time) (time.Time, bool) {
	now := time.Now()
	if p.fluxActive > 0 || !p.roundUnderWay(now) || p.refreshWaiting() {
		return time.Time{}, false
	}
	until := lastPublish.Add(p.holdMax())
	return until, now.Before(until)
}

// roundUnderWay reports whether some cluster's round, opened less than an
// interval before now, is still open. p.opened lists the rounds in the
// order they opened (so oldest first): a round that closed, or opened an
// interval ago, is done with for good and leaves the front.
func (p *Prober) roundUnderWay(now time.Time) bool {
	for len(p.opened) > 0 {
		rd := p.opened[0]
		if p.rounds[rd.cluster] == rd && now.Sub(rd.started) < p.cfg.Interval {
			return true
		}
		p.opened[0] = nil
		p.opened = p.opened[1:]
	}
	return false
}

// closingUntil reports whether held results may be held on past holdMax,
// and until when: a round has all its replicas' results and waits only for
// the closing probe of its primary, kicked less than holdMax ago. Its
// replicas' samples are then published together with the primary probe
// that gives them their byte bounds (lag.go), instead of a moment before
// it without one.
//
// p.closing lists the rounds in the order their last replica answered: the
// last one still waiting for its closing probe says until when; those
// done with (closed, or kicked holdMax ago) leave either end.
func (p *Prober) closingUntil() (time.Time, bool) {
	if p.fluxActive > 0 {
		return time.Time{}, false
	}
	now := time.Now()
	waits := func(rd *round) bool { return p.rounds[rd.cluster] == rd && now.Before(rd.closed.Add(p.holdMax())) }
	for len(p.closing) > 0 && !waits(p.closing[0]) {
		p.closing[0] = nil
		p.closing = p.closing[1:]
	}
	for n := len(p.closing); n > 0 && !waits(p.closing[n-1]); n = len(p.closing) {
		p.closing[n-1] = nil
		p.closing = p.closing[:n-1]
	}
	if len(p.closing) == 0 || p.refreshWaiting() {
		return time.Time{}, false
	}
	return p.closing[len(p.closing)-1].closed.Add(p.holdMax()), true
}

// refreshWaiting reports whether a Refresh round is waiting for results.
func (p *Prober) refreshWaiting() bool {
	p.refreshMu.Lock()
	defer p.refreshMu.Unlock()
	for _, rs := range p.refreshing {
		if rs.running != nil {
			return true
		}
	}
	return false
}

// A publish held for no round builds every cluster marked since the last
// one, and at ten thousand hosts every 1s some publish falls inside most
// clusters' rounds: one build with the primary's opening sample, another
// with the replicas' and the closing probe's, 1.8 builds a round, each a
// copy of the cluster's hosts (2,304 bytes for a cluster of 3), three
// quarters of all the bytes pgdns allocated and so most of the
// collector's work (issue 28). So a publish leaves a cluster marked by
// steady results alone as the last snapshot has it while its round is
// under way (deferBuild): its results are built with the rest of the
// round, at the first publish after the round's closing probe, or at the
// first one holdMax after the first of them was taken or, while its
// replicas' results keep moving the round along, holdMax after the last
// of those and deferCap after the first at most (the aggregator
// publishes by then, or holdMax/4 after its last publish, whichever is
// later: deferredUntil; a publish for each build that came due was 60
// publishes a second at ten thousand hosts). That is the hold above,
// cluster by cluster: what waits is a newer position of hosts whose
// standing it does not change, for deferCap + holdMax/4 at most; anything else
// (markRebuild: a failure, a role, a leader, a cluster's build aging out)
// is built at the next publish, and nothing is deferred while a cluster
// is in flux or a Refresh waits.

// deferBuilds returns list, the clusters a publish is to build, without
// those whose build it defers (deferBuild), which stay marked for a later
// publish; deferredUntil is when the first of those is due. Rounds are
// on the wall clock (openRound), and so is this.
func (p *Prober) deferBuilds(list []int) []int {
	if len(list) == 0 || p.fluxActive > 0 || p.refreshWaiting() {
		return list
	}
	now := time.Now()
	kept := list[:0]
	for _, ci := range list {
		until, ok := p.deferBuild(ci, now)
		if !ok {
			kept = append(kept, ci)
			continue
		}
		p.dirty.marked = append(p.dirty.marked, ci) // p.rebuild[ci] stays set
		if p.deferredUntil.IsZero() || until.Before(p.deferredUntil) {
			p.deferredUntil = until
		}
	}
	return kept
}

// deferBuild reports whether cluster ci's build may wait for a later
// publish, and until when: nothing but steady results marked it, its
// round is under way (no result of its primary came since the one that
// opened it: the closing probe, or any other, a kicked probe's whatever
// its start), and it is moving: less than holdMax has passed since the
// first of those results was taken or, later, since a replica's result
// last moved the round along (round.moved), and less than 2 holdMax
// since the first of them (deferCap).
//
// A round is a chain of hops through the aggregator's queue (the
// primary's result, the replicas' kicked probes, the closing probe), and
// at ten thousand hosts every 1s on two cores each hop waits tens to
// hundreds of milliseconds there: a round took 250-500 ms, longer than
// holdMax, and so a deferral that counted from the first result alone
// built most clusters twice a round, 1.8 builds (issue 28). Counting
// from the round's last step waits for a round as long as each of its
// hops takes under holdMax, and no longer than deferCap in all: what
// waits is a newer position of hosts whose standing it does not change,
// answered meanwhile on their previous sample, whose lag zone ages by
// its age beyond an interval and whose byte bound it drops past 1.5
// intervals (zone.Host.lagAt, bytesHeldAt), so an older sample published
// is never a bound it does not prove.
func (p *Prober) deferBuild(ci int, now time.Time) (time.Time, bool) {
	if p.isUrgent(ci) || ci >= len(p.rounds) || p.rounds[ci] == nil || p.rounds[ci].primaryAgain || ci >= len(p.markedAt) {
		return time.Time{}, false
	}
	from := p.markedAt[ci]
	until := from.Add(p.holdMax())
	if moved := p.rounds[ci].moved; moved.After(from) {
		until = moved.Add(p.holdMax())
		if limit := from.Add(p.deferCap()); limit.Before(until) {
			until = limit
		}
	}
	return until, now.Before(until)
}

// deferCap is how long after the first steady result that marked a
// cluster its build may be deferred at the most, while its round moves
// (deferBuild): half an interval, so that a replica's sample published
// is at most 1.5 intervals old when the round's build replaces it, the
// age up to which zone uses its byte bound (zone.Host.bytesHeldAt).
func (p *Prober) deferCap() time.Duration { return 2 * p.holdMax() }
