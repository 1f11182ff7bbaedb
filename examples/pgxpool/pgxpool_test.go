package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdns/pgdns/internal/app/apptest"
	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// startPgdns runs pgdns in-process in front of pg, listening on dnsIP,
// and returns its DNS address.
func startPgdns(t *testing.T, pg *pgtest.Cluster, dnsIP string) string {
	t.Helper()
	a, _, _ := apptest.Start(t, fmt.Sprintf(`
dns: {listen: "%s:0"}
http: {listen: ""}
probe: {interval: 250ms, dsn: "user=postgres dbname=postgres sslmode=disable"}
clusters:
  main:
    hosts: [%s, %s, %s]
`, dnsIP, pg.Nodes[0].Addr(), pg.Nodes[1].Addr(), pg.Nodes[2].Addr()))
	return a.DNSAddr()
}

// use is one query through a pool: when it started and ended, and the
// server that answered it.
type use struct {
	start, end time.Time
	server     string
	inRecovery bool
	err        error
}

func through(pool *pgxpool.Pool, sql string) use {
	u := use{start: time.Now()}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	u.err = pool.QueryRow(ctx, sql).Scan(&u.server, &u.inRecovery)
	u.end = time.Now()
	return u
}

// throughAll takes n connections from pool at once and runs sql on each,
// so that every connection of a pool of n is used: one query after
// another would reuse the connection released last, again and again.
func throughAll(pool *pgxpool.Pool, n int, sql string) []use {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out := make([]use, 0, n)
	var held []*pgxpool.Conn
	defer func() {
		for _, c := range held {
			c.Release()
		}
	}()
	for range n {
		u := use{start: time.Now()}
		c, err := pool.Acquire(ctx)
		if err == nil {
			held = append(held, c)
			err = c.QueryRow(ctx, sql).Scan(&u.server, &u.inRecovery)
		}
		u.err, u.end = err, time.Now()
		out = append(out, u)
	}
	return out
}

// holdAll takes n connections from pool at once, so that the pool opens
// n, and returns the servers they are connected to.
func holdAll(t *testing.T, pool *pgxpool.Pool, n int) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	servers := map[string]int{}
	var held []*pgxpool.Conn
	defer func() {
		for _, c := range held {
			c.Release()
		}
	}()
	for range n {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		var s string
		if err := c.QueryRow(ctx, "SELECT host(inet_server_addr())").Scan(&s); err != nil {
			t.Fatal(err)
		}
		servers[s]++
	}
	return servers
}

