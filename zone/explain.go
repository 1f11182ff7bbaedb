package zone

import (
	"slices"
	"strconv"
	"time"
)

// Verdict is what selection made of one host for one query.
type Verdict struct {
	Host     *Host
	Selected bool
	Rank     int    // a selected host's place in the answer, from 1; 0 when left out
	Why      string // for a host left out: the reason, e.g. "lag 1200ms > 50ms"
	// SRVOnly: left out of an address answer for its port (or its
	// address, already in it), but in the name's SRV answer.
	SRVOnly bool
}

// Explain returns a verdict for every host of the query's cluster, in
// configured order: the same rules as Select, with the reasons spelled out
// for people (the HTTP API's /v1/resolve). Selected follows Select exactly,
// and Rank gives the answer's order at turn 0 (the client's location first).
func (v View) Explain(q *Query) ([]Verdict, error) {
	s, now := v.Snap, v.Now
	v.Turn = 0
	chosen, err := v.Select(q, nil)
	if err != nil {
		return nil, err
	}
	var service []*Host // what SRV answers: the hosts an address answer leaves out for their port
	if !q.SRV {
		withSRV := *q
		withSRV.SRV = true
		service, _ = v.Select(&withSRV, nil)
	}
	c := s.Cluster(q.Cluster)
	primary := c.livePrimary(now, s.StaleAfter)
	out := make([]Verdict, len(c.Hosts))
	for i := range c.Hosts {
		h := &c.Hosts[i]
		view := v
		v := Verdict{Host: h, Rank: slices.Index(chosen, h) + 1}
		v.Selected = v.Rank > 0
		switch {
		case v.Selected:
		case slices.Contains(service, h) && h.SharesIP:
			v.SRVOnly = true
			v.Why = "address " + h.Address().String() + " is also another configured host's on another port: answered by SRV only (_postgresql._tcp.), " +
				"never by A or AAAA (a client on either port could reach the wrong server)"
		case slices.Contains(service, h) && !c.Addressable(h):
			v.SRVOnly = true
			v.Why = "port " + strconv.Itoa(int(h.Port)) + ": answered by SRV only (_postgresql._tcp.), A and AAAA answer port " +
				strconv.Itoa(int(c.Port))
		case slices.Contains(service, h):
			v.SRVOnly = true
			v.Why = "address " + h.IP.String() + " is already in the answer: answered by SRV only (_postgresql._tcp.)"
		default:
			v.Why = c.why(h, q, primary, now, s.StaleAfter, s.Interval, view.reachWhy(primary, q))
		}
		out[i] = v
	}
	return out, nil
}

// why says why h is not in the answer to q; unreached is why the primary
// provably lacks q's LSN by its reach ("" when it may have it).
func (c *Cluster) why(h *Host, q *Query, primary *Host, now time.Time, staleAfter, interval time.Duration, unreached string) string {
	if !live(h, now, staleAfter) {
		switch {
		case h.Note != "":
			return h.Role.String() + ": " + h.Note
		case h.Role == RoleDown && h.LastError != "":
			return "down: " + h.LastError
		case h.Role == RolePrimary || h.Role == RoleReplica:
			return "no successful probe for " + now.Sub(h.ProbedAt).Round(time.Millisecond).String()
		}
		return h.Role.String()
	}
	if h == primary && c.aboveTimelines(q) {
		return "primary: timeline " + strconv.FormatUint(uint64(h.Timeline), 10) + ": " + q.MinLSN.String() +
			" on timeline " + strconv.FormatUint(uint64(q.Timeline), 10) + " is above every timeline of the cluster"
	}
	if f := c.hostFork(h, q); f != nil && h == primary {
		return "primary: " + f.why()
	}
	if lost := c.tokenWithdrawn(q); lost != "" && h == primary {
		return "primary: " + lost
	}
	if h == primary && !historyHolds(h, q) {
		return "primary: " + unprovenWhy(h, q)
	}
	if unreached != "" && h == primary {
		return "primary: " + unreached
	}
	if h == primary {
		switch q.Target {
		case TargetPrimary, TargetAny:
			if q.Target == TargetPrimary && h.ReadOnly && (q.DC == "" || h.Location == q.DC) {
				return readOnlyWhy(h)
			}
			if q.DC != "" && h.Location != q.DC {
				return "primary: " + locationWhy(h, q.DC)
			}
		case TargetReplica, TargetOffline:
			return "primary: not a replica"
		case TargetPreferReplica:
			return "primary: answered only when no replica fits"
		}
		return "not selected"
	}
	if q.Target == TargetPrimary {
		return "replica: not the primary"
	}
	switch c.Check(h, q, primary, now, staleAfter, interval) {
	case Fits:
		if q.Target == TargetOffline && !h.Offline {
			return "not offline: offline replicas fit"
		}
	case Drained:
		if h.DrainedBy&DrainBySerializable != 0 {
			return "drained (" + h.DrainedBy.String() + "): " + serializableNote
		}
		return "drained (" + h.DrainedBy.String() + ")"
	case OfflineClass:
		return "offline (" + OfflineSettingName + "): answered only by offline names"
	case NotSync:
		if primary == nil {
			return "sync unknown: no live primary"
		}
		return h.SyncWhy
	case SyncStandby:
		if h.SyncUnsure {
			return h.SyncWhy + "; counted as synchronous (replicas: async)"
		}
		return "synchronous standby (replicas: async)"
	case OtherLocation:
		return locationWhy(h, q.DC)
	case LagUnknown:
		if primary == nil {
			return "lag unknown: no live primary"
		}
		return lagUnknownWhy(h, q, primary)
	case LagTooHigh:
		if old := now.Sub(h.ProbedAt) - interval; old > 0 {
			return "lag " + ms(h.lagAt(now, interval)) + " > " + ms(q.MaxLag) + " (" + ms(h.Lag) + " as of its last probe, " +
				ms(now.Sub(h.ProbedAt)) + " ago: " + ms(old) + " more than probe.interval, added)"
		}
		return "lag " + ms(h.Lag) + " > " + ms(q.MaxLag)
	case BytesStale:
		return "byte lag unknown: its last probe ended " + ms(now.Sub(h.ProbedAt)) + " ago, more than 1.5 × probe.interval (" +
			ms(interval) + "), and a byte bound holds only as of its sample"
	case BytesTooHigh:
		return "lag " + strconv.FormatUint(h.LagBytes, 10) + " bytes > " + strconv.FormatUint(q.MaxBytes, 10) + " bytes"
	case OtherTimeline:
		return otherTimelineWhy(h, q)
	case ForkedTimeline:
		return c.hostFork(h, q).why()
	case RestartedTimeline:
		return c.tokenRestarted(q).why(q)
	case FailoverWindow:
		return c.tokenFailedOver(q)
	case NotReplayed:
		return "replay " + h.ReplayLSN.String() + " < " + q.MinLSN.String()
	}
	return "not selected"
}

