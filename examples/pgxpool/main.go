// Command pgxpool is an example of pgx pools that follow a switchover
// through pgdns: a write pool on primary.<zone> and a read pool on
// replica.<zone>, each with a maximum connection lifetime and a check that
// drops a connection whose server no longer has the pool's role
// (pg_is_in_recovery()).
//
//	go run ./examples/pgxpool -dns 127.0.0.1:5353 -http 127.0.0.1:8080 -for 60s
//
// It writes and reads every 100 ms and prints where each went; switch the
// primary over meanwhile (make demo) and watch both pools move. With
// -http, a goroutine also watches pgdns's events (Watch) and resets both
// pools the moment the cluster's primary moves, so writes leave an old
// primary that is still writable at once instead of at MaxConnLifetime.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

func main() {
	dnsAddr := flag.String("dns", "127.0.0.1:5353", "address of pgdns")
	zone := flag.String("zone", "db.local", "the zone pgdns serves")
	dsn := flag.String("dsn", "user=postgres dbname=postgres sslmode=disable", "libpq keyword/value string without host")
	span := flag.Duration("for", time.Minute, "how long to run (at most 1h)")
	api := flag.String("http", "", "pgdns's HTTP API (host:port): watch its events and reset the pools when the primary moves; \"\" = no watch")
	cluster := flag.String("cluster", "main", "the cluster whose primary the watch follows")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), min(*span, time.Hour))
	defer cancel()
	if err := run(ctx, *dsn, *zone, NewResolver(*dnsAddr), *api, *cluster); err != nil {
		fmt.Fprintln(os.Stderr, "pgxpool:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dsn, zone string, resolver *net.Resolver, api, cluster string) error {
	writes, err := NewPool(ctx, Options{DSN: dsn, Name: "primary." + zone, Role: Primary, Resolver: resolver})
	if err != nil {
		return err
	}
	defer writes.Close()
	reads, err := NewPool(ctx, Options{DSN: dsn, Name: "replica." + zone, Role: Replica, Resolver: resolver})
	if err != nil {
		return err
	}
	defer reads.Close()
	if api != "" {
		if !strings.Contains(api, "://") {
			api = "http://" + api
		}
		go Watch(ctx, api, cluster, func(e Event) {
			fmt.Printf("%s %s %s -> %s: resetting both pools\n", time.Now().Format("15:04:05.000"), e.Reason, e.From, e.To)
			writes.Reset()
			reads.Reset()
		})
	}
	if _, err := writes.Exec(ctx, "CREATE TABLE IF NOT EXISTS pgxpool_example (id bigserial PRIMARY KEY)"); err != nil {
		return err
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		w := serverOf(ctx, writes, "INSERT INTO pgxpool_example DEFAULT VALUES RETURNING host(inet_server_addr())")
		r := serverOf(ctx, reads, "SELECT host(inet_server_addr())")
		fmt.Printf("%s write→%s read→%s\n", time.Now().Format("15:04:05.000"), w, r)
	}
}

// serverOf runs sql, which returns a server address, with a deadline.
func serverOf(ctx context.Context, pool *pgxpool.Pool, sql string) string {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var s string
	if err := pool.QueryRow(ctx, sql).Scan(&s); err != nil {
		return "error: " + err.Error()
	}
	return s
}
