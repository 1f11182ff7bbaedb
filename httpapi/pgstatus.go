package httpapi

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/pgdns/pgdns/zone"
)

// The pg-status endpoints. They answer like pg-status — the host name as
// plain text, or {"host": …} with Accept: application/json; 404 when there
// is no host at all; 400 {"error_text": …} for a bad parameter; 503 until
// the first probe round — with pgdns's rules underneath: the same
// selection as DNS, round-robin among fitting replicas on every endpoint,
// and a time lag that stays 0 on an idle primary.

// pgStatusRoutes maps pg-status's paths to handlers.
func (a *API) pgStatusRoutes() map[string]http.HandlerFunc {
	return map[string]http.HandlerFunc{
		"/master":                 a.pgStatusPick(pickMaster),
		"/replica":                a.pgStatusPick(pickReplica),
		"/sync_by_time":           a.pgStatusPick(pickSyncByTime),
		"/sync_by_bytes":          a.pgStatusPick(pickSyncByBytes),
		"/sync_by_time_or_bytes":  a.pgStatusPick(pickSyncByTimeOrBytes),
		"/sync_by_time_and_bytes": a.pgStatusPick(pickSyncByTimeAndBytes),
		"/most_sync_by_bytes":     a.pgStatusPick(pickMostSyncByBytes),
		"/hosts":                  a.pgStatusHosts,
	}
}

type pgStatusError struct {
	ErrorText string `json:"error_text"`
}

// lagLimits are a request's thresholds after pg-status's rules for
// omitted parameters.
type lagLimits struct {
	lag      time.Duration
	hasLag   bool
	bytes    uint64
	hasBytes bool
	lsn      zone.LSN
	hasLSN   bool
	allPorts bool // hosts on every port, as SRV answers them (the answer carries the port)
}

// pick chooses the host for a pg-status endpoint from cluster c as of
// view v, under the request's limits, rotating by the view's turn; nil
// when there is no host at all.
type pick func(a *API, v zone.View, c *zone.Cluster, lim lagLimits) *zone.Host

// pgStatusView is the request's read view; before the first round of
// probes has ended it answers pg-status's 503 instead and returns false.
func (a *API) pgStatusView(w http.ResponseWriter) (zone.View, bool) {
	v := a.view()
	if !v.Snap.Ready {
		writeJSON(w, http.StatusServiceUnavailable, pgStatusError{ErrorText: "pg_monitor is not ready"})
		return v, false
	}
	return v, true
}

// pgStatusPick wraps a pick with parameter parsing and pg-status's answer
// formats.
func (a *API) pgStatusPick(choose pick) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		asJSON := strings.Contains(r.Header.Get("Accept"), "application/json")
		view, ok := a.pgStatusView(w)
		if !ok {
			return
		}
		v, err := params(r, "lag_ms", "lag_bytes", "min_lsn", "cluster")
		if err != nil {
			writeJSON(w, http.StatusBadRequest, pgStatusError{ErrorText: err.Error()})
			return
		}
		var lim lagLimits
		var ms uint64
		if ms, lim.hasLag, err = nonNegative(v, "lag_ms"); err == nil {
			lim.bytes, lim.hasBytes, err = nonNegative(v, "lag_bytes")
		}
		if err == nil && v.Has("min_lsn") {
			if lim.lsn, err = zone.ParseLSN(v.Get("min_lsn")); err != nil {
				err = errInvalidMinLSN
			}
			lim.hasLSN = true
		}
		if err != nil {
			writeJSON(w, http.StatusBadRequest, pgStatusError{ErrorText: err.Error()})
			return
		}
		lim.lag = time.Duration(min(ms, 1<<40)) * time.Millisecond
		c := view.Snap.Cluster(v.Get("cluster"))
		if c == nil {
			writeJSON(w, http.StatusBadRequest, pgStatusError{ErrorText: "Invalid cluster"})
			return
		}

		// The plain-text answer is an address only, as an A record: a
		// host on another port than the cluster's client port is never
		// it. The JSON answer carries the port, and may name any host.
		lim.allPorts = asJSON
		h := choose(a, view, c, lim)
		if h != nil && !asJSON && !c.Addressable(h) {
			h = nil
		}
		if h == nil && lim.hasLSN {
			// Why no host has the token, when pgdns knows: pg-status has
			// no place for it, so a header carries it.
			q := lim.lsnQuery(c)
			if why := view.TokenUnprovable(&q); why != "" {
				w.Header().Set("X-Pgdns-Reason", "unprovable="+why)
			}
		}
		switch {
		case h == nil && asJSON:
			writeJSON(w, http.StatusNotFound, map[string]any{"host": nil})
		case h == nil:
			writeText(w, http.StatusNotFound, "")
		case asJSON:
			host, port := hostPort(h.Addr)
			writeJSON(w, http.StatusOK, map[string]any{"host": host, "port": port, "addr": h.Addr, "cluster": c.Name, "role": h.Role.String(),
				"name": a.hostName(h)})
		default:
			host, _ := hostPort(h.Addr)
			writeText(w, http.StatusOK, host)
		}
	}
}

