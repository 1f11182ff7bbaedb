package zone

import "time"

// View is one request's read of the zone: one snapshot, one moment and one
// turn of the replica rotation, taken once and handed to every rule the
// request applies. The DNS server, the HTTP API and the metrics all read
// through a View, so that given the same inputs they cannot disagree (on
// whether a host is live, or whether its lag may be shown), whatever the
// age of the snapshot. (Consul loads its dynamic config once per request;
// blocky does one Load per lookup.)
//
// Inputs are explicit fields rather than globals or clocks read deep down,
// so that tests set them, and another input of the whole request is one
// more field. (The client's location is an input of the query instead:
// Query.From, as /v1/resolve may explain a name for another client.)
type View struct {
	Snap *Snapshot // never nil
	Now  time.Time // the moment every age and staleness is measured at
	Turn uint64    // rotates the order of replicas; 0 keeps configured order
}

// View returns a View of the current snapshot at now, with a new turn of
// the rotation.
func (t *Table) View(now time.Time) View {
	return View{Snap: t.Load(), Now: now, Turn: t.Turn()}
}

// Live reports whether h may be answered now: a primary or replica whose
// last good probe is recent enough to vouch for it.
func (v View) Live(h *Host) bool { return live(h, v.Now, v.Snap.StaleAfter) }

// Primary returns c's primary if it may be answered now, else nil.
func (v View) Primary(c *Cluster) *Host { return c.livePrimary(v.Now, v.Snap.StaleAfter) }

// AnsweredPrimary returns the host primary.<cluster>'s A and AAAA answer
// holds now, else nil: c's primary when it may be answered (WritablePrimary)
// and a client of its address names reaches it (Cluster.Addressable). Select answers the
// same host; what reports "primary answered" (metrics, the status page)
// reads this, so that it never says a primary is answered when the address
// answer is empty.
func (v View) AnsweredPrimary(c *Cluster) *Host {
	if !v.Snap.Ready {
		return nil
	}
	p := c.writablePrimary(v.Now, v.Snap.StaleAfter)
	if p == nil || !c.Addressable(p) {
		return nil
	}
	return p
}

// WritablePrimary returns c's primary if primary.<cluster> may answer it
// now (SRV included: whatever its port): live, and not refusing writes
// (Host.ReadOnly); else nil. What hands out the primary for writes (the
// pg-status /master endpoint) reads this.
func (v View) WritablePrimary(c *Cluster) *Host { return c.writablePrimary(v.Now, v.Snap.StaleAfter) }

// Lag returns h's time lag bound at the view's moment (Host.lagAt: what
// selection compares with a lag filter), and whether it may be shown or
// used now (the rule selection applies: see lagVouched). h belongs to c.
func (v View) Lag(c *Cluster, h *Host) (time.Duration, bool) {
	if !h.LagKnown || !lagVouched(h, v.Primary(c), v.Now, v.Snap.StaleAfter) {
		return 0, false
	}
	return h.lagAt(v.Now, v.Snap.Interval), true
}

// LagBytes returns h's WAL byte lag, and whether it may be shown or used
// now, by the same rule as Lag.
func (v View) LagBytes(c *Cluster, h *Host) (uint64, bool) {
	if !h.BytesKnown || !lagVouched(h, v.Primary(c), v.Now, v.Snap.StaleAfter) || !h.bytesHeldAt(v.Now, v.Snap.Interval) {
		return 0, false
	}
	return h.LagBytes, true
}

// Within reports whether h's data passes q's lag, byte and LSN filters
// now, whatever it is otherwise fit for: the primary that may be answered
// passes every filter but an LSN on a timeline no host has, on a forked
// one (forked.go), lost in a failover or not proven in its history
// (lost.go), a replica
// passes as selection decides, any other host none. h belongs to c.
func (v View) Within(c *Cluster, h *Host, q *Query) bool {
	if c.aboveTimelines(q) {
		return false
	}
	p := v.Primary(c)
	if p != nil && h == p {
		return !q.HasLSN || c.hostFork(h, q) == nil && c.tokenWithdrawn(q) == "" && historyHolds(h, q)
	}
	return h.Role == RoleReplica && v.Live(h) && c.passes(h, q, p, v.Now, v.Snap.StaleAfter, v.Snap.Interval) == Fits
}

