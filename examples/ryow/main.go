// Command ryow is an example of a Go program that finds its PostgreSQL
// hosts through pgdns, with pgx: writes through primary.<zone>, reads with
// bounded lag through lag-…replica.<zone>, and reads that must see the
// program's own last write through lsn-…-tN.prefer-replica.<zone>.
//
//	go run ./examples/ryow -dns 127.0.0.1:5353 -rounds 50
//
// It writes a row, then reads it back right away, as a web application
// would after a POST, and reports where each read was served.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	dnsAddr := flag.String("dns", "127.0.0.1:5353", "address of pgdns")
	zone := flag.String("zone", "db.local", "the zone pgdns serves")
	dsn := flag.String("dsn", "user=postgres dbname=postgres sslmode=disable", "libpq keyword/value string without host")
	rounds := flag.Int("rounds", 50, "write-then-read rounds")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := &Client{DSN: *dsn, Zone: *zone, Resolver: NewResolver(*dnsAddr)}
	r, err := Run(ctx, c, *rounds)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ryow:", err)
		os.Exit(1)
	}
	fmt.Printf("%d rounds: %d reads of the own write served by a replica, %d by the primary, %d stale\n",
		r.Rounds, r.ByReplica, r.Rounds-r.ByReplica, r.Stale)
	fmt.Printf("bounded-lag read (lag-1000ms) served by %s\n", r.FreshFrom)
}

// Report says where reads were served.
type Report struct {
	Rounds, ByReplica, Stale int
	FreshFrom                string
	Primary                  string
}

// Run writes a row and reads it back through read-your-writes rounds
// times, then does one bounded-lag read.
func Run(ctx context.Context, c *Client, rounds int) (Report, error) {
	r := Report{Rounds: rounds}
	w, err := c.Primary(ctx)
	if err != nil {
		return r, fmt.Errorf("connect to the primary: %w", err)
	}
	defer w.Close(ctx)
	if err := w.QueryRow(ctx, "SELECT host(inet_server_addr())").Scan(&r.Primary); err != nil {
		return r, err
	}
	if _, err := w.Exec(ctx, "CREATE TABLE IF NOT EXISTS ryow_example (id bigserial PRIMARY KEY, note text)"); err != nil {
		return r, err
	}
	for range rounds {
		var id int64
		if err := w.QueryRow(ctx, "INSERT INTO ryow_example (note) VALUES ('hello') RETURNING id").Scan(&id); err != nil {
			return r, err
		}
		token, err := WriteToken(ctx, w)
		if err != nil {
			return r, err
		}
		read, err := c.ReadYourWrites(ctx, token)
		if err != nil {
			return r, fmt.Errorf("read-your-writes connect: %w", err)
		}
		var server string
		var seen bool
		err = read.QueryRow(ctx, "SELECT host(inet_server_addr()), EXISTS (SELECT 1 FROM ryow_example WHERE id = $1)", id).Scan(&server, &seen)
		read.Close(ctx)
		if err != nil {
			return r, err
		}
		if !seen {
			r.Stale++
		}
		if server != r.Primary {
			r.ByReplica++
		}
	}
	fresh, err := c.Fresh(ctx, time.Second)
	if err != nil {
		return r, fmt.Errorf("bounded-lag connect: %w", err)
	}
	defer fresh.Close(ctx)
	if err := fresh.QueryRow(ctx, "SELECT host(inet_server_addr())").Scan(&r.FreshFrom); err != nil {
		return r, err
	}
	return r, nil
}
