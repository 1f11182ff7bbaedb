// Command pgdns is an authoritative DNS server that tells applications
// which PostgreSQL host to connect to: primary.db.local, replica.db.local,
// lag-50ms.replica.db.local, lsn-0-3000060.replica.db.local.
//
//	pgdns -config FILE          serve DNS and HTTP until SIGINT/SIGTERM
//	pgdns -config FILE -check   validate the config, print what is wrong
//	pgdns -config FILE -reset-state   forget what pgdns learned (state.path)
//	pgdns events -http ADDR [-follow] print the events of a running pgdns
//	pgdns -version
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/pgdns/pgdns/internal/app"
	"github.com/pgdns/pgdns/internal/config"
)

// version is set at build time: -ldflags "-X main.version=...".
var version = "dev"

func main() {
	tuneGC(os.Getenv)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit code.
func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "events" {
		return runEvents(ctx, args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("pgdns", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "configs/pgdns.yaml", "path of the YAML configuration file")
	check := fs.Bool("check", false, "validate the configuration, print every problem, and exit 0 or 1")
	showVersion := fs.Bool("version", false, "print the version and exit")
	resetState := fs.Bool("reset-state", false, "remove the state file (state.path): forget every cluster's identity, newest timeline and timeline histories; then exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "pgdns: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *showVersion {
		fmt.Fprintln(stdout, "pgdns", version)
		return 0
	}

	cfg, err := config.Load(*configPath, environ)
	if err == nil {
		err = app.Check(cfg)
	}
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintln(stderr, "pgdns: config:", line)
		}
		return 1
	}
	if *check {
		for _, w := range cfg.Warnings() {
			fmt.Fprintln(stdout, "pgdns: warning:", w)
		}
		clusters := "clusters"
		if len(cfg.Clusters) == 1 {
			clusters = "cluster"
		}
		fmt.Fprintf(stdout, "%s: OK (%d %s, zone %s)\n", *configPath, len(cfg.Clusters), clusters, cfg.DNS.Zone)
		return 0
	}

	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	// Which build runs, first in every log (a container's included).
	log.Info("pgdns", "version", version, "config", *configPath)
	if *resetState {
		if err := app.ResetState(cfg.State.Path, log); err != nil {
			fmt.Fprintln(stderr, "pgdns:", err)
			return 1
		}
		return 0
	}
	a, err := app.New(cfg, log)
	if err != nil {
		fmt.Fprintln(stderr, "pgdns:", err)
		return 1
	}
	a.SetVersion(version)
	serve, release := stopping(ctx, log)
	defer release()
	go notifyReady(serve, a, log)
	go reloadOnHangup(serve, a, *configPath, environ, log)
	if err := a.Run(serve); err != nil {
		fmt.Fprintln(stderr, "pgdns:", err)
		return 1
	}
	return 0
}

// reloadOnHangup re-reads the config file on every SIGHUP. A bad file is
// rejected and logged, and the running configuration stays. Once pgdns is
// ready, the service manager hears RELOADING=1 and then READY=1 again
// (before, notifyReady sends the first READY=1).
func reloadOnHangup(ctx context.Context, a *app.App, path string, environ []string, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		log.Info("SIGHUP: reloading the configuration", "file", path)
		ready := isReady(a)
		if ready {
			notify(log, daemon.SdNotifyReloading+"\n"+daemon.SdNotifyMonotonicUsec())
		}
		cfg, err := config.Load(path, environ)
		if err == nil {
			err = a.Reload(cfg) // records its own refusal as an event
		} else {
			a.RejectReload(err)
		}
		if err != nil {
			log.Error("reload rejected; the running configuration stays", "error", strings.ReplaceAll(err.Error(), "\n", "; "))
		}
		if ready {
			notify(log, daemon.SdNotifyReady)
		}
	}
}
