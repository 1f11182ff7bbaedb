// Command demo starts a throwaway PostgreSQL primary with two streaming
// replicas on 127.0.0.11-13:5432 and pgdns in front of them on
// 127.0.0.1:5353, prints commands to try, and tears everything down on
// Ctrl-C. It is what `make demo` runs.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdns/pgdns/internal/app"
	"github.com/pgdns/pgdns/internal/config"
	"github.com/pgdns/pgdns/internal/pgtest"
)

const configYAML = `dns:
  listen: %s
  zone: db.local
  ttl: 1
http:
  listen: %s
probe:
  interval: 250ms
  timeout: 1s
  max_fails: 3
  dsn: "user=pgdns dbname=postgres sslmode=disable"
clusters:
  main:
    hosts: [%s]
`

// options say where the demo runs; the flags' defaults are what the
// README shows.
type options struct {
	dns, http string   // pgdns's DNS and HTTP addresses
	ips       []string // the primary's, then the replicas'

	// switchover asks for one switchover per value (SIGUSR1, which `make
	// demo-switchover` sends).
	switchover <-chan struct{}
}

func main() {
	if os.Getenv(reaperEnv) == "1" {
		reap(os.Args[1])
		return
	}
	// `make demo | tee demo.log` and Ctrl-C: tee dies first, and a write
	// to the broken pipe must not kill the demo before it stops
	// PostgreSQL. What it would have said is lost; the teardown is not.
	signal.Ignore(syscall.SIGPIPE)
	dnsAddr := flag.String("dns", "127.0.0.1:5353", "pgdns DNS address")
	httpAddr := flag.String("http", "127.0.0.1:8080", "pgdns HTTP address")
	ips := flag.String("ips", "127.0.0.11,127.0.0.12,127.0.0.13", "addresses of the primary and the replicas (port 5432)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runReaped(ctx, options{dns: *dnsAddr, http: *httpAddr, ips: strings.Split(*ips, ","), switchover: onSignal(syscall.SIGUSR1)}); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// onSignal turns every sig into a value (one waiting at most).
func onSignal(sig os.Signal) <-chan struct{} {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sig)
	out := make(chan struct{}, 1)
	go func() {
		for range ch {
			select {
			case out <- struct{}{}:
			default:
			}
		}
	}()
	return out
}

// runReaped runs the demo with everything it writes in a folder of its
// own, which a reaper process cleans when the demo ends, even by kill -9.
func runReaped(ctx context.Context, o options) error {
	dir, err := os.MkdirTemp("", "pgdns-demo-")
	if err != nil {
		return err
	}
	// The servers run as postgres when we are root: they must reach it.
	if err := os.Chmod(dir, 0o755); err != nil {
		os.Remove(dir)
		return err
	}
	r, err := startReaper(dir)
	if err != nil {
		os.Remove(dir)
		return err
	}
	defer r.finish()
	// pgtest's cluster and the config file go under dir.
	if err := os.Setenv("TMPDIR", dir); err != nil {
		return err
	}
	return run(ctx, o, os.Stdout)
}

func run(ctx context.Context, o options, out io.Writer) error {
	fmt.Fprintf(out, "starting a primary and %d streaming replicas on %s (port 5432) ...\n", len(o.ips)-1, strings.Join(o.ips, ", "))
	if err := addressesFree(o); err != nil {
		return err
	}
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	pg, err := pgtest.Start(startCtx, pgtest.Options{IPs: o.ips})
	if err != nil {
		if ctx.Err() != nil {
			// Ctrl-C during start-up: Start has stopped what it started
			// and removed its files.
			fmt.Fprintln(out, "interrupted; PostgreSQL stopped and its files removed")
			return nil
		}
		return err
	}
	defer func() {
		fmt.Fprintln(out, "stopping PostgreSQL and removing its files ...")
		pg.Close()
	}()

	// pgdns probes as the role docs/operating.md ("The probe role") asks for; the replicas copy it.
	if err := execOnce(ctx, pg.Nodes[0].DSN(), probeRole); err != nil {
		return fmt.Errorf("creating the probe role: %w", err)
	}

	var hosts []string
	for _, n := range pg.Nodes {
		hosts = append(hosts, n.Addr())
	}
	dir, err := os.MkdirTemp("", "pgdns-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "pgdns.yaml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(configYAML, o.dns, o.http, strings.Join(hosts, ", "))), 0o600); err != nil {
		return err
	}
	cfg, err := config.Load(path, os.Environ())
	if err != nil {
		return err
	}
	a, err := app.New(cfg, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err != nil {
		return err
	}

	// A gentle writer, so that replicas have something to replay, on
	// whichever node is the primary.
	c := &demoCluster{pg: pg}
	go write(ctx, c.primaryDSN)
	go c.switchovers(ctx, o.switchover, out)

	host, port, _ := net.SplitHostPort(o.dns)
	dig := "dig @" + host + " -p " + port
	fmt.Fprintf(out, `
pgdns is answering for db.local on %[1]s, HTTP on %[2]s (config: %[3]s). Try:

  %[4]s +short primary.db.local
  %[4]s +short replica.db.local
  %[4]s lag-50ms.replica.db.local
  %[4]s +short TXT any.db.local
  %[4]s lsn-ffffffff-0.replica.db.local      # NOERROR, no address
  %[4]s lsn-ffffffff-0.prefer-replica.db.local  # falls back to the primary

  curl -s %[2]s/v1/hosts
  curl -s '%[2]s/v1/resolve?name=lag-50ms.replica'
  curl -s %[2]s/replica            # pg-status compatible

  psql "host=$(%[4]s +short primary.db.local) user=postgres" -c 'SELECT inet_server_addr(), pg_is_in_recovery()'
  psql "host=%[5]s user=postgres" -c 'SELECT pg_current_wal_insert_lsn()'   # then ask for lsn-HI-LO.replica.db.local

  %-19[6]s# from a second terminal: stop the primary, promote a replica, the old primary rejoins
  %-19[7]s# (make demo-switchover does the same, to every demo on the machine)

Ctrl-C stops pgdns and PostgreSQL.

`, o.dns, o.http, path, dig, o.ips[0], "kill -USR1 "+strconv.Itoa(os.Getpid()), "")
	return a.Run(ctx)
}

// probeRole is docs/operating.md's "The probe role".
const probeRole = "CREATE ROLE pgdns LOGIN; GRANT pg_monitor TO pgdns"

// execOnce runs sql once on the server at dsn.
func execOnce(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// write inserts a row every 500ms into the primary dsn names until ctx is
// done; after a failure (a switchover) it connects again.
func write(ctx context.Context, dsn func() string) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if conn == nil {
			var err error
			if conn, err = pgx.Connect(ctx, dsn()); err != nil {
				conn = nil
				continue
			}
			if _, err := conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS demo (id bigserial PRIMARY KEY, at timestamptz DEFAULT now())"); err != nil {
				conn.Close(context.Background())
				conn = nil
				continue
			}
		}
		if _, err := conn.Exec(ctx, "INSERT INTO demo DEFAULT VALUES"); err != nil {
			conn.Close(context.Background())
			conn = nil
		}
	}
}

// addressesFree says which of the demo's addresses something else holds
// (often a demo still running in another terminal), before any server is
// started: PostgreSQL's own complaint would end up in a log.
func addressesFree(o options) error {
	addrs := []string{o.dns, o.http}
	for _, ip := range o.ips {
		addrs = append(addrs, net.JoinHostPort(ip, "5432"))
	}
	for _, a := range addrs {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			return fmt.Errorf("%s is in use (another demo still running? `ss -ltnp 'sport = %s'` names the process): %w", a, a[strings.LastIndex(a, ":")+1:], err)
		}
		ln.Close()
	}
	return nil
}
