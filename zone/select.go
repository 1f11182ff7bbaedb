package zone

import (
	"net/netip"
	"time"
)

// Errors returned by Select and LookupCluster, each with its Outcome.
var (
	ErrNotReady        error = &Error{NotReady, "the first probe round has not finished"}
	ErrUnknownCluster  error = &Error{NoSuchName, "no such cluster"}
	ErrUnknownLocation error = &Error{NoSuchName, "no such location"} // a dc- filter that no host or network names
	ErrUnknownHost     error = &Error{NoSuchName, "no such host"}     // a host name whose label no host of the cluster has
)

// Reason says why a replica is or is not fit for a query.
type Reason uint8

// Reasons returned by Cluster.Check.
const (
	Fits              Reason = iota
	NotLive                  // down, unknown, set aside, or its last good probe is too old
	NotReplica               // a live host that is not a replica
	SyncStandby              // a synchronous standby in a cluster that answers async ones only
	LagUnknown               // a lag filter was asked and the lag cannot be vouched for
	LagTooHigh               // time lag above the filter's bound
	BytesTooHigh             // byte lag above the filter's bound
	NotReplayed              // has not replayed the LSN yet
	OtherTimeline            // the LSN is not part of this host's timeline history
	OtherLocation            // a dc- filter was asked and the host is not in that location
	Drained                  // drained (pgdns.drain, or Patroni's noloadbalance): no replica name answers it
	OfflineClass             // an offline replica (pgdns.offline), asked by a name other than offline
	NotSync                  // the sync filter was asked and the host is not provably a synchronous standby
	ForkedTimeline           // the LSN's timeline, or the host's, is forked: which branch the token's write is on is unknown
	BytesStale               // a byte filter was asked and the replica's sample is too old to bound its byte lag (Host.bytesHeldAt)
	RestartedTimeline        // the LSN is in a window a restart of its timeline's writer may have written anew (restarted.go)
	FailoverWindow           // the LSN, without a timeline, may be a write of an older timeline lost in a failover (lost.go)
)

// live reports whether h may be answered at all: a primary or replica whose
// last good probe is recent enough to vouch for it. Decide already drops
// hosts that failed; this also catches a snapshot that was not rebuilt
// because every probe hangs.
func live(h *Host, now time.Time, staleAfter time.Duration) bool {
	return (h.Role == RolePrimary || h.Role == RoleReplica) && h.Fresh(now, staleAfter)
}

// lagVouched reports whether the lags of h (Lag when LagKnown, LagBytes
// when BytesKnown) may be shown or used at time now: h may be answered, and
// so may primary, whose WAL they were measured against. The one rule of
// lag visibility: selection applies it, and View.Lag and View.LagBytes
// show lags through it, so that no reader shows a lag that selection
// would not vouch for.
func lagVouched(h, primary *Host, now time.Time, staleAfter time.Duration) bool {
	return primary != nil && live(h, now, staleAfter)
}

// livePrimary returns the primary if it may be answered now, else nil.
func (c *Cluster) livePrimary(now time.Time, staleAfter time.Duration) *Host {
	p := c.PrimaryHost()
	if p == nil || !live(p, now, staleAfter) {
		return nil
	}
	return p
}

// Check decides whether replica h fits q. primary is the live primary or
// nil; without one no lag can be vouched for, so lag and byte filters fail
// closed. The LSN filter needs no primary: replay position is the
// replica's own. staleAfter and interval are the snapshot's (StaleAfter,
// Interval).
func (c *Cluster) Check(h *Host, q *Query, primary *Host, now time.Time, staleAfter, interval time.Duration) Reason {
	if !live(h, now, staleAfter) {
		return NotLive
	}
	if h.Role != RoleReplica {
		return NotReplica
	}
	if h.Drained {
		return Drained
	}
	if h.Offline && q.Target != TargetOffline {
		return OfflineClass
	}
	if c.AsyncOnly && h.Sync {
		return SyncStandby
	}
	if q.DC != "" && h.Location != q.DC {
		return OtherLocation
	}
	if q.Sync && !(h.SyncProven && primary != nil) {
		return NotSync
	}
	return c.passes(h, q, primary, now, staleAfter, interval)
}

// passes decides whether h's data passes the lag, byte and LSN filters of
// q, whatever h's role. The time lag is h's bound at now (Host.lagAt).
func (c *Cluster) passes(h *Host, q *Query, primary *Host, now time.Time, staleAfter, interval time.Duration) Reason {
	vouched := lagVouched(h, primary, now, staleAfter)
	if (q.HasLag && !(vouched && h.LagKnown)) || (q.HasBytes && !(vouched && h.BytesKnown)) {
		return LagUnknown
	}
	if q.HasLag && h.lagAt(now, interval) > q.MaxLag {
		return LagTooHigh
	}
	if q.HasBytes && !h.bytesHeldAt(now, interval) {
		return BytesStale
	}
	if q.HasBytes && h.LagBytes > q.MaxBytes {
		return BytesTooHigh
	}
	if q.HasLSN {
		if c.hostFork(h, q) != nil {
			return ForkedTimeline
		}
		if c.tokenRestarted(q) != nil {
			return RestartedTimeline
		}
		if h, _, _ := c.failedOver(q); h != nil {
			return FailoverWindow
		}
		want := h.token(q.MinLSN)
		if q.Timeline != 0 && !h.hasHistory(q.Timeline, want) {
			return OtherTimeline
		}
		if h.ReplayLSN < want {
			return NotReplayed
		}
	}
	return Fits
}

