package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/pgdns/pgdns/internal/events"
	"github.com/pgdns/pgdns/zone"
)

// Config configures the API.
type Config struct {
	Zone string // the DNS zone, e.g. "db.local"; names in /v1/resolve may omit it

	// SyncMaxLag and SyncMaxLagBytes are the thresholds the pg-status
	// endpoints use when a request does not give lag_ms or lag_bytes
	// (pg-status's pg_status__sync_max_lag_ms and _bytes).
	SyncMaxLag      time.Duration
	SyncMaxLagBytes uint64

	// Metrics serves /metrics; nil answers 404 there.
	Metrics http.Handler

	// OnRequest, when set, is called once per request with its route
	// pattern and status code, for metrics.
	OnRequest func(route string, code int)

	// Warnings, when set, lists problems that leave pgdns ready but that
	// an operator should hear of (a state file it cannot write); /readyz
	// shows them.
	Warnings func() []string

	// Admin and AdminToken turn the admin endpoints on (admin.go):
	// AdminToken returns the bearer token they demand, read afresh on each
	// request so that the file can be rotated. Either nil: they answer 404.
	Admin      Admin
	AdminToken func() ([]byte, error)

	// Events is the events log GET /v1/events reads (events.go); nil
	// answers 404 there.
	Events *events.Log

	// Lags, when set, holds the replicas' recent lags the status page
	// draws as sparklines; whoever owns it feeds it (LagHistory.Run).
	Lags *LagHistory
}

// API is the HTTP handler.
type API struct {
	cfg    Config
	origin string // lower-case FQDN of the zone
	table  *zone.Table
	log    *slog.Logger
	now    func() time.Time
	routes map[string]http.HandlerFunc
}

// New returns the API reading from table.
func New(cfg Config, table *zone.Table, log *slog.Logger) *API {
	a := &API{
		cfg:    cfg,
		origin: strings.ToLower(strings.TrimSuffix(cfg.Zone, ".")) + ".",
		table:  table,
		log:    log,
		now:    time.Now,
	}
	a.routes = map[string]http.HandlerFunc{
		"/":           a.status,
		"/healthz":    a.healthz,
		"/readyz":     a.readyz,
		"/v1/hosts":   a.hosts,
		"/v1/resolve": a.resolve,
		"/metrics":    a.metrics,
		"/v1/events":  a.eventsRoute,
	}
	for path, h := range a.pgStatusRoutes() {
		a.routes[path] = h
	}
	return a
}

// view is the one read of the zone a request makes: the current snapshot,
// one moment, one turn.
func (a *API) view() zone.View { return a.table.View(a.now()) }

// ServeHTTP routes a request. Only GET and HEAD exist; unknown paths get a
// JSON 404, other methods a JSON 405. A panic becomes a 500 and is logged.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
	route := "unknown"
	defer func() {
		if v := recover(); v != nil {
			a.log.Error("panic in HTTP handler", "panic", v, "path", r.URL.Path)
			if !rec.wrote {
				writeJSON(rec, http.StatusInternalServerError, errorBody{Error: "internal error"})
			}
		}
		if a.cfg.OnRequest != nil {
			a.cfg.OnRequest(route, rec.code)
		}
	}()

	if isAdminRoute(r.URL.Path) {
		route = r.URL.Path
		a.serveAdmin(rec, r)
		return
	}
	h, ok := a.routes[r.URL.Path]
	if !ok {
		writeJSON(rec, http.StatusNotFound, errorBody{Error: "no such endpoint: " + truncate(r.URL.Path, 100)})
		return
	}
	route = r.URL.Path
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		rec.Header().Set("Allow", "GET, HEAD")
		writeJSON(rec, http.StatusMethodNotAllowed, errorBody{Error: "method " + truncate(r.Method, 20) + " not allowed; use GET"})
		return
	}
	h(rec, r)
}

