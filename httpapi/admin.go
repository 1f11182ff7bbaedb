package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Admin endpoints change what pgdns has learned. They are off unless a
// token is configured (http.admin_token_file), take POST only, and demand
// that token as a bearer token; every use, and every refused attempt, is
// logged at WARN.

// Admin is what the admin endpoints act on; internal/app wires the prober
// in (httpapi does not know the probe).
type Admin interface {
	// ForgetTimeline forgets that timeline tl and every later one of
	// cluster were proven, and returns the cluster's newest timeline
	// before and after (after: as the next snapshot decided it from what
	// live hosts prove now). Errors wrap ErrNoSuchCluster or
	// ErrTimelineNotProven for a request that names nothing to forget.
	ForgetTimeline(ctx context.Context, cluster string, tl uint32) (before, after uint32, err error)
	// ForgetFork forgets that host (an address as the config lists it)
	// of cluster was proven on another branch: the operator rebuilt it. It
	// returns the proof, the host's server run now and the run proven
	// (zero: not known). Errors wrap ErrNoSuchCluster, ErrNoSuchHost,
	// ErrNoForkProof or ErrForkProofRunning (nothing forgotten: the host
	// still runs the run proven, or was not probed yet).
	ForgetFork(ctx context.Context, cluster, host string) (proof string, run, proven time.Time, err error)
}

var (
	// ErrNoSuchCluster: the request names a cluster pgdns does not serve.
	ErrNoSuchCluster = errors.New("no such cluster")
	// ErrTimelineNotProven: the timeline is 0 or above the newest proven.
	ErrTimelineNotProven = errors.New("timeline is not among the cluster's proven timelines")
	// ErrNoSuchHost: the cluster does not list the host.
	ErrNoSuchHost = errors.New("no such host in the cluster")
	// ErrNoForkProof: the host is not proven on another branch.
	ErrNoForkProof = errors.New("the host is not proven on another branch")
	// ErrForkProofRunning: the host still runs the server run proven on
	// another branch (or was not probed yet): rebuild it first.
	ErrForkProofRunning = errors.New("the host still runs the server run proven on another branch")
	// ErrForkHostDown: the host's last probe failed; its run now is not
	// known: ask again once it is up.
	ErrForkHostDown = errors.New("the host is down")
)

// The admin endpoints' paths.
const (
	adminRoute      = "/v1/admin/forget-timeline"
	forgetForkRoute = "/v1/admin/forget-fork"
)

// isAdminRoute reports whether path is an admin endpoint's.
func isAdminRoute(path string) bool { return path == adminRoute || path == forgetForkRoute }

// serveAdmin answers a request to an admin path.
func (a *API) serveAdmin(w http.ResponseWriter, r *http.Request) {
	if a.cfg.Admin == nil || a.cfg.AdminToken == nil {
		writeJSON(w, http.StatusNotFound, errorBody{Error: "the admin endpoints are off: http.admin_token_file is not set"})
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeJSON(w, http.StatusMethodNotAllowed, errorBody{Error: "method " + truncate(r.Method, 20) + " not allowed; use POST"})
		return
	}
	want, err := a.cfg.AdminToken()
	if err != nil {
		a.log.Error("admin: cannot read the token file; refusing the request", "error", err, "remote", r.RemoteAddr)
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: "the admin token cannot be read"})
		return
	}
	got, ok := bearerToken(r.Header.Get("Authorization"))
	// Hashes first: ConstantTimeCompare is constant-time only for equal
	// lengths, and the token's length is a secret too.
	gh, wh := sha256.Sum256([]byte(got)), sha256.Sum256(want)
	if !ok || len(want) == 0 || subtle.ConstantTimeCompare(gh[:], wh[:]) != 1 {
		a.log.Warn("admin: request refused: missing or wrong bearer token", "path", r.URL.Path, "remote", r.RemoteAddr)
		w.Header().Set("WWW-Authenticate", `Bearer realm="pgdns admin"`)
		writeJSON(w, http.StatusUnauthorized, errorBody{Error: "a valid bearer token is required"})
		return
	}
	if r.URL.Path == forgetForkRoute {
		a.forgetFork(w, r)
		return
	}
	// An admin action changes what pgdns knows, so ambiguous input is
	// refused, not read as its first value (review 8, R8-7).
	q, err := params(r, "cluster", "timeline")
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: err.Error()})
		return
	}
	cluster := q.Get("cluster")
	tl, err := strconv.ParseUint(q.Get("timeline"), 10, 32)
	if cluster == "" || err != nil || tl == 0 {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: "give cluster=NAME and timeline=N (a timeline number from 1)"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	before, after, err := a.cfg.Admin.ForgetTimeline(ctx, cluster, uint32(tl))
	switch {
	case errors.Is(err, ErrNoSuchCluster):
		writeJSON(w, http.StatusNotFound, errorBody{Error: "no such cluster: " + truncate(cluster, 100)})
		return
	case errors.Is(err, ErrTimelineNotProven):
		writeJSON(w, http.StatusConflict, errorBody{Error: err.Error()})
		return
	case err != nil:
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: err.Error()})
		return
	}
	a.log.Warn("admin: timeline forgotten by an operator", "cluster", cluster, "timeline", tl,
		"newest_before", before, "newest_after", after, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, map[string]any{"cluster": cluster, "forgotten": tl,
		"newest_timeline_before": before, "newest_timeline_after": after})
}

