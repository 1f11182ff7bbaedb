package test

// Tests of the superseded-timeline rules and of honest lag bounds (issue
// 11, items 1 to 3), against real PostgreSQL.

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// A primary superseded by a promotion is never answered again, not even
// when its successor goes away; a replica still streaming from it is not
// answered by any replica name, whatever its position.
func TestSupersededPrimaryNeverReturns(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	old, promoted, stale := e.pg.Nodes[0], e.pg.Nodes[1], e.pg.Nodes[2]
	ctx := context.Background()

	// A split brain as a late fence leaves it: the old primary keeps
	// running and taking writes; one replica still follows it.
	if err := promoted.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", []string{promoted.IP})
	written := e.insertAndTakeLSN(t, promoted) // a write on the new timeline
	// Writes on the old primary carry the stale replica's timeline-1
	// position past the new write's, so a position check alone would pass.
	old.Exec(t, "CREATE TABLE IF NOT EXISTS big (v text); INSERT INTO big SELECT repeat('x', 1000) FROM generate_series(1, 2000)")
	testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "the stale replica to replay past the new write's position", func() (bool, bool) {
		var past bool
		stale.Query(t, fmt.Sprintf("SELECT pg_last_wal_replay_lsn() >= '%s'::pg_lsn", strings.Replace(written, "-", "/", 1)), &past)
		return past, past
	})
	names := []string{"replica.db.local.", "lag-10s.replica.db.local.", "bytes-1gb.replica.db.local.",
		"lsn-" + written + ".replica.db.local.", "prefer-replica.db.local.", "any.db.local."}
	for range 20 {
		for _, name := range names {
			if got := e.ips(t, name); slices.Contains(got, stale.IP) || slices.Contains(got, old.IP) {
				t.Fatalf("%s answered a host of the superseded timeline 1: %v", name, got)
			}
		}
		time.Sleep(30 * time.Millisecond)
	}
	_, why := e.get(t, http.DefaultClient, "/v1/resolve?name=replica", "")
	if !strings.Contains(why, `"addr":"`+stale.Addr()+`","reason":"unknown: replica on timeline 1, superseded by timeline 2"`) {
		t.Errorf("/v1/resolve does not say why the stale replica is out: %s", why)
	}

	// The successor goes away. Its predecessor is still superseded.
	if err := promoted.Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", nil)
	for range 50 {
		if got := e.ips(t, "primary.db.local."); len(got) != 0 {
			t.Fatalf("primary.db.local answered %v after the newest timeline's primary stopped", got)
		}
		time.Sleep(30 * time.Millisecond)
	}
	_, hosts := e.get(t, http.DefaultClient, "/v1/hosts", "")
	if !strings.Contains(hosts, "writable on timeline 1, superseded by timeline 2") {
		t.Errorf("/v1/hosts does not say why the old primary is out: %s", hosts)
	}

	// A reload starts a new prober, which sees only the old primary and
	// its replica on timeline 1. It inherits what the old prober knew.
	next := *e.cfg
	next.Probe.Interval = 150 * time.Millisecond
	if err := e.app.Reload(&next); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		if got := e.ips(t, "primary.db.local."); len(got) != 0 {
			t.Fatalf("after a reload primary.db.local answered %v: the newest timeline was forgotten", got)
		}
		time.Sleep(30 * time.Millisecond)
	}
}