// The example's pools across a switchover (stop the primary -m fast,
// promote a replica, point the other replica at it): the write pool
// reaches the new primary, and the read pool lets go of the promoted
// replica's connections within RoleCheckEvery. The pools' lifetime is
// long, so what moves them is the role check and the failed connections,
// never a connection's age.
func TestPoolsFollowASwitchover(t *testing.T) {
	t.Parallel()
	b := pgtest.Addrs(t)
	p, r1, r2 := b.IP(11), b.IP(12), b.IP(13)
	pg := pgtest.New(t, pgtest.Options{IPs: []string{p, r1, r2}})
	pg.Nodes[0].Exec(t, "CREATE TABLE pool_writes (id bigserial PRIMARY KEY)")
	resolver := NewResolver(startPgdns(t, pg, b.IP(53)))

	const checkEvery, poolSize = 500 * time.Millisecond, 6
	ctx := context.Background()
	opts := Options{DSN: "user=postgres dbname=postgres sslmode=disable connect_timeout=2", Resolver: resolver,
		MaxConns: poolSize, MaxConnLifetime: 10 * time.Minute, RoleCheckEvery: checkEvery}
	wo, ro := opts, opts
	wo.Name, wo.Role = "primary.db.local", Primary
	ro.Name, ro.Role = "replica.db.local", Replica
	writes, err := NewPool(ctx, wo)
	if err != nil {
		t.Fatal(err)
	}
	defer writes.Close()
	reads, err := NewPool(ctx, ro)
	if err != nil {
		t.Fatal(err)
	}
	defer reads.Close()

	const writeSQL = "INSERT INTO pool_writes DEFAULT VALUES RETURNING host(inet_server_addr()), pg_is_in_recovery()"
	const readSQL = "SELECT host(inet_server_addr()), pg_is_in_recovery()"
	var w, r use
	if !testkit.Poll(20*time.Second, 50*time.Millisecond, func() bool { // until pgdns has probed every host
		w, r = through(writes, writeSQL), through(reads, readSQL)
		return w.err == nil && r.err == nil
	}) {
		t.Fatalf("pools not ready: write %v, read %v", w.err, r.err)
	}
	// Fill both pools; the read pool must hold connections to both
	// replicas. It shuffles replica.db.local's answers, so a pool of 6
	// lands on one replica only once in 32 tries: then it starts over.
	if s := holdAll(t, writes, poolSize); s[p] != poolSize {
		t.Fatalf("write pool connected to %v, want %s only", s, p)
	}
	for try := 1; ; try++ {
		s := holdAll(t, reads, poolSize)
		if s[r1] > 0 && s[r2] > 0 && s[r1]+s[r2] == poolSize {
			break
		}
		if try == 20 {
			t.Fatalf("read pool connected to %v, want both replicas", s)
		}
		reads.Reset()
	}

	// The switchover runs while both pools are in use, every 20 ms, until
	// each has served 60 queries from where it belongs after the role
	// check has had its time.
	type switchover struct {
		stopped, promoted time.Time
		err               error
	}
	done := make(chan switchover, 1)
	go func() {
		var sw switchover
		defer func() { done <- sw }()
		time.Sleep(500 * time.Millisecond)
		if sw.err = pg.Nodes[0].Stop(ctx, "fast"); sw.err != nil {
			return
		}
		sw.stopped = time.Now()
		if sw.err = pg.Nodes[1].Promote(ctx); sw.err != nil {
			return
		}
		sw.promoted = time.Now()
		sw.err = pg.Nodes[2].FollowContext(ctx, pg.Nodes[1])
	}()
	var sw *switchover
	var ws, rs []use
	okWrites, okReads := 0, 0
	for deadline := time.Now().Add(40 * time.Second); sw == nil || okWrites < 60 || okReads < 60; {
		if time.Now().After(deadline) {
			t.Fatalf("after 40 s: switchover %+v, %d writes on %s, %d reads on %s since it settled", sw, okWrites, r1, okReads, r2)
		}
		select {
		case s := <-done:
			if s.err != nil {
				t.Fatal(s.err)
			}
			sw = &s
		default:
		}
		w, r := throughAll(writes, poolSize, writeSQL), throughAll(reads, poolSize, readSQL)
		ws, rs = append(ws, w...), append(rs, r...)
		if sw != nil {
			settled := sw.promoted.Add(checkEvery + time.Second)
			for _, w := range w {
				if w.err == nil && w.server == r1 && w.start.After(settled) {
					okWrites++
				}
			}
			for _, r := range r {
				if r.err == nil && r.server == r2 && r.start.After(settled) {
					okReads++
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopped, promoted := sw.stopped, sw.promoted
	settled := promoted.Add(checkEvery + time.Second)

	var firstWrite, lastReadOnPromoted time.Time
	writeErrs, readErrs, readsOnPromoted := 0, 0, 0
	for _, w := range ws {
		switch {
		case w.err != nil:
			writeErrs++
		case w.server == p:
			if w.end.After(stopped) {
				t.Errorf("a write on the old primary %s ended at %s, after it stopped", p, w.end.Format("15:04:05.000"))
			}
		case w.server == r1 && !w.inRecovery:
			if firstWrite.IsZero() {
				firstWrite = w.end
			}
		default:
			t.Errorf("a write landed on %s (in recovery: %v)", w.server, w.inRecovery)
		}
	}
	for _, r := range rs {
		switch {
		case r.err != nil:
			readErrs++
		case !r.inRecovery:
			readsOnPromoted++
			lastReadOnPromoted = r.end
			if r.start.After(settled) {
				t.Errorf("a read that started %v after the promote was served by %s, no longer a replica",
					r.start.Sub(promoted).Round(time.Millisecond), r.server)
			}
		}
	}
	after := firstWrite.Sub(promoted)
	t.Logf("pgxpool switchover: first write on the new primary %v after pg_ctl promote returned (%v after the old primary stopped); "+
		"%d of %d writes failed; %d reads served by the promoted replica, the last %v after the promote; %d of %d reads failed",
		after.Round(time.Millisecond), firstWrite.Sub(stopped).Round(time.Millisecond), writeErrs, len(ws),
		readsOnPromoted, max(0, lastReadOnPromoted.Sub(promoted)).Round(time.Millisecond), readErrs, len(rs))
	if after > 10*time.Second {
		t.Errorf("writes reached the new primary %v after the promote, want within 10 s", after)
	}
}
