// Package app wires pgdns together: configuration to probe, probe to the
// zone table, the table to the DNS server and the HTTP API. cmd/pgdns runs
// it; tests start the whole program in-process the same way.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/dnsserver"
	"github.com/pgdns/pgdns/httpapi"
	"github.com/pgdns/pgdns/internal/config"
	"github.com/pgdns/pgdns/internal/events"
	"github.com/pgdns/pgdns/internal/metrics"
	"github.com/pgdns/pgdns/internal/patroni"
	"github.com/pgdns/pgdns/probe"
	"github.com/pgdns/pgdns/zone"
)

// ShutdownTimeout bounds how long in-flight queries may take to finish.
const ShutdownTimeout = 5 * time.Second

// App is a configured pgdns.
type App struct {
	log     *slog.Logger
	table   *zone.Table
	metrics *metrics.Metrics

	mu          sync.Mutex                  // serialises Start, Reload, discovery and Stop
	cfg         *config.Config              // as configured (hosts without discovered members)
	discovered  map[string][]patroni.Member // members read from Patroni, by cluster
	discoFailed map[string]bool             // Patroni did not answer last time (log once)
	discoKick   chan struct{}               // read the member lists now (kickDiscovery)
	refused     map[string]string           // the members Patroni listed that were refused, by cluster (log on change)
	// labelNames is, by cluster and sanitised label, every Patroni member
	// name seen with that label since start (noteLabels): two of them,
	// and no member's host gets the label while pgdns runs.
	labelNames map[string]map[string]map[string]string
	probing    *config.Config // what the running prober probes: cfg plus members
	stopDisco  context.CancelFunc
	discoDone  chan struct{}
	dns        *dnsserver.Server
	http       *httpapi.Server // nil when http.listen is ""
	status     *statusFeed     // feeds the status page; nil when http.listen is ""
	running    *runningProber
	prober     atomic.Pointer[probe.Prober] // the one publishing, for Refresh
	state      *stateKeeper                 // nil without state.path (state.go)
	events     *events.Log                  // what changed, for /v1/events (events.go)
	stopped    bool                         // Stop has run: a second one does nothing
}

// runningProber is a prober and how to stop it.
type runningProber struct {
	p    *probe.Prober
	stop context.CancelFunc
	done chan struct{}
}

// Check validates what config.Load cannot: that the probe DSN parses and
// that every configured feature is available. -check runs it too.
func Check(cfg *config.Config) error {
	var errs []error
	if _, err := probe.PostgresCheckers(cfg.Probe.DSN); err != nil {
		errs = append(errs, fmt.Errorf("probe.dsn %w", err))
	}
	if path := cfg.HTTP.AdminTokenFile; path != "" {
		if _, err := readAdminToken(path); err != nil {
			errs = append(errs, fmt.Errorf("http.admin_token_file: %w", err))
		}
	}
	return errors.Join(errs...)
}

// New returns an App for cfg. It does not bind or probe yet.
func New(cfg *config.Config, log *slog.Logger) (*App, error) {
	if err := Check(cfg); err != nil {
		return nil, err
	}
	table := zone.NewTable()
	return &App{cfg: cfg, log: log, table: table, metrics: metrics.New(table), events: newEventsLog(cfg),
		discovered: map[string][]patroni.Member{}, discoFailed: map[string]bool{}, discoKick: make(chan struct{}, 1), refused: map[string]string{}}, nil
}

// Table is the live table the servers answer from.
func (a *App) Table() *zone.Table { return a.table }

// DNSAddr is the address the DNS server is bound to (after Start).
func (a *App) DNSAddr() string { return a.dns.Addr() }

// HTTPAddr is the address the HTTP API is bound to, "" when it is off.
func (a *App) HTTPAddr() string {
	if a.http == nil {
		return ""
	}
	return a.http.Addr()
}

