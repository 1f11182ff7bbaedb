package probe

import "github.com/pgdns/pgdns/zone"

// What the probe learns of a cluster's timelines: for each timeline, where
// the timelines before it ended. It decides lsn- tokens with a timeline
// (zone.Host.hasHistory).

// timelineHistory is what is known of the history of one timeline: the
// ends of the timelines it descends from. Read from a timeline history
// file it is exact; watched it is a set of lower bounds.
type timelineHistory struct {
	ends     []zone.TimelineEnd
	fromFile bool
}

// learnTimelines folds what sample s of host h tells of the cluster's
// timeline histories into p.timelines. tl and exact are the timeline the
// sample puts h on (see record); continuous says the same run of the
// server answered every probe since the last sample.
//
// A history file is the truth and replaces anything watched (a
// writable host's replaces a replica's, not the other way round). Without one,
// a switch the probe watches happen is evidence only when it is watched
// closely: h was last seen in recovery on an exact timeline a at replay
// position R, the same run of the server has answered every probe since,
// and it is now on a later exact timeline b (following a new primary, or
// promoted itself). PostgreSQL refuses to follow a timeline that forked
// before its own position, and a promotion forks at the end of what was
// replayed, so timeline a ended at or after R in b's history: a lower
// bound. A host seen writable on a, or with a failed probe or a restart in
// between (re-cloned, rewound), proves nothing: its last position on a may
// lie past the fork. Of two lower bounds for one timeline the smaller is
// kept. Only a host of the cluster's identity (ours) teaches anything.
func (p *Prober) learnTimelines(ci int, h *zone.Host, continuous bool, s Sample, tl uint32, exact, ours bool) {
	known := p.timelines[ci]
	// One timeline number may name two branches (forks.go): a writable
	// host's file is the history its replicas' tokens go by; a replica's
	// fills in only until one is read.
	if ours && exact && len(s.History) > 0 && (!s.InRecovery || !known[tl].fromFile) {
		known[tl] = timelineHistory{ends: s.History, fromFile: true}
	}
	if !continuous {
		delete(p.lastExact, h)
	}
	if !exact {
		return
	}
	if last, seen := p.lastExact[h]; ours && seen && tl > last.Timeline && !known[tl].fromFile {
		parent := known[last.Timeline].ends
		watched := append(parent[:len(parent):len(parent)], last)
		known[tl] = timelineHistory{ends: mergeLowerBounds(known[tl].ends, watched)}
	}
	if s.InRecovery {
		p.lastExact[h] = zone.TimelineEnd{Timeline: tl, End: s.ReplayLSN}
	} else {
		delete(p.lastExact, h)
	}
}

// mergeLowerBounds combines two sets of lower bounds of timeline ends into
// a new slice: every timeline of either, the smaller end where both have
// one.
func mergeLowerBounds(a, b []zone.TimelineEnd) []zone.TimelineEnd {
	out := append([]zone.TimelineEnd(nil), a...)
	for _, e := range b {
		found := false
		for i := range out {
			if out[i].Timeline == e.Timeline {
				out[i].End = min(out[i].End, e.End)
				found = true
			}
		}
		if !found {
			out = append(out, e)
		}
	}
	return out
}