// aboveTimelines reports whether q's LSN was taken on a timeline above
// every one the cluster has proven (NewestTimeline): that position is in
// no host's WAL, the primary's included, so every host would provably lack
// the write. The token is forged, or from another cluster, or pgdns is
// behind a failover and the primary it knows is superseded: either way no
// address is the true answer, and the primary does not pass this filter.
func (c *Cluster) aboveTimelines(q *Query) bool {
	return q.HasLSN && q.Timeline > c.NewestTimeline
}

// Select appends to dst the hosts that answer q at the view's moment and
// returns the extended slice. The primary fits every filter but dc- (it
// has all the data there is, but it is where it is), except an lsn- filter
// whose timeline no host has (aboveTimelines), that is on a forked
// timeline (forked.go: no host proves it), whose write a failover
// provably lost (lost.go: no host has it) or of an older timeline that
// the primary's history does not prove ended at or after it (lost.go:
// historyHolds, tokenUnproven); a primary that refuses
// writes (ReadOnly) is answered by any and prefer-replica's fallback, never
// by primary. Replicas come in an
// order rotated by the view's turn, so that successive answers spread
// clients across them; when the client's location is known (q.From),
// the hosts in it come first, rotated among themselves, then the others,
// rotated: libpq tries addresses in order, so it lands in its own location
// when it can and falls over to another when it must. In an any answer the primary stays
// first of its group.
//
// A dc- filter answers only hosts in that location, the primary included;
// prefer-replica still falls back to the primary wherever it is when no
// replica of the location fits. A dc- filter naming a location pgdns does
// not know is ErrUnknownLocation.
//
// A drained host is answered by no replica name (Check); a drained
// primary is still the primary, answered by primary, any and
// prefer-replica's fallback: a drain is about reads and never takes writes
// away. An offline replica is answered only by the offline role, which
// answers the offline replicas that fit and, when none does, the other
// replicas that fit (never the primary). The sync filter passes only
// replicas the primary provably reports as synchronous standbys
// (Host.SyncProven), and the primary.
//
// An empty result with a nil error is a valid name with no fitting host.
func (v View) Select(q *Query, dst []*Host) ([]*Host, error) {
	s, now, turn := v.Snap, v.Now, v.Turn
	if !s.Ready {
		return dst, ErrNotReady
	}
	c := s.Cluster(q.Cluster)
	if c == nil {
		return dst, ErrUnknownCluster
	}
	if q.DC != "" && !s.KnownLocation(q.DC) {
		return dst, ErrUnknownLocation
	}
	if c.aboveTimelines(q) || c.tokenFork(q) != nil || c.tokenWithdrawn(q) != "" {
		return dst, nil // no host has (or proves) the position: not even the primary
	}
	primary := c.livePrimary(now, s.StaleAfter)
	// A primary on a forked timeline may be on the other branch of the
	// token's history (forked.go): it passes no such lsn- filter.
	// Nor does one whose reach is below the token: it has not written
	// that position (beyondReach). Nor one on a later timeline than the
	// token's whose history does not prove the token's timeline ended at
	// or after it (historyHolds, as for a replica): the write may have
	// been lost in the failover to it.
	primaryProves := primary != nil && (!q.HasLSN || c.hostFork(primary, q) == nil && historyHolds(primary, q) && !v.primaryBeyondReach(primary, q))
	primaryFits := primaryProves && (q.DC == "" || primary.Location == q.DC)
	start := len(dst)
	if q.Target == TargetPrimary {
		if primaryFits && !primary.ReadOnly { // a client would be refused its writes (readonly.go)
			dst = append(dst, primary)
		}
		return c.forAddresses(q, dst, start), nil
	}

	if q.Target == TargetAny && primaryFits {
		dst = append(dst, primary)
	}
	for i := range c.Hosts {
		h := &c.Hosts[i]
		if h.Role == RoleReplica && c.Check(h, q, primary, now, s.StaleAfter, s.Interval) == Fits {
			dst = append(dst, h)
		}
	}
	if q.Target == TargetOffline {
		dst = offlineFirst(dst, start)
	}
	arrange(dst[start:], q.From, turn)
	dst = c.forAddresses(q, dst, start)
	if q.Target == TargetPreferReplica && len(dst) == start && primaryProves {
		dst = c.forAddresses(q, append(dst, primary), start)
	}
	return dst, nil
}