// Start binds the servers and starts probing. A bind error (address in
// use, say) is returned here and nothing is left running.
func (a *App) Start() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	cfg := a.cfg
	// What pgdns learned before, read before anything can be answered.
	lock, remembered, err := a.loadState(cfg.State.Path)
	if err != nil {
		return err
	}
	// The writer before the HTTP API, whose /readyz reads its status.
	a.startState(cfg.State.Path, lock, remembered)
	var h dns.Handler = dnsserver.NewHandler(dnsserver.Config{
		Zone:             cfg.DNS.Zone,
		TTL:              cfg.DNS.TTL,
		NameServers:      nameServers(cfg.DNS.NameServers),
		NameServerIPs:    listenIPs(cfg.DNS.Listen),
		OnAnswer:         a.metrics.DNSAnswer,
		OnLatency:        a.metrics.DNSLatency,
		OnLocality:       a.metrics.DNSLocality,
		OnLSNUnreachable: a.metrics.LSNUnreachable,
		ClientSubnetFrom: cfg.DNS.ClientSubnetFrom,
		LSNWait:          cfg.DNS.LSNWait,
		Refresh:          a.refresh,
	}, a.table, a.log)
	limiter := dnsserver.NewRateLimiter(dnsserver.RateLimits{PerSecond: cfg.DNS.RateLimit})
	a.metrics.TrackRateLimiter(limiter)
	h = limiter.Wrap(h)
	srv, err := dnsserver.Start(cfg.DNS.Listen, h, dnsserver.Limits{OnLSNWaitFull: a.metrics.LSNWaitFull})
	if err != nil {
		a.stopState()
		return fmt.Errorf("dns.listen %q: %w", cfg.DNS.Listen, err)
	}
	a.dns = srv
	if cfg.HTTP.Listen != "" {
		a.status = startStatusFeed(a.table)
		api := httpapi.New(httpapi.Config{
			Zone:            cfg.DNS.Zone,
			SyncMaxLag:      cfg.HTTP.SyncMaxLag,
			SyncMaxLagBytes: cfg.HTTP.SyncMaxLagBytes,
			Metrics:         a.metrics.Handler(),
			OnRequest:       a.metrics.HTTPRequest,
			Warnings:        a.stateWarnings,
			Admin:           adminOps{a},
			AdminToken:      adminToken(cfg.HTTP.AdminTokenFile),
			Events:          a.events,
			Lags:            a.status.lags,
		}, a.table, a.log)
		hs, err := httpapi.Start(cfg.HTTP.Listen, withPprof(cfg.HTTP.Listen, api), a.log, httpapi.ServerConfig{
			MaxConns: cfg.HTTP.MaxConns, AllowedHosts: cfg.HTTP.AllowedHosts, OnEvict: a.metrics.HTTPEvicted})
		if err != nil {
			_ = srv.Shutdown(context.Background())
			a.status.halt()
			a.stopState()
			return fmt.Errorf("http.listen %q: %w", cfg.HTTP.Listen, err)
		}
		a.http = hs
	}
	// Members from Patroni before the first probe round, so that the first
	// answers already include them; discovery keeps them current after.
	a.discover(context.Background())
	a.probing = a.effective(cfg)
	a.warnConfig(a.probing)
	a.metrics.SetClusters(clusterNames(cfg))
	a.running, err = a.startProber(a.probing, true, remembered)
	if err != nil {
		a.status.halt()
		a.stopState()
		return err
	}
	a.prober.Store(a.running.p)
	ctx, cancel := context.WithCancel(context.Background())
	a.stopDisco, a.discoDone = cancel, make(chan struct{})
	go a.discoveryLoop(ctx)
	a.log.Info("pgdns started", "dns", srv.Addr(), "http", a.HTTPAddr(), "zone", cfg.DNS.Zone,
		"clusters", len(cfg.Clusters), "interval", cfg.Probe.Interval.String())
	return nil
}

// refresh re-probes a cluster's replicas with whichever prober publishes.
func (a *App) refresh(cluster string) <-chan struct{} {
	return a.prober.Load().Refresh(cluster)
}

