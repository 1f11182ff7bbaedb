package httpapi

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/pgdns/pgdns/zone"
)

// hostJSON is one host as /v1/hosts and /v1/resolve show it.
type hostJSON struct {
	Cluster     string  `json:"cluster"`
	Addr        string  `json:"addr"`
	IP          string  `json:"ip,omitempty"`
	Location    string  `json:"location,omitempty"` // where the host is (locations, Patroni's dc tag)
	Role        string  `json:"role"`
	Alive       bool    `json:"alive"`
	LagMS       *int64  `json:"lag_ms"`    // null when it cannot be vouched for
	LagBytes    *uint64 `json:"lag_bytes"` // null when it cannot be vouched for
	ReplayLSN   *string `json:"replay_lsn"`
	ReceiveLSN  *string `json:"receive_lsn"`
	Timeline    *uint32 `json:"timeline"`
	SystemID    *string `json:"system_identifier"` // a string: it does not fit a JSON number
	Sync        bool    `json:"sync_standby"`
	SyncUnsure  bool    `json:"sync_standby_unsure,omitempty"` // sync_standby is a guess: the replica's own row is not proven, or sync_state is hidden
	SyncProven  bool    `json:"sync_proven,omitempty"`         // the sync filter passes it: its own row of the primary's pg_stat_replication says sync or quorum
	StatsHidden bool    `json:"stats_hidden,omitempty"`        // the probe role cannot read the host's replication statistics (no pg_monitor)
	Drained     bool    `json:"drained"`                       // no replica name answers it (a primary stays the primary)
	DrainedBy   string  `json:"drained_by,omitempty"`          // pgdns.drain, noloadbalance, or both joined by ","
	Offline     bool    `json:"offline"`                       // a replica answered only by offline names (pgdns.offline)
	ReadOnly    bool    `json:"read_only,omitempty"`           // a primary that refuses writes (default_transaction_read_only): primary does not answer it
	LastProbe   *string `json:"last_probe"`                    // RFC 3339, the last successful probe
	ProbeAgeMS  *int64  `json:"probe_age_ms"`
	Fails       int     `json:"fails"`
	LastError   string  `json:"last_error,omitempty"`
	Aside       string  `json:"aside,omitempty"` // why a live host is not answered: foreign, unsettled, duplicate, superseded, split_brain, forked
	Note        string  `json:"note,omitempty"`  // the same and more, for people
	Port        uint16  `json:"port"`            // where clients connect: SRV answers carry it
	Name        string  `json:"name"`            // the host's own name, <label>.host.<cluster>.<zone> (SRV targets, certificates)
}

// hostName is h's own name in the zone, without the trailing dot.
func (a *API) hostName(h *zone.Host) string {
	return zone.HostName(h.Name, h.Cluster) + "." + strings.TrimSuffix(a.origin, ".")
}

// newHostJSON shows host h of cluster c as of view v: alive and lags by
// the view's rules, the ones DNS answers by.
func (a *API) newHostJSON(v zone.View, c *zone.Cluster, h *zone.Host) hostJSON {
	j := hostJSON{
		Cluster: h.Cluster, Addr: h.Addr, Port: h.Port, Name: a.hostName(h), Location: h.Location, Role: h.Role.String(), Alive: v.Live(h),
		Sync: h.Sync, SyncUnsure: h.SyncUnsure, SyncProven: h.SyncProven, StatsHidden: h.Seen && h.StatsHidden, Fails: h.Fails, LastError: h.LastError, Aside: h.Aside.String(), Note: h.Note,
		Drained: h.Drained, DrainedBy: h.DrainedBy.String(), Offline: h.Offline, ReadOnly: h.ReadOnly,
	}
	if h.IP.IsValid() {
		j.IP = h.IP.String()
	}
	if lag, ok := v.Lag(c, h); ok {
		ms := lag.Milliseconds()
		j.LagMS = &ms
	}
	if b, ok := v.LagBytes(c, h); ok {
		j.LagBytes = &b
	}
	if h.Seen {
		replay, tl, id := h.ReplayLSN.String(), h.Timeline, strconv.FormatUint(h.SystemID, 10)
		last, age := h.ProbedAt.UTC().Format(time.RFC3339Nano), h.Age(v.Now).Milliseconds()
		j.ReplayLSN, j.Timeline, j.SystemID, j.LastProbe, j.ProbeAgeMS = &replay, &tl, &id, &last, &age
		if h.InRecovery {
			receive := h.ReceiveLSN.String()
			j.ReceiveLSN = &receive
		}
	}
	return j
}

type hostsBody struct {
	Ready bool       `json:"ready"`
	Hosts []hostJSON `json:"hosts"`
}

// hosts serves GET /v1/hosts: every configured host and what the probe
// knows of it.
func (a *API) hosts(w http.ResponseWriter, r *http.Request) {
	if !noParams(w, r) {
		return
	}
	v := a.view()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	writeHosts(w, v, a.newHostJSON)
}

// writeHosts writes the body json.Marshal makes of hostsBody, with every
// host of v, one host encoded at a time: at 10,000 hosts the body built
// whole (every host's hostJSON, Marshal's buffer, its copy) was tens of
// MiB of heap for one request, a buffer of which encoding/json's pool
// then kept (issue 28). A hostJSON always encodes (strings, booleans,
// integers and pointers to them), so nothing is left to fail once the
// status is sent.
func writeHosts(w io.Writer, v zone.View, show func(zone.View, *zone.Cluster, *zone.Host) hostJSON) {
	bw := bufio.NewWriterSize(w, 32<<10)
	_, _ = bw.WriteString(`{"ready":` + strconv.FormatBool(v.Snap.Ready) + `,"hosts":[`)
	first := true
	for _, c := range v.Snap.Clusters {
		for i := range c.Hosts {
			b, err := json.Marshal(show(v, c, &c.Hosts[i]))
			if err != nil {
				return // unreachable: see above
			}
			if !first {
				_ = bw.WriteByte(',')
			}
			first = false
			_, _ = bw.Write(b)
		}
	}
	_, _ = bw.WriteString("]}\n")
	_ = bw.Flush()
}

// noParams answers 400 to a request with query parameters where none are
// taken, so that a typo is not silently ignored.
func noParams(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.RawQuery != "" {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: "this endpoint takes no parameters"})
		return false
	}
	return true
}