type textError string

func (e textError) Error() string { return string(e) }

const errInvalidMinLSN = textError("Invalid min_lsn")

// replicas returns the live replicas of c that fit q, in configured order
// (roundRobin rotates them), using the same selection as DNS.
func replicas(v zone.View, c *zone.Cluster, q zone.Query) []*zone.Host {
	q.Kind, q.Target, q.Cluster = zone.KindHosts, zone.TargetReplica, c.Name
	v.Turn = 0
	hosts, _ := v.Select(&q, nil)
	return hosts
}

// roundRobin picks one of hosts by the view's turn, or falls back to the
// primary as pg-status does (fallback).
func roundRobin(v zone.View, c *zone.Cluster, lim lagLimits, hosts []*zone.Host) *zone.Host {
	if len(hosts) > 0 {
		return hosts[v.Turn%uint64(len(hosts))]
	}
	return fallback(v, c, lim)
}

// fallback is pg-status's answer when no replica fits: the primary, which
// has every write there is, except under a min_lsn the zone's selection
// does not let it pass (prefer-replica's fallback): a token pgdns
// withdraws for every name (a write lost in a failover or a restore, a
// forked timeline, a position beyond the primary's reach). Answering the
// primary then would send a read-your-writes client to a server that
// provably lacks its write (review 7, H8); no host is the answer.
func fallback(v zone.View, c *zone.Cluster, lim lagLimits) *zone.Host {
	p := v.Primary(c)
	if p == nil || !lim.hasLSN {
		return p
	}
	q := lim.lsnQuery(c)
	v.Turn = 0
	if hosts, _ := v.Select(&q, nil); slices.Contains(hosts, p) {
		return p
	}
	return nil
}

// lsnQuery is the zone query of lim's min_lsn alone, on cluster c, as
// any.<cluster> with an lsn- label asks it.
func (lim lagLimits) lsnQuery(c *zone.Cluster) zone.Query {
	return zone.Query{Kind: zone.KindHosts, Target: zone.TargetAny, Cluster: c.Name, HasLSN: true, MinLSN: lim.lsn, SRV: lim.allPorts}
}

// pickMaster: the primary, for writes: never one that refuses them
// (zone.Host.ReadOnly), as primary.<cluster> does not answer it.
func pickMaster(_ *API, v zone.View, c *zone.Cluster, _ lagLimits) *zone.Host {
	return v.WritablePrimary(c)
}

// query turns limits into a zone query; time and bytes say which of the
// thresholds the endpoint considers.
func (lim lagLimits) query(time, bytes bool) zone.Query {
	q := zone.Query{HasLSN: lim.hasLSN, MinLSN: lim.lsn, SRV: lim.allPorts}
	if time {
		q.HasLag, q.MaxLag = true, lim.lag
	}
	if bytes {
		q.HasBytes, q.MaxBytes = true, lim.bytes
	}
	return q
}

// withDefaults fills thresholds a request left out from the configured
// pg-status defaults (the /sync_by_* rule).
func (a *API) withDefaults(lim lagLimits) lagLimits {
	if !lim.hasLag {
		lim.lag, lim.hasLag = a.cfg.SyncMaxLag, true
	}
	if !lim.hasBytes {
		lim.bytes, lim.hasBytes = a.cfg.SyncMaxLagBytes, true
	}
	return lim
}

// pickReplica: an omitted parameter means no constraint on it.
func pickReplica(a *API, v zone.View, c *zone.Cluster, lim lagLimits) *zone.Host {
	return roundRobin(v, c, lim, replicas(v, c, lim.query(lim.hasLag, lim.hasBytes)))
}