// startProber starts probing the hosts of cfg. An inactive prober probes
// but publishes nothing until Activate.
// remembered, from the state file, seeds the first prober; later ones
// inherit from their predecessor (swap).
func (a *App) startProber(cfg *config.Config, active bool, remembered map[string]probe.Remembered) (*runningProber, error) {
	newChecker, err := probe.PostgresCheckers(cfg.Probe.DSN, probe.AdmissionInterval(cfg.Probe.AdmissionInterval))
	if err != nil {
		return nil, fmt.Errorf("probe.dsn %w", err)
	}
	pcfg := probe.Config{
		Interval: cfg.Probe.Interval, Timeout: cfg.Probe.Timeout, MaxFails: cfg.Probe.MaxFails,
		Hooks: probe.Hooks{HostProbes: a.metrics.HostProbes, RoleChanged: a.metrics.RoleChanged, SplitBrain: a.metrics.SplitBrain,
			LeaderUnsure: a.kickDiscovery, Published: a.published},
		Inactive: !active,

		Remembered: remembered,
	}
	pcfg.Hooks.Learned = a.learned()
	pcfg.MinRefreshGap = cfg.DNS.LSNRefreshMinGap
	pcfg.FluxInterval, pcfg.FluxDuration = cfg.Probe.FluxInterval, cfg.Probe.FluxDuration
	pcfg.Hooks.FluxProbes, pcfg.Hooks.FluxBegan = a.metrics.FluxProbes, a.metrics.FluxBegan
	pcfg.Hooks.Probes, pcfg.Hooks.ClusterProbes = a.metrics.Probes, a.metrics.ClusterProbes
	pcfg.Hooks.RefreshRound, pcfg.Hooks.RefreshCoalesced = a.metrics.RefreshRound, a.metrics.RefreshCoalesced
	for _, c := range cfg.Clusters {
		pcfg.Clusters = append(pcfg.Clusters, probe.ClusterConfig{Name: c.Name, Hosts: c.Hosts, AsyncOnly: c.AsyncOnly, SystemID: c.SystemID, MinTimeline: c.MinTimeline,
			Locations: c.Locations, Names: c.Names, Port: c.Port, Patroni: len(c.Patroni) > 0, Leader: patroni.Leader(a.discovered[c.Name]),
			Tags: memberTags(a.discovered[c.Name])})
	}
	if len(cfg.DNS.Networks) > 0 {
		pcfg.Networks = zone.NewNetworks(cfg.DNS.Networks)
	}
	rp := &runningProber{p: probe.New(pcfg, a.table, newChecker, a.log, cfg.DNS.DefaultCluster), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	rp.stop = cancel
	go func() {
		defer close(rp.done)
		rp.p.Run(ctx)
	}()
	return rp, nil
}

func (rp *runningProber) halt() {
	rp.stop()
	<-rp.done
}

// Reload applies a new configuration without dropping a query. New hosts
// are probed aside until every one has been probed once; then the new
// prober takes over publishing in one step and the old one stops. Keys
// declared to apply on restart (the listeners' settings: see
// internal/config/keys.go) keep their running values; a change to them is
// logged and otherwise ignored.
func (a *App) Reload(cfg *config.Config) error {
	err := a.reload(cfg)
	if err != nil {
		a.RejectReload(err)
	} else {
		a.metrics.Reloaded(nil)
	}
	return err
}

func (a *App) reload(cfg *config.Config) error {
	if err := Check(cfg); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.running == nil {
		return errors.New("not started")
	}
	next, onRestart := config.Reload(a.cfg, cfg)
	if len(onRestart) > 0 {
		a.log.Warn("reload: these settings take effect only on restart; applying the others", "keys", onRestart)
	}
	probing := a.effective(next)
	a.warnConfig(probing)
	if err := a.swap(probing); err != nil {
		return err
	}
	unchanged := reflect.DeepEqual(*a.cfg, *next)
	a.cfg = next
	a.metrics.SetClusters(clusterNames(next))
	// A change to restart-only keys alone leaves next equal to the
	// running configuration, yet the event must still say a restart is
	// pending, or a watcher reads "nothing changed" and never restarts.
	restart := ""
	if len(onRestart) > 0 {
		restart = "; on restart only: " + strings.Join(onRestart, ", ")
	}
	if unchanged {
		// The hosts are the same ones, so the prober that took over
		// reports no host as changed (probe.logChanges): this one line
		// is all such a reload logs.
		a.log.Info("configuration reloaded", "clusters", len(next.Clusters), "changed", "nothing")
		a.events.Append(events.Event{Reason: ReloadApplied, Detail: "nothing changed" + restart})
		return nil
	}
	a.log.Info("configuration reloaded", "clusters", len(next.Clusters), "interval", next.Probe.Interval.String())
	a.events.Append(events.Event{Reason: ReloadApplied, Detail: "applied" + restart})
	return nil
}

// swap starts a prober for probing aside, waits until it has probed every
// host once (waitProbed), then lets it publish and stops the running one.
// The caller holds a.mu.
func (a *App) swap(probing *config.Config) error {
	next, err := a.startProber(probing, false, nil)
	if err != nil {
		return err
	}
	if err := waitProbed(next.p, 2*probing.Probe.Timeout+reloadStall); err != nil {
		next.halt()
		return err
	}
	old := a.running
	old.p.Deactivate()
	// The new prober inherits what the old one learned (identity, newest
	// timeline, timeline histories, WAL clocks) before it publishes.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	next.p.Activate(ctx, old.p)
	cancel()
	a.prober.Store(next.p)
	a.running = next
	a.probing = probing
	old.halt()
	return nil
}

// Stop lets in-flight queries finish (bounded by ctx), then stops the
// probes and closes their connections, and writes the state file one last
// time. Stopping a stopped App does nothing.
func (a *App) Stop(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopped {
		return nil
	}
	a.stopped = true
	// Blocked GET /v1/events requests end now, or the HTTP shutdown
	// below would wait for them.
	a.events.Close()
	var err error
	if a.dns != nil {
		err = a.dns.Shutdown(ctx)
	}
	if a.http != nil {
		err = errors.Join(err, a.http.Shutdown(ctx))
	}
	if a.stopDisco != nil {
		a.stopDisco()
		a.mu.Unlock() // the loop may be waiting for the lock
		<-a.discoDone
		a.mu.Lock()
		a.stopDisco = nil
	}
	if a.running != nil {
		a.running.halt()
		a.running = nil
	}
	a.stopState() // after the prober: its last report is written
	a.status.halt()
	return err
}

// Run starts the App and serves until ctx is done or a server fails, then
// shuts down within ShutdownTimeout.
func (a *App) Run(ctx context.Context) error {
	if err := a.Start(); err != nil {
		return err
	}
	var httpErr <-chan error
	if a.http != nil {
		httpErr = a.http.Err()
	}
	var serveErr error
	select {
	case <-ctx.Done():
		a.log.Info("shutting down")
	case serveErr = <-a.dns.Err():
		a.log.Error("DNS server stopped", "error", serveErr)
	case serveErr = <-httpErr:
		a.log.Error("HTTP server stopped", "error", serveErr)
	}
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	return errors.Join(serveErr, a.Stop(sctx))
}

// SetVersion is the version pgdns_build_info reports (cmd/pgdns's).
func (a *App) SetVersion(version string) { a.metrics.SetVersion(version) }

// clusterNames are the names of cfg's clusters.
func clusterNames(cfg *config.Config) []string {
	names := make([]string, 0, len(cfg.Clusters))
	for _, c := range cfg.Clusters {
		names = append(names, c.Name)
	}
	return names
}

// nameServers converts dns.nameservers for the handler.
func nameServers(list []config.NameServer) []dnsserver.NameServer {
	var out []dnsserver.NameServer
	for _, ns := range list {
		out = append(out, dnsserver.NameServer{Name: ns.Name, Addrs: ns.Addrs})
	}
	return out
}

// listenIPs is the address answered for ns.<zone> when dns.nameservers is
// empty: the listen host when it is one IP (config.ListenIP).
func listenIPs(listen string) []netip.Addr {
	if ip, ok := config.ListenIP(listen); ok {
		return []netip.Addr{ip}
	}
	return nil
}

// warnConfig logs what is valid but likely wrong in cfg (the hosts Patroni
// reported included), one line each, as pgdns -check prints it.
func (a *App) warnConfig(cfg *config.Config) {
	for _, w := range cfg.Warnings() {
		a.log.Warn(w)
	}
}
