package httpapi

import (
	"errors"
	"net/http"
	"strings"

	"github.com/pgdns/pgdns/zone"
)

type resolveBody struct {
	Name     string         `json:"name"`
	Query    string         `json:"query,omitempty"` // the canonical form of the name, without the zone
	Rcode    string         `json:"rcode"`           // what DNS answers
	Error    string         `json:"error,omitempty"`
	Answer   []hostJSON     `json:"answer"`
	Excluded []excludedJSON `json:"excluded"`
}

type excludedJSON struct {
	Addr   string `json:"addr"`
	Reason string `json:"reason"`
}

// outcome maps selection errors to the DNS rcode and HTTP status of the
// answer: the one table both are read from.
func outcome(err error) (rcode string, status int) {
	switch {
	case err == nil:
		return "NOERROR", http.StatusOK
	case errors.Is(err, zone.ErrNoSuchName), errors.Is(err, zone.ErrUnknownCluster):
		return "NXDOMAIN", http.StatusNotFound
	case errors.Is(err, zone.ErrOutsideZone):
		return "REFUSED", http.StatusBadRequest
	case errors.Is(err, zone.ErrNotReady):
		return "SERVFAIL", http.StatusServiceUnavailable
	}
	return "SERVFAIL", http.StatusInternalServerError
}

// resolve serves GET /v1/resolve?name=lag-50ms.replica: what DNS would
// answer for the name now, and for every host left out, why.
func (a *API) resolve(w http.ResponseWriter, r *http.Request) {
	v, err := params(r, "name")
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: err.Error()})
		return
	}
	raw := v.Get("name")
	if raw == "" || len(raw) > 253 {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: "name must be given, at most 253 characters"})
		return
	}
	name := a.qualify(raw)
	body := resolveBody{Name: name, Answer: []hostJSON{}, Excluded: []excludedJSON{}}
	q, err := zone.Parse(name, a.origin)
	if err == nil && q.Kind == zone.KindCluster {
		// <cluster>.<zone>: an empty non-terminal when the cluster exists.
		body.Query = q.String()
		_, err = a.table.Load().LookupCluster(q.Cluster)
	}
	if err == nil && q.Kind == zone.KindHosts {
		body.Query = q.String()
		snap, now := a.table.Load(), a.now()
		var verdicts []zone.Verdict
		verdicts, err = snap.Explain(&q, now)
		if err == nil {
			for _, vd := range verdicts {
				if vd.Selected {
					body.Answer = append(body.Answer, newHostJSON(vd.Host, true, now))
				} else {
					body.Excluded = append(body.Excluded, excludedJSON{Addr: vd.Host.Addr, Reason: vd.Why})
				}
			}
		}
	}
	rcode, status := outcome(err)
	body.Rcode = rcode
	if err != nil {
		body.Error = err.Error()
	}
	writeJSON(w, status, body)
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
