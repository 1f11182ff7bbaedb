package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdns/pgdns/internal/app"
	"github.com/pgdns/pgdns/internal/app/apptest"
	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// The measurement of BENCHMARKS.md ("pgxpool: the events watch"):
//
//	go test -run TestWatchResetsThePool -v ./examples/pgxpool -args -watch-runs 5
//
// runs both cases that many times, each on a cluster of its own, and
// logs the medians. Without -args, one run of the case the watch is for.
var (
	watchRuns     = flag.Int("watch-runs", 1, "switchovers per case in TestWatchResetsThePool; above 1 both cases run and medians are logged")
	watchLifetime = flag.Duration("watch-lifetime", 5*time.Second, "MaxConnLifetime of both pools in TestWatchResetsThePool")
)

// startPgdnsHTTP runs pgdns in-process in front of pg with its HTTP API on.
func startPgdnsHTTP(t *testing.T, pg *pgtest.Cluster, dnsIP string) *app.App {
	t.Helper()
	a, _, _ := apptest.Start(t, fmt.Sprintf(`
dns: {listen: "%s:0"}
http: {listen: "127.0.0.1:0"}
probe: {interval: 250ms, dsn: "user=postgres dbname=postgres sslmode=disable"}
clusters:
  main:
    hosts: [%s, %s]
`, dnsIP, pg.Nodes[0].Addr(), pg.Nodes[1].Addr()))
	return a
}

// watchRun is one switchover with two write pools through the same pgdns,
// one watched (Watch resets it) and one not: how long after pg_ctl promote
// returned each first committed a write on the new primary.
type watchRun struct {
	watched, unwatched time.Duration
}

// switchoverWithWatch promotes the replica of a new cluster of two, the
// old primary stopped first (-m fast) or left running and writable (cut
// off from its replica, not fenced: the case no role check sees, since it
// is still not in recovery), while both pools write every 20 ms.
func switchoverWithWatch(t *testing.T, leaveRunning bool) watchRun {
	b := pgtest.Addrs(t)
	pg := pgtest.New(t, pgtest.Options{IPs: b.IPs(2)})
	old, next := pg.Nodes[0], pg.Nodes[1]
	old.Exec(t, "CREATE TABLE pool_writes (id bigserial PRIMARY KEY)")
	a := startPgdnsHTTP(t, pg, b.IP(53))
	opts := Options{DSN: "user=postgres dbname=postgres sslmode=disable connect_timeout=2", Resolver: NewResolver(a.DNSAddr()),
		Name: "primary.db.local", Role: Primary, MaxConns: 4, MaxConnLifetime: *watchLifetime, RoleCheckEvery: 500 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watched, err := NewPool(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer watched.Close()
	unwatched, err := NewPool(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer unwatched.Close()

	var mu sync.Mutex
	var resets []time.Time
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		Watch(ctx, "http://"+a.HTTPAddr(), "main", func(e Event) {
			watched.Reset()
			mu.Lock()
			resets = append(resets, time.Now())
			mu.Unlock()
		})
	}()
	defer func() { cancel(); <-watchDone }()

	const writeSQL = "INSERT INTO pool_writes DEFAULT VALUES RETURNING host(inet_server_addr()), pg_is_in_recovery()"
	if !testkit.Poll(20*time.Second, 50*time.Millisecond, func() bool {
		w, u := through(watched, writeSQL), through(unwatched, writeSQL)
		return w.err == nil && u.err == nil && w.server == old.IP && u.server == old.IP
	}) {
		t.Fatal("the pools never wrote on the primary")
	}
	for _, pool := range []*pgxpool.Pool{watched, unwatched} {
		if s := holdAll(t, pool, 4); s[old.IP] != 4 {
			t.Fatalf("a pool connected to %v, want %s only", s, old.IP)
		}
	}
	testkit.Eventually(t, 10*time.Second, 5*time.Millisecond, "the watch waiting in pgdns", func() (int, bool) {
		return a.Events().Waiters(), a.Events().Waiters() == 1
	})

	if !leaveRunning {
		if err := old.Stop(ctx, "fast"); err != nil {
			t.Fatal(err)
		}
	}
	promoting := time.Now()
	if err := next.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	var firstW, firstU time.Time
	var ws []use
	for deadline := promoted.Add(*watchLifetime + 30*time.Second); firstW.IsZero() || firstU.IsZero(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%v after the promote: watched pool on the new primary at %v, unwatched at %v", time.Since(promoted), firstW, firstU)
		}
		// Both at once, so that neither pool goes first.
		var w, u use
		var both sync.WaitGroup
		both.Go(func() { w = through(watched, writeSQL) })
		both.Go(func() { u = through(unwatched, writeSQL) })
		both.Wait()
		ws = append(ws, w)
		if firstW.IsZero() && w.err == nil && w.server == next.IP && !w.inRecovery {
			firstW = w.end
		}
		if firstU.IsZero() && u.err == nil && u.server == next.IP && !u.inRecovery {
			firstU = u.end
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// The reset of the switchover (the watch may also have reset the pool
	// at pgdns's start, when the primary appeared).
	i := slices.IndexFunc(resets, func(r time.Time) bool { return r.After(promoting) })
	if i < 0 {
		t.Fatal("the watch never reset the pool after the promote")
	}
	reset := resets[i]
	// Once reset, the watched pool writes nowhere but on the new primary.
	for _, w := range ws {
		if w.err == nil && w.server == old.IP && w.start.After(reset) {
			t.Errorf("a write that started %v after the reset landed on the old primary", w.start.Sub(reset).Round(time.Millisecond))
		}
	}
	return watchRun{watched: firstW.Sub(promoted), unwatched: firstU.Sub(promoted)}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestWatchResetsThePool: a pool whose goroutine watches pgdns's events
// (Watch, a blocking GET /v1/events) and calls pool.Reset() when the
// primary moves leaves an old primary that is still writable as soon as
// pgdns answers the new one, where the same pool without the watch writes
// on to the old primary until its connections reach MaxConnLifetime; and
// after the reset no write lands on the old primary. With -watch-runs N
// (above), the cases and the medians of BENCHMARKS.md.
func TestWatchResetsThePool(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name         string
		leaveRunning bool
	}{{"old primary left running", true}, {"old primary stopped", false}}
	if *watchRuns <= 1 {
		cases = cases[:1]
	}
	for _, c := range cases {
		var watched, unwatched []time.Duration
		for i := range max(*watchRuns, 1) {
			t.Run(fmt.Sprintf("%s/%d", c.name, i+1), func(t *testing.T) {
				r := switchoverWithWatch(t, c.leaveRunning)
				t.Logf("first write on the new primary after pg_ctl promote returned: with the watch %v, without %v",
					r.watched.Round(time.Millisecond), r.unwatched.Round(time.Millisecond))
				if c.leaveRunning && r.watched >= r.unwatched {
					t.Errorf("the watched pool reached the new primary after the unwatched one (%v, %v): the watch did nothing", r.watched, r.unwatched)
				}
				watched, unwatched = append(watched, r.watched), append(unwatched, r.unwatched)
			})
		}
		if len(watched) > 1 {
			t.Logf("%s, %d runs, MaxConnLifetime %v: median with the watch %v (runs %v), without %v (runs %v)", c.name, len(watched), *watchLifetime,
				median(watched).Round(time.Millisecond), rounded(watched), median(unwatched).Round(time.Millisecond), rounded(unwatched))
		}
	}
}

func rounded(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}