// maxWALRate bounds how fast one PostgreSQL server can insert WAL, in bytes
// per microsecond (16 GB/s): several times what the largest machines
// write. Were a server ever faster, LSNUnreachable would only answer a
// true token at once, as dns.lsn_wait 0 does: never a host that lacks it.
const maxWALRate = 16_000

// LSNUnreachable reports whether q's LSN is beyond every position the
// cluster's primary can have reached by asked, the moment the lookup
// arrived: then no replica has replayed it, nor will any after a fresh
// probe, and waiting for one (dns.lsn_wait) is futile.
//
// A true token was taken from the primary before the lookup was sent, so
// it is at most the primary's insert position at asked. The primary's
// newest probe read position P at some moment after it started at s, and
// no server inserts faster than maxWALRate, so at asked the position was
// at most P + maxWALRate × (asked − s): exactly P when that probe started
// after the lookup arrived (a refresh round's), and a generous margin
// otherwise, for a client that wrote after the last probe (the refresh
// exists for it). A failover since the probe changes nothing: the new
// primary started at most at the old one's position. Beyond that the token
// is forged, another cluster's, or a write a failover lost.
//
// The token is compared read back across a page header (Host.token), as
// replay is: a token just past a page's header is reached at its boundary.
//
// Without a live primary nothing bounds the position (false); nor is a
// token on a timeline above the primary's judged, since a refresh may be
// what finds the failover it comes from.
func (v View) LSNUnreachable(q *Query, asked time.Time) bool {
	if !q.HasLSN {
		return false
	}
	c := v.Snap.Cluster(q.Cluster)
	if c == nil {
		return false
	}
	_, beyond := beyondReach(v.Primary(c), q, asked)
	return beyond
}

// beyondReach reports whether q's LSN is beyond every position primary p
// can have reached by asked (LSNUnreachable), with that reach. Then p
// provably lacks the write too: Select leaves it out of every lsn- answer,
// as it does a write lost in a failover, instead of sending a client to a
// server that has not written the token's position.
func beyondReach(p *Host, q *Query, asked time.Time) (reach LSN, beyond bool) {
	if !q.HasLSN || p == nil || q.Timeline > p.Timeline || p.ProbeStart.IsZero() {
		return 0, false
	}
	reach = p.InsertLSN
	if since := asked.Sub(p.ProbeStart); since > 0 {
		if since > time.Hour {
			return 0, false
		}
		reach += LSN(uint64(since/time.Microsecond) * maxWALRate)
		if reach < p.InsertLSN {
			return 0, false // past the end of the LSN space: nothing is beyond
		}
	}
	return reach, p.token(q.MinLSN) > reach
}

// asked is when q's lookup arrived: q.Asked, or the view's moment.
func (v View) asked(q *Query) time.Time {
	if q.Asked.IsZero() {
		return v.Now
	}
	return q.Asked
}

// reachWhy is why primary p does not have q's LSN by its reach, or "".
func (v View) reachWhy(p *Host, q *Query) string {
	reach, beyond := beyondReach(p, q, v.asked(q))
	if !beyond {
		return ""
	}
	return q.MinLSN.String() + " is beyond any position the primary " + p.Addr + " can have reached when the lookup arrived (" +
		reach.String() + "): forged, another cluster's, or a write lost (a restore, a failover)"
}

// TokenUnprovable is Snapshot.TokenUnprovable, and also says when the
// primary provably lacks q's LSN because it is beyond the primary's reach
// (beyondReach): then no host has it either, since no replica is ahead of
// the primary it follows.
func (v View) TokenUnprovable(q *Query) string {
	if why := v.Snap.TokenUnprovable(q); why != "" {
		return why
	}
	c := v.Snap.Cluster(q.Cluster)
	if c == nil {
		return ""
	}
	return v.reachWhy(v.Primary(c), q)
}