// A replica that applies WAL 200ms late never passes lag-50ms under steady
// writes, with or without read-your-writes lookups forcing extra probe
// rounds; a replica that keeps up does. Before lag bounds were proven, a
// replica sampled after the primary's newest sample got lag 0 (measured:
// 64 of 174 lookups answered a 150ms-late replica while lsn- lookups ran).
func TestDelayedReplicaNeverPassesATighterLag(t *testing.T) {
	t.Parallel()
	ips := pgtest.Addrs(t).IPs(3)
	pg := pgtest.New(t, pgtest.Options{IPs: ips})
	primary, prompt, delayed := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	delayed.Exec(t, "ALTER SYSTEM SET recovery_min_apply_delay = '200ms'")
	delayed.Exec(t, "SELECT pg_reload_conf()")
	e := attach(t, pg, envOptions{LSNWait: "20ms", Interval: delayedProbeInterval.String()})
	conn := primary.Conn(t)
	if _, err := conn.Exec(context.Background(), "CREATE TABLE t (id serial PRIMARY KEY, v text)"); err != nil {
		t.Fatal(err)
	}
	// Dense writes (every 5ms): the delayed replica then always lacks
	// about 200ms of commits. With sparse writes it would not: right after
	// a write it lacks only that write, and its data is truly fresh.
	writes := writeTicks(t, conn, 20000, 5*time.Millisecond)
	e.waitFor(t, "lag-10s.replica.db.local.", []string{prompt.IP, delayed.IP})
	// Until the writes flow the delayed replica has everything there is.
	e.waitFor(t, "lag-100ms.replica.db.local.", []string{prompt.IP})

	check := func(phase string) {
		t.Helper()
		promptSeen, delayedSeen := 0, 0
		for range 150 {
			asked := time.Now()
			got := e.ips(t, "lag-50ms.replica.db.local.")
			answered := time.Now()
			if slices.Contains(got, delayed.IP) {
				// Wrong only if the replica surely lacked a commit
				// older than 50ms plus the one probe interval of a
				// sample's age that lag bounds tolerate (zone's
				// lagAt; docs/probe.md: a replica that stalls right
				// after it is seen is answered until the next
				// probe): one made after answered−200ms (the apply
				// delay holds it back) and before
				// asked−50ms−interval. When the writer stalled that
				// long (a loaded machine), the delayed replica had
				// everything but the newest commits as of its last
				// probe, and its bound truly held: pgdns was right to
				// answer it.
				if began, ended, ok := writes.within(answered.Add(-200*time.Millisecond+applyDelaySlack), asked.Add(-50*time.Millisecond-delayedProbeInterval-applyDelaySlack)); ok {
					t.Fatalf("%s: lag-50ms.replica answered the replica 200ms behind while it lacked a commit made %v–%v before the lookup (evidence %q)",
						phase, asked.Sub(ended).Round(time.Millisecond), asked.Sub(began).Round(time.Millisecond), e.txt(t, "any.db.local."))
				}
				delayedSeen++
			}
			if slices.Contains(got, prompt.IP) {
				promptSeen++
			}
			time.Sleep(15 * time.Millisecond)
		}
		t.Logf("%s: the prompt replica passed lag-50ms in %d of 150 lookups; the delayed one in %d, each after the writer had stalled", phase, promptSeen, delayedSeen)
		if promptSeen == 0 {
			t.Errorf("%s: the replica that keeps up never passed lag-50ms", phase)
		}
	}
	check("probe rounds alone")

	// Read-your-writes lookups no replica can satisfy yet: each asks for a
	// refresh round, bounded in count and time. The token is ahead of the
	// primary by more than the writes add meanwhile, and reachable (an LSN
	// beyond the primary's reach asks for none: lsn_e2e_test.go).
	name := "lsn-" + aheadOfPrimary(t, primary, 1<<20) + ".replica.db.local."
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := 0; i < 2000 && ctx.Err() == nil; i++ {
				query(t, "udp", e.app.DNSAddr(), name, 1)
			}
		}()
	}
	check("with lsn- refreshes")
	cancel()
	for range 4 {
		<-done
	}
}

// delayedProbeInterval is the delayed-replica test's probe.interval: the
// sample age a lag bound tolerates, so the shorter it is the more of the
// 200ms apply delay the test can judge (a 30ms window at 100ms).
const delayedProbeInterval = 100 * time.Millisecond

// applyDelaySlack keeps the delayed-replica test's judgement off the edges of its
// window: the apply delay is timed by the server's clock against commit
// timestamps, the window by the test's own readings around each call.
const applyDelaySlack = 10 * time.Millisecond

// commitLog records when each of a writer's commits was under way: it began
// at or after began and was committed by ended.
type commitLog struct {
	mu    sync.Mutex
	spans [][2]time.Time
}

func (l *commitLog) add(began, ended time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.spans = append(l.spans, [2]time.Time{began, ended})
}

// within returns a commit made wholly inside (from, to), if there is one.
func (l *commitLog) within(from, to time.Time) (began, ended time.Time, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, sp := range l.spans {
		if sp[0].After(from) && sp[1].Before(to) {
			return sp[0], sp[1], true
		}
	}
	return time.Time{}, time.Time{}, false
}

// writeTicks inserts a row into t (id serial, v text) on conn every
// pause, at most n times, until the test ends, and logs when each commit
// began and was acknowledged.
func writeTicks(t *testing.T, conn *pgx.Conn, n int, pause time.Duration) *commitLog {
	t.Helper()
	writes := &commitLog{}
	writesDone := make(chan struct{})
	writesCtx, stopWrites := context.WithCancel(context.Background())
	go func() {
		defer close(writesDone)
		for i := 0; i < n && writesCtx.Err() == nil; i++ {
			began := time.Now()
			if _, err := conn.Exec(writesCtx, "INSERT INTO t (v) VALUES ('tick')"); err != nil {
				return
			}
			writes.add(began, time.Now())
			time.Sleep(pause)
		}
	}()
	t.Cleanup(func() { stopWrites(); <-writesDone })
	return writes
}