func pickSyncByTime(a *API, v zone.View, c *zone.Cluster, lim lagLimits) *zone.Host {
	return roundRobin(v, c, lim, replicas(v, c, a.withDefaults(lim).query(true, false)))
}

func pickSyncByBytes(a *API, v zone.View, c *zone.Cluster, lim lagLimits) *zone.Host {
	return roundRobin(v, c, lim, replicas(v, c, a.withDefaults(lim).query(false, true)))
}

func pickSyncByTimeAndBytes(a *API, v zone.View, c *zone.Cluster, lim lagLimits) *zone.Host {
	return roundRobin(v, c, lim, replicas(v, c, a.withDefaults(lim).query(true, true)))
}

// pickSyncByTimeOrBytes: replicas within either threshold, in configured
// order.
func pickSyncByTimeOrBytes(a *API, v zone.View, c *zone.Cluster, lim lagLimits) *zone.Host {
	lim = a.withDefaults(lim)
	byTime := replicas(v, c, lim.query(true, false))
	byBytes := replicas(v, c, lim.query(false, true))
	var union []*zone.Host
	for i := range c.Hosts {
		h := &c.Hosts[i]
		if contains(byTime, h) || contains(byBytes, h) {
			union = append(union, h)
		}
	}
	return roundRobin(v, c, lim, union)
}

// pickMostSyncByBytes: the fitting replica with the least byte lag, ties
// by configured order; no round-robin, as in pg-status.
func pickMostSyncByBytes(a *API, v zone.View, c *zone.Cluster, lim lagLimits) *zone.Host {
	var best *zone.Host
	for _, h := range replicas(v, c, a.withDefaults(lim).query(false, true)) {
		if best == nil || h.LagBytes < best.LagBytes {
			best = h
		}
	}
	if best == nil {
		return fallback(v, c, lim)
	}
	return best
}

func contains(hosts []*zone.Host, h *zone.Host) bool {
	for _, x := range hosts {
		if x == h {
			return true
		}
	}
	return false
}

// pgStatusHostJSON is one element of pg-status's /hosts list.
type pgStatusHostJSON struct {
	Host        string  `json:"host"`
	Port        int     `json:"port"`
	Cluster     string  `json:"cluster"`
	DC          *string `json:"dc"`
	Geo         *string `json:"geo"`
	Master      bool    `json:"master"`
	Alive       bool    `json:"alive"`
	LagMS       *int64  `json:"lag_ms"`
	SyncByTime  bool    `json:"sync_by_time"`
	LagBytes    *uint64 `json:"lag_bytes"`
	SyncByBytes bool    `json:"sync_by_bytes"`
	LSN         *string `json:"lsn"`
	Name        string  `json:"name"` // the host's own name in the zone (not in pg-status)
}

// pgStatusHosts serves pg-status's GET /hosts. Lags and the sync_by_*
// flags follow the view's rules: a lag selection would not vouch for is
// null, and sync_by_time is true exactly when /sync_by_time may answer the
// host.
func (a *API) pgStatusHosts(w http.ResponseWriter, r *http.Request) {
	v, ok := a.pgStatusView(w)
	if !ok {
		return
	}
	if _, err := params(r); err != nil {
		writeJSON(w, http.StatusBadRequest, pgStatusError{ErrorText: err.Error()})
		return
	}
	byTime := zone.Query{HasLag: true, MaxLag: a.cfg.SyncMaxLag}
	byBytes := zone.Query{HasBytes: true, MaxBytes: a.cfg.SyncMaxLagBytes}
	out := []pgStatusHostJSON{}
	for _, c := range v.Snap.Clusters {
		primary := v.Primary(c)
		for i := range c.Hosts {
			h := &c.Hosts[i]
			host, port := hostPort(h.Addr)
			e := pgStatusHostJSON{Host: host, Port: port, Name: a.hostName(h), Cluster: c.Name, Master: h == primary, Alive: v.Live(h)}
			if e.Alive {
				lsn := h.ReplayLSN.String()
				e.LSN = &lsn
			}
			if lag, ok := v.Lag(c, h); ok {
				ms := lag.Milliseconds()
				e.LagMS = &ms
			}
			if b, ok := v.LagBytes(c, h); ok {
				e.LagBytes = &b
			}
			e.SyncByTime, e.SyncByBytes = v.Within(c, h, &byTime), v.Within(c, h, &byBytes)
			out = append(out, e)
		}
	}
	writeJSON(w, http.StatusOK, out)
}