// statusRecorder remembers the status code for metrics.
type statusRecorder struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (s *statusRecorder) WriteHeader(code int) {
	if !s.wrote {
		s.code, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.NewResponseController reach the connection (a
// blocking /v1/events extends its deadlines).
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusRecorder) Write(b []byte) (int, error) {
	s.wrote = true
	return s.ResponseWriter.Write(b)
}

type errorBody struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"error":"cannot encode the answer"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

func writeText(w http.ResponseWriter, code int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(text))
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func (a *API) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (a *API) readyz(w http.ResponseWriter, _ *http.Request) {
	if !a.table.Load().Ready {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "error": zone.ErrNotReady.Error()})
		return
	}
	body := map[string]any{"ready": true}
	if a.cfg.Warnings != nil {
		if warn := a.cfg.Warnings(); len(warn) > 0 {
			body["warnings"] = warn
		}
	}
	writeJSON(w, http.StatusOK, body)
}

func (a *API) metrics(w http.ResponseWriter, r *http.Request) {
	if a.cfg.Metrics == nil {
		writeJSON(w, http.StatusNotFound, errorBody{Error: "metrics are off"})
		return
	}
	a.cfg.Metrics.ServeHTTP(w, r)
}

// Server is the API on a listening socket, with timeouts that keep slow or
// idle clients from holding resources.
type Server struct {
	srv  *http.Server
	addr string
	errc chan error
}

// DefaultMaxConns is ServerConfig.MaxConns when it is 0.
const DefaultMaxConns = 128

// ServerConfig bounds what clients can make the server hold, and says
// which names it answers to.
type ServerConfig struct {
	// MaxConns caps open connections (0: DefaultMaxConns); past it the
	// connection idle longest is closed (connCap).
	MaxConns int

	// AllowedHosts are the names, besides localhost, a request's Host
	// header may carry; an IP literal always may. Any other Host gets
	// 421 (hostGuard).
	AllowedHosts []string

	// OnEvict, when set, is called for each connection the cap closes,
	// before it is closed: an idle one (refused false) or a new one while
	// all are busy.
	OnEvict func(refused bool)
}

// Start listens on addr and serves h behind the Host check, with sc's
// connection cap.
func Start(addr string, h http.Handler, log *slog.Logger, sc ServerConfig) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if sc.MaxConns <= 0 {
		sc.MaxConns = DefaultMaxConns
	}
	limited := newConnCap(ln, sc.MaxConns)
	limited.onEvict = sc.OnEvict
	s := &Server{
		addr: ln.Addr().String(),
		errc: make(chan error, 1),
		srv: &http.Server{
			Handler: newHostGuard(h, sc.AllowedHosts),
			// A request's headers within 3 s of its first byte (or of
			// the connection), at most 8 KiB of them; a keep-alive
			// connection closes after 5 s without a request: the
			// kubelet opens one per probe and Prometheus scrapes every
			// 15 s or more, so nobody gains from keeping them longer.
			ReadHeaderTimeout: 3 * time.Second,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      10 * time.Second,
			IdleTimeout:       5 * time.Second,
			MaxHeaderBytes:    8 << 10,
			ConnState:         limited.connState,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
	}
	go func() {
		if err := s.srv.Serve(limited); !errors.Is(err, http.ErrServerClosed) {
			s.errc <- err
		}
	}()
	return s, nil
}

// Addr is the bound address.
func (s *Server) Addr() string { return s.addr }

// Err delivers an error if the server stops on its own.
func (s *Server) Err() <-chan error { return s.errc }

// Shutdown stops the server, letting requests in flight finish up to ctx.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.Shutdown(ctx) }

// hostPort splits a host's "host:port" (zone.ParseHostPort, which every
// host passed before it was probed); an address it would refuse comes back
// whole, with port 0.
func hostPort(addr string) (string, int) {
	host, port, err := zone.ParseHostPort(addr)
	if err != nil {
		return addr, 0
	}
	return host, int(port)
}
