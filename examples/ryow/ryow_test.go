package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/app/apptest"
	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// The example, run as a user would run it: a real cluster, a real pgdns,
// pgx resolving through it.
func TestExampleAgainstRealCluster(t *testing.T) {
	ips := pgtest.Addrs(t).IPs(3)
	pg := pgtest.New(t, pgtest.Options{IPs: ips})
	a, _, _ := apptest.Start(t, fmt.Sprintf(`
dns: {listen: "127.0.0.1:0", lsn_wait: 20ms}
http: {listen: ""}
probe: {interval: 250ms, dsn: "user=postgres dbname=postgres sslmode=disable"}
clusters:
  main:
    hosts: [%s, %s, %s]
`, pg.Nodes[0].Addr(), pg.Nodes[1].Addr(), pg.Nodes[2].Addr()))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := &Client{DSN: "user=postgres dbname=postgres sslmode=disable", Zone: "db.local", Resolver: NewResolver(a.DNSAddr())}
	var r Report
	var err error
	testkit.Poll(10*time.Second, 100*time.Millisecond, func() bool { // until the first probe round is in
		r, err = Run(ctx, c, 50)
		return err == nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", r)
	if r.Primary != ips[0] || r.Stale != 0 {
		t.Fatalf("report %+v", r)
	}
	if r.ByReplica < r.Rounds/2 {
		t.Errorf("only %d of %d own-write reads were served by a replica", r.ByReplica, r.Rounds)
	}
	if r.FreshFrom != ips[1] && r.FreshFrom != ips[2] {
		t.Errorf("bounded-lag read served by %s, want a replica", r.FreshFrom)
	}

	// The token carries the timeline, and a token no host provably has
	// (here a timeline above every one the cluster has: in no host's WAL)
	// fails to connect instead of falling back to the primary.
	w, err := c.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	token, err := WriteToken(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(token), "-t1") {
		t.Fatalf("token %s carries no timeline (want -t1)", token)
	}
	unprovable := Token(strings.TrimSuffix(string(token), "-t1") + "-t9")
	if conn, err := c.ReadYourWrites(ctx, unprovable); err == nil {
		var server string
		_ = conn.QueryRow(ctx, "SELECT host(inet_server_addr())").Scan(&server)
		conn.Close(ctx)
		t.Fatalf("ReadYourWrites(%s) connected to %s: a token no host has must fail, not fall back to the primary", unprovable, server)
	}
}
