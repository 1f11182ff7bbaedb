package probe

import (
	"slices"

	"github.com/pgdns/pgdns/zone"
)

// What a prober remembers across restarts of pgdns: the part of its
// Knowledge a trust rule needs and that stays true while pgdns is not
// running. The caller keeps it (internal/state writes it to state.path),
// hands it to the next run in Config.Remembered, and hears of every change
// through Hooks.Learned. WAL clocks are left out: they move on every probe
// of a primary and only bound the lag of replicas, which new probes measure
// again within a few intervals.

// Remembered is what pgdns keeps of one cluster across a restart.
type Remembered struct {
	Identity       uint64 // the established system identifier; 0: none yet
	NewestTimeline uint32 // the highest timeline proven on a host of Identity
	// Timelines are what is known of each timeline's history, by timeline.
	Timelines map[uint32]TimelineHistory
}

// TimelineHistory is what is known of one timeline's history: where the
// timelines it descends from ended.
type TimelineHistory struct {
	Ends     []zone.TimelineEnd
	FromFile bool // read from the timeline's history file: exact; else lower bounds the probe watched
}

// seed folds what a previous run of pgdns learned into the state of a
// prober not yet running, by the rules of adopt: an entry whose identity
// differs from a pinned one is not applied.
func (p *Prober) seed(remembered map[string]Remembered) {
	if len(remembered) == 0 {
		return
	}
	k := Knowledge{clusters: map[string]clusterKnowledge{}}
	for name, r := range remembered {
		if r.Identity == 0 {
			continue // nothing learned: timelines belong to an identity
		}
		ck := clusterKnowledge{identity: r.Identity, newest: r.NewestTimeline, timelines: map[uint32]timelineHistory{}}
		for tl, h := range r.Timelines {
			ck.timelines[tl] = timelineHistory{ends: slices.Clone(h.Ends), fromFile: h.FromFile}
		}
		k.clusters[name] = ck
	}
	p.adopt(k)
}

// reportLearned calls Hooks.Learned when what p remembers differs from
// what it last reported. Only the aggregator calls it, after a publish of
// an active prober: an inactive one (a reload warming up) reports once it
// takes over, with what it adopted.
func (p *Prober) reportLearned() {
	hook := p.cfg.Hooks.Learned
	if hook == nil || !p.active.Load() {
		return
	}
	if p.reported != nil && p.remembersAsReported() {
		return
	}
	p.reported = p.remembered()
	hook(p.reported)
}

// remembered copies what p would keep across a restart, by cluster name.
// Clusters without an established identity are left out.
func (p *Prober) remembered() map[string]Remembered {
	out := make(map[string]Remembered, len(p.state))
	for ci, c := range p.state {
		if c.Identity == 0 {
			continue
		}
		r := Remembered{Identity: c.Identity, NewestTimeline: c.NewestTimeline,
			Timelines: make(map[uint32]TimelineHistory, len(p.timelines[ci]))}
		for tl, h := range p.timelines[ci] {
			// Entries are replaced, never modified in place: sharing
			// the slice is safe.
			r.Timelines[tl] = TimelineHistory{Ends: h.ends, FromFile: h.fromFile}
		}
		out[c.Name] = r
	}
	return out
}

// remembersAsReported reports whether p would remember exactly what it
// last reported, without allocating: it runs after every publish.
func (p *Prober) remembersAsReported() bool {
	n := 0
	for ci, c := range p.state {
		if c.Identity == 0 {
			continue
		}
		n++
		r, ok := p.reported[c.Name]
		if !ok || r.Identity != c.Identity || r.NewestTimeline != c.NewestTimeline || len(r.Timelines) != len(p.timelines[ci]) {
			return false
		}
		for tl, h := range p.timelines[ci] {
			was, ok := r.Timelines[tl]
			if !ok || was.FromFile != h.fromFile || !slices.Equal(was.Ends, h.ends) {
				return false
			}
		}
	}
	return n == len(p.reported)
}
