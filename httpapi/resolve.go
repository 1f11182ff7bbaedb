package httpapi

import (
	"cmp"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/pgdns/pgdns/zone"
)

type resolveBody struct {
	Name     string         `json:"name"`
	Query    string         `json:"query,omitempty"`           // the canonical form of the name, without the zone
	Client   string         `json:"client,omitempty"`          // the client= address, when given
	Location string         `json:"client_location,omitempty"` // its location by dns.locations, when it has one
	Rcode    string         `json:"rcode"`                     // what DNS answers
	Error    string         `json:"error,omitempty"`
	Answer   []hostJSON     `json:"answer"`
	Excluded []excludedJSON `json:"excluded"`
	// SRV, for a name under _postgresql._tcp., is its SRV answer in DNS's
	// order (by priority, answer's order within one): the hosts of answer
	// with their priorities, ports and targets.
	SRV []srvJSON `json:"srv,omitempty"`
}

type excludedJSON struct {
	Addr    string `json:"addr"`
	Reason  string `json:"reason"`
	SRVOnly bool   `json:"srv_only,omitempty"` // left out of the address answer, answered by SRV (its port, or its address already in it)
}

// srvJSON is one SRV record of /v1/resolve, as DNS answers it.
type srvJSON struct {
	Priority uint16 `json:"priority"`
	Weight   uint16 `json:"weight"`
	Port     uint16 `json:"port"`
	Target   string `json:"target"`
}

// status maps the zone's outcome of a name to the rcode DNS answers it
// with and the HTTP status of /v1/resolve: the one table of this API's
// answers (dnsserver keeps the DNS one).
func status(o zone.Outcome) (rcode string, code int) {
	switch o {
	case zone.Answered, zone.NoData:
		return "NOERROR", http.StatusOK
	case zone.NoSuchName:
		return "NXDOMAIN", http.StatusNotFound
	case zone.Refused:
		return "REFUSED", http.StatusBadRequest
	case zone.NotReady:
		return "SERVFAIL", http.StatusServiceUnavailable
	}
	return "SERVFAIL", http.StatusInternalServerError
}

// resolve serves GET /v1/resolve?name=lag-50ms.replica[&client=IP]: what
// DNS would answer for the name now, in the order it would answer a client
// at that address (without one, a client in no location), and for every
// host left out, why.
func (a *API) resolve(w http.ResponseWriter, r *http.Request) {
	v, err := params(r, "name", "client")
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: err.Error()})
		return
	}
	var client netip.Addr
	if s, given := v["client"]; given {
		if client, err = netip.ParseAddr(s[0]); err != nil {
			writeJSON(w, http.StatusBadRequest, errorBody{Error: "client must be an IP address, got " + strconv.Quote(truncate(s[0], 60))})
			return
		}
	}
	raw := v.Get("name")
	if raw == "" || len(raw) > 253 {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: "name must be given, at most 253 characters"})
		return
	}
	name := a.qualify(raw)
	body := resolveBody{Name: name, Answer: []hostJSON{}, Excluded: []excludedJSON{}}
	if client.IsValid() {
		body.Client = client.String()
	}
	q, err := zone.Parse(name, a.origin)
	view := a.view()
	if err == nil && q.ENT {
		// host.<cluster>, _tcp.<name>: empty non-terminals, answered
		// NOERROR with no record when the names below them exist.
		body.Query = q.String()
		err = view.EmptyNonTerminal(&q)
	} else if err == nil && q.Kind == zone.KindCluster && q.SRV {
		// _postgresql._tcp.<cluster>: the cluster's SRV answer.
		body.Query = q.String()
		if _, err = view.Snap.LookupCluster(q.Cluster); err == nil {
			q = q.ClusterService()
		}
	} else if err == nil && q.Kind == zone.KindCluster {
		// <cluster>.<zone>: an empty non-terminal when the cluster exists.
		body.Query = q.String()
		_, err = view.Snap.LookupCluster(q.Cluster)
	}
	if err == nil && q.Kind == zone.KindHostName && !q.ENT {
		body.Query = q.String()
		var h *zone.Host
		var why string
		switch h, _, why, err = view.Snap.HostNamedAnswer(&q); {
		case err != nil:
		case why != "":
			// Not proven to be the cluster's server: NODATA, and why.
			body.Excluded = append(body.Excluded, excludedJSON{Addr: h.Addr, Reason: why})
		default:
			body.Answer = append(body.Answer, a.newHostJSON(view, view.Snap.Cluster(q.Cluster), h))
			if q.SRV {
				body.SRV = append(body.SRV, a.srvRecord(&q, h))
			}
		}
	}
	if err == nil && q.Kind == zone.KindHosts && !q.ENT {
		if body.Query == "" {
			body.Query = q.String()
		}
		q.From = view.Snap.Locate(client)
		body.Location = q.From
		var verdicts []zone.Verdict
		verdicts, err = view.Explain(&q)
		if err == nil {
			c := view.Snap.Cluster(q.Cluster)
			for _, vd := range verdicts {
				if vd.Selected {
					body.Answer = append(body.Answer, hostJSON{})
				}
			}
			if q.SRV {
				body.SRV = make([]srvJSON, len(body.Answer))
			}
			for _, vd := range verdicts {
				switch {
				case vd.Selected && q.SRV:
					body.SRV[vd.Rank-1] = a.srvRecord(&q, vd.Host)
					fallthrough
				case vd.Selected:
					body.Answer[vd.Rank-1] = a.newHostJSON(view, c, vd.Host) // in the answer's order
				default:
					body.Excluded = append(body.Excluded, excludedJSON{Addr: vd.Host.Addr, Reason: vd.Why, SRVOnly: vd.SRVOnly})
				}
			}
			// In the order DNS sends them (zone.Query.SRVOrder): by priority,
			// the answer's order within one.
			slices.SortStableFunc(body.SRV, func(x, y srvJSON) int { return cmp.Compare(x.Priority, y.Priority) })
		}
	}
	rcode, code := status(zone.OutcomeOf(err))
	body.Rcode = rcode
	if err != nil {
		body.Error = err.Error()
	}
	writeJSON(w, code, body)
}

// srvRecord is host h's SRV record in the answer to q, as DNS writes it.
func (a *API) srvRecord(q *zone.Query, h *zone.Host) srvJSON {
	return srvJSON{Priority: q.Priority(h), Weight: zone.SRVWeight, Port: h.Port, Target: a.hostName(h) + "."}
}

// qualify lower-cases name and makes it fully qualified: a name with a
// trailing dot is taken as it is (example.com. is outside the zone), one
// without is relative to the zone unless it already ends with it.
func (a *API) qualify(name string) string {
	name = strings.ToLower(name)
	if strings.HasSuffix(name, ".") {
		return name
	}
	name += "."
	if name != a.origin && !strings.HasSuffix(name, "."+a.origin) {
		name += a.origin
	}
	return name
}
