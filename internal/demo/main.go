// Command demo starts a throwaway PostgreSQL primary with two streaming
// replicas on 127.0.0.11-13:5432 and pgdns in front of them on
// 127.0.0.1:5353, prints commands to try, and tears everything down on
// Ctrl-C. It is what `make demo` runs.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdns/pgdns/internal/app"
	"github.com/pgdns/pgdns/internal/config"
	"github.com/pgdns/pgdns/internal/pgtest"
)

const configYAML = `dns:
  listen: 127.0.0.1:5353
  zone: db.local
  ttl: 1
http:
  listen: 127.0.0.1:8080
probe:
  interval: 250ms
  timeout: 1s
  max_fails: 3
  dsn: "user=postgres dbname=postgres sslmode=disable"
clusters:
  main:
    hosts: [%s]
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	fmt.Println("starting a primary and two streaming replicas on 127.0.0.11-13:5432 ...")
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	pg, err := pgtest.Start(startCtx, pgtest.Options{IPs: []string{"127.0.0.11", "127.0.0.12", "127.0.0.13"}})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("stopping PostgreSQL and removing its files ...")
		pg.Close()
	}()

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
	if err := os.WriteFile(path, []byte(fmt.Sprintf(configYAML, strings.Join(hosts, ", "))), 0o600); err != nil {
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

	// A gentle writer, so that replicas have something to replay.
	go write(ctx, pg.Nodes[0].DSN())

	fmt.Printf(`
pgdns is answering for db.local on 127.0.0.1:5353, HTTP on 127.0.0.1:8080 (config: %s). Try:

  dig @127.0.0.1 -p 5353 +short primary.db.local
  dig @127.0.0.1 -p 5353 +short replica.db.local
  dig @127.0.0.1 -p 5353 lag-50ms.replica.db.local
  dig @127.0.0.1 -p 5353 +short TXT any.db.local
  dig @127.0.0.1 -p 5353 lsn-ffffffff-0.replica.db.local      # NOERROR, no address
  dig @127.0.0.1 -p 5353 lsn-ffffffff-0.prefer-replica.db.local  # falls back to the primary

  curl -s localhost:8080/v1/hosts
  curl -s 'localhost:8080/v1/resolve?name=lag-50ms.replica'
  curl -s localhost:8080/replica            # pg-status compatible

  psql "host=$(dig @127.0.0.1 -p 5353 +short primary.db.local) user=postgres" -c 'SELECT inet_server_addr(), pg_is_in_recovery()'
  psql "host=127.0.0.11 user=postgres" -c 'SELECT pg_current_wal_insert_lsn()'   # then ask for lsn-HI-LO.replica.db.local

Ctrl-C stops pgdns and PostgreSQL.

`, path)
	return a.Run(ctx)
}

// write inserts a row every 500ms until ctx is done.
func write(ctx context.Context, dsn string) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS demo (id bigserial PRIMARY KEY, at timestamptz DEFAULT now())"); err != nil {
		return
	}
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := conn.Exec(ctx, "INSERT INTO demo DEFAULT VALUES"); err != nil {
				return
			}
		}
	}
}