// otherTimelineWhy says why replica h's history does not hold q's LSN:
// proven (its timeline's history file, or a token from a later timeline
// than h's), or only not known (a lower bound of where the token's
// timeline ended, watched, or no end known at all; its timeline itself
// only a lower bound), so that a reader tells a lost write from a missing
// proof.
func otherTimelineWhy(h *Host, q *Query) string {
	own := "timeline " + strconv.FormatUint(uint64(h.Timeline), 10)
	tl := "timeline " + strconv.FormatUint(uint64(q.Timeline), 10)
	token := q.MinLSN.String() + " on " + tl
	if !h.TimelineExact {
		return own + " is only a lower bound (no timeline of its WAL receiver read): " + token + " is not proven in its history"
	}
	if h.HistoryFromFile || h.Timeline < q.Timeline {
		return own + ": " + token + " is not in its history"
	}
	for _, e := range h.History {
		if e.Timeline == q.Timeline {
			return own + ": " + token + " is not proven in its history: " + tl + " ended at or after " + e.End.String() +
				" (a switch pgdns watched; no history file read)"
		}
	}
	return own + ": " + token + " is not proven in its history: where " + tl + " ended is not known (no history file read)"
}

// locationWhy says why h is not in location dc.
func locationWhy(h *Host, dc string) string {
	if h.Location == "" {
		return "no location, not " + dc
	}
	return "location " + h.Location + ", not " + dc
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) + "ms" }

// lagUnknownWhy says why replica h, live with a live primary, has no lag
// bound for q's lag or byte filter: its timeline is not (provably) the
// primary's, whose WAL positions it cannot be compared with (a lower
// bound, say, when the probe role may not read its WAL receiver's
// timeline: until its next restartpoint after a failover), or no sample
// of the primary's WAL clock bounds it yet.
func lagUnknownWhy(h *Host, q *Query, primary *Host) string {
	tl, ptl := strconv.FormatUint(uint64(h.Timeline), 10), strconv.FormatUint(uint64(primary.Timeline), 10)
	switch {
	case h.Timeline != primary.Timeline && h.TimelineHidden:
		return "lag unknown: its timeline is hidden from the probe role (grant pg_monitor), at least " + tl +
			" by its control file, and the primary is on timeline " + ptl + ": WAL positions of two timelines do not compare"
	case h.Timeline != primary.Timeline && !h.TimelineExact:
		return "lag unknown: it has no WAL receiver, its timeline at least " + tl + " by its control file, and the primary is on timeline " +
			ptl + ": WAL positions of two timelines do not compare"
	case h.Timeline != primary.Timeline:
		return "lag unknown: it is on timeline " + tl + ", the primary on " + ptl + ": WAL positions of two timelines do not compare"
	case q.HasLag && !h.LagKnown:
		return "lag unknown: no sample of the primary's WAL clock bounds its replay position yet"
	}
	return "byte lag unknown: no probe of the primary has started since its last probe ended, and a byte bound holds only from one"
}