// bearerToken returns the token of an Authorization header value in the
// Bearer scheme: "Bearer", one or more spaces, the token (RFC 6750 §2.1).
// The scheme's name is case-insensitive (RFC 9110 §11.1), so "bearer x"
// is "Bearer x"; whitespace around the value is not part of it (RFC 9110
// §5.5). It compares only the scheme, never the secret.
func bearerToken(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimLeft(tok, " "), true
}

// forgetFork answers an authenticated POST /v1/admin/forget-fork?cluster=C&host=H.
func (a *API) forgetFork(w http.ResponseWriter, r *http.Request) {
	q, err := params(r, "cluster", "host")
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: err.Error()})
		return
	}
	cluster, host := q.Get("cluster"), q.Get("host")
	var missing []string
	if cluster == "" {
		missing = append(missing, "cluster=NAME")
	}
	if host == "" {
		missing = append(missing, "host=HOST:PORT (as the config lists it)")
	}
	if len(missing) > 0 {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: "give " + strings.Join(missing, " and ")})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	proof, run, proven, err := a.cfg.Admin.ForgetFork(ctx, cluster, host)
	switch {
	case errors.Is(err, ErrNoSuchCluster):
		writeJSON(w, http.StatusNotFound, errorBody{Error: "no such cluster: " + truncate(cluster, 100)})
		return
	case errors.Is(err, ErrNoSuchHost):
		writeJSON(w, http.StatusNotFound, errorBody{Error: "no such host in cluster " + truncate(cluster, 100) + ": " + truncate(host, 100) +
			" (give it as the config lists it, host:port)"})
		return
	case errors.Is(err, ErrNoForkProof):
		writeJSON(w, http.StatusConflict, errorBody{Error: truncate(host, 100) + ": " + err.Error() + ": nothing to forget"})
		return
	case errors.Is(err, ErrForkHostDown):
		writeJSON(w, http.StatusConflict, errorBody{Error: truncate(host, 100) + ": nothing forgotten: it is down, so its server run now is not known " +
			"(the proof stays, " + proof + "); start the rebuilt replica, then ask again once pgdns shows it up"})
		return
	case errors.Is(err, ErrForkProofRunning):
		why := "it has not been probed yet"
		switch {
		case !run.IsZero() && proven.IsZero():
			why = "the server run its proof was made on is not known (" + proof + ")"
		case !run.IsZero():
			why = "its server run started at " + stamp(run) + " is the one proven on another branch (" + proof + ")"
		}
		writeJSON(w, http.StatusConflict, errorBody{Error: truncate(host, 100) + ": nothing forgotten: " + why +
			"; rebuild it (re-clone it or pg_rewind it, then start it), then ask again"})
		return
	case err != nil:
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: err.Error()})
		return
	}
	a.log.Warn("admin: fork proof forgotten by an operator", "cluster", cluster, "host", host,
		"server_started", stamp(run), "proven_run", stamp(proven), "proof", proof, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, map[string]any{"cluster": cluster, "host": host, "forgotten": proof,
		"server_started": stamp(run), "proven_run": stamp(proven),
		"done": host + " is judged without the proof from now on: its server run started at " + stamp(run) +
			", not the one proven on another branch (" + stamp(proven) + ")"})
}

// stamp is t for people, in UTC; "" when zero.
func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}