// primaryBeyondReach reports whether q's LSN is beyond every position
// primary can have reached when the lookup arrived.
func (v View) primaryBeyondReach(primary *Host, q *Query) bool {
	_, beyond := beyondReach(primary, q, v.asked(q))
	return beyond
}

// offlineFirst keeps, of the replicas selected from dst[start:], the
// offline ones when there are any, in place, and returns the shortened
// slice: the offline role answers the other replicas only when no offline
// one fits.
func offlineFirst(dst []*Host, start int) []*Host {
	n := start
	for _, h := range dst[start:] {
		if h.Offline {
			dst[n] = h
			n++
		}
	}
	if n == start {
		return dst // none offline: every replica that fits
	}
	clear(dst[n:])
	return dst[:n]
}

// forAddresses keeps, in place and in order, the hosts of dst[start:] an
// address answer to q may hold, and returns dst so cut; an SRV query
// (q.SRV) keeps them all, since each SRV record carries its host's port.
// An A or AAAA record carries none: a host whose address another
// configured host has on another port is left out whatever the client
// port (Host.SharesIP), a host on another port than the cluster's client
// port (Cluster.Port) too (a client would reach another server at that
// address, or none), and an address already in the answer is not
// repeated. The same cut serves the
// replica names and prefer-replica's fallback: a replica only SRV can
// reach does not keep an address client from the primary.
func (c *Cluster) forAddresses(q *Query, dst []*Host, start int) []*Host {
	if q.SRV || (c.Port == 0 && c.ipsDistinct) {
		return dst
	}
	n := start
	for _, h := range dst[start:] {
		if !c.Addressable(h) || (!c.ipsDistinct && repeats(dst[start:n], h.IP)) {
			continue
		}
		dst[n] = h
		n++
	}
	return dst[:n]
}

// Addressable reports whether a client of c's address names reaches h on
// its address: no other configured host has that address on another
// port, and h listens on the cluster's client port.
func (c *Cluster) Addressable(h *Host) bool {
	return !h.SharesIP && (c.Port == 0 || h.Port == c.Port)
}

// SRVOnlyWhy says why h, answered by SRV, is left out of the address
// answer: "address" when its address is another host's (another
// configured host's on another port, or one already in the answer),
// "port" when it is on another port than the client port.
func (c *Cluster) SRVOnlyWhy(h *Host) string {
	if h.SharesIP || c.Port == 0 || h.Port == c.Port {
		return "address"
	}
	return "port"
}

func repeats(hosts []*Host, ip netip.Addr) bool {
	for _, h := range hosts {
		if h.IP == ip {
			return true
		}
	}
	return false
}

// HostNamed returns the host q (KindHostName) names: the host labelled
// q.Host in cluster q.Cluster, whatever its role. An unknown cluster or
// label is ErrUnknownCluster (NXDOMAIN); before the first snapshot,
// ErrNotReady.
func (s *Snapshot) HostNamed(q *Query) (*Host, error) {
	c, err := s.LookupCluster(q.Cluster)
	if err != nil {
		return nil, err
	}
	for i := range c.Hosts {
		if c.Hosts[i].Name == q.Host {
			return &c.Hosts[i], nil
		}
	}
	return nil, ErrUnknownHost
}

// arrange orders selected hosts in place: those in location from first
// (none when from is ""), then the others; each group rotated by turn,
// except that a primary heading the answer heads its group. It is linear
// and allocates nothing: it runs on every answer, with up to a thousand
// hosts. The partition does not keep the configured order within a group;
// the rotation that follows does not need it.
func arrange(hosts []*Host, from string, turn uint64) {
	local := 0
	if from != "" {
		lead := len(hosts) > 0 && hosts[0].Role == RolePrimary
		rest := hosts
		if lead {
			rest = hosts[1:]
		}
		for i := range rest {
			if rest[i].Location == from {
				rest[local], rest[i] = rest[i], rest[local]
				local++
			}
		}
		switch {
		case lead && hosts[0].Location == from:
			local++ // the primary heads the local group
		case lead:
			rotate(hosts[:local+1], 1) // the primary moves behind the local replicas, to head the others
		}
	}
	spread(hosts[:local], turn)
	spread(hosts[local:], turn)
}

// spread rotates a group of hosts by turn, a primary at its head aside.
func spread(group []*Host, turn uint64) {
	if len(group) > 0 && group[0].Role == RolePrimary {
		group = group[1:]
	}
	if n := len(group); n > 1 {
		rotate(group, int(turn%uint64(n)))
	}
}

// rotate moves the first k elements of s to its end, in place.
func rotate(s []*Host, k int) {
	if k == 0 {
		return
	}
	reverse(s[:k])
	reverse(s[k:])
	reverse(s)
}

func reverse(s []*Host) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}
