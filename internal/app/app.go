// Package app wires pgdns together: configuration to probe, probe to the
// zone table, the table to the DNS server. cmd/pgdns runs it; tests start
// the whole program in-process the same way.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/pgdns/pgdns/dnsserver"
	"github.com/pgdns/pgdns/httpapi"
	"github.com/pgdns/pgdns/internal/config"
	"github.com/pgdns/pgdns/internal/metrics"
	"github.com/pgdns/pgdns/probe"
	"github.com/pgdns/pgdns/zone"
)

// ShutdownTimeout bounds how long in-flight queries may take to finish.
const ShutdownTimeout = 5 * time.Second

// App is a configured pgdns.
type App struct {
	cfg        *config.Config
	log        *slog.Logger
	table      *zone.Table
	metrics    *metrics.Metrics
	newChecker probe.NewCheckerFunc

	dns       *dnsserver.Server
	http      *httpapi.Server // nil when http.listen is ""
	stopProbe context.CancelFunc
	probeDone sync.WaitGroup
}

// Check validates what config.Load cannot: that the probe DSN parses and
// that every configured feature is available. -check runs it too.
func Check(cfg *config.Config) error {
	var errs []error
	if _, err := probe.PostgresCheckers(cfg.Probe.DSN); err != nil {
		errs = append(errs, fmt.Errorf("probe.dsn %w", err))
	}
	for _, c := range cfg.Clusters {
		if len(c.Patroni) > 0 {
			errs = append(errs, fmt.Errorf("clusters.%s.patroni: member discovery from Patroni is not available in this version; list the hosts in clusters.%s.hosts", c.Name, c.Name))
		}
	}
	return errors.Join(errs...)
}

// New returns an App for cfg. It does not bind or probe yet.
func New(cfg *config.Config, log *slog.Logger) (*App, error) {
	if err := Check(cfg); err != nil {
		return nil, err
	}
	newChecker, err := probe.PostgresCheckers(cfg.Probe.DSN)
	if err != nil {
		return nil, err
	}
	table := zone.NewTable()
	return &App{cfg: cfg, log: log, table: table, metrics: metrics.New(table), newChecker: newChecker}, nil
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
	pcfg := probe.Config{
		Interval: a.cfg.Probe.Interval, Timeout: a.cfg.Probe.Timeout, MaxFails: a.cfg.Probe.MaxFails,
		Hooks: probe.Hooks{ProbeDone: a.metrics.ProbeDone, RoleChanged: a.metrics.RoleChanged, SplitBrain: a.metrics.SplitBrain},
	}
	for _, c := range a.cfg.Clusters {
		pcfg.Clusters = append(pcfg.Clusters, probe.ClusterConfig{Name: c.Name, Hosts: c.Hosts, AsyncOnly: c.AsyncOnly})
	}
	prober := probe.New(pcfg, a.table, a.newChecker, a.log, a.cfg.DNS.DefaultCluster)

	h := dnsserver.NewHandler(dnsserver.Config{
		Zone:          a.cfg.DNS.Zone,
		TTL:           a.cfg.DNS.TTL,
		NameServerIPs: listenIPs(a.cfg.DNS.Listen),
		OnAnswer:      a.metrics.DNSAnswer,
		LSNWait:       a.cfg.DNS.LSNWait,
		Refresh:       prober.Refresh,
	}, a.table, a.log)
	srv, err := dnsserver.Start(a.cfg.DNS.Listen, h)
	if err != nil {
		return fmt.Errorf("dns.listen %q: %w", a.cfg.DNS.Listen, err)
	}
	a.dns = srv
	if a.cfg.HTTP.Listen != "" {
		api := httpapi.New(httpapi.Config{
			Zone:            a.cfg.DNS.Zone,
			SyncMaxLag:      a.cfg.HTTP.SyncMaxLag,
			SyncMaxLagBytes: a.cfg.HTTP.SyncMaxLagBytes,
			Metrics:         a.metrics.Handler(),
			OnRequest:       a.metrics.HTTPRequest,
		}, a.table, a.log)
		hs, err := httpapi.Start(a.cfg.HTTP.Listen, api, a.log)
		if err != nil {
			_ = srv.Shutdown(context.Background())
			return fmt.Errorf("http.listen %q: %w", a.cfg.HTTP.Listen, err)
		}
		a.http = hs
	}

	ctx, cancel := context.WithCancel(context.Background())
	a.stopProbe = cancel
	a.probeDone.Add(1)
	go func() {
		defer a.probeDone.Done()
		prober.Run(ctx)
	}()
	a.log.Info("pgdns started", "dns", srv.Addr(), "http", a.HTTPAddr(), "zone", a.cfg.DNS.Zone,
		"clusters", len(a.cfg.Clusters), "interval", a.cfg.Probe.Interval.String())
	return nil
}

// Stop lets in-flight queries finish (bounded by ctx), then stops the
// probes and closes their connections.
func (a *App) Stop(ctx context.Context) error {
	var err error
	if a.dns != nil {
		err = a.dns.Shutdown(ctx)
	}
	if a.http != nil {
		err = errors.Join(err, a.http.Shutdown(ctx))
	}
	if a.stopProbe != nil {
		a.stopProbe()
		a.probeDone.Wait()
	}
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

// listenIPs is the address answered for ns.<zone>: the listen host when it
// is a specific IP.
func listenIPs(listen string) []netip.Addr {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || ip.IsUnspecified() {
		return nil
	}
	return []netip.Addr{ip}
}
