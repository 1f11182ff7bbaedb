package probe

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/zone"
)

// closingCalls is how often the session of c ran the closing statement,
// and its full probe statements, by pg_prepared_statements (each run of a
// prepared statement is one plan: generic or custom).
func closingCalls(t *testing.T, ctx context.Context, c *pgChecker) (light, full int) {
	t.Helper()
	row, err := sessionQuery(ctx, c, "SELECT coalesce(sum(generic_plans + custom_plans) FILTER (WHERE name = '"+ClosingStatement+"'), 0), "+
		"coalesce(sum(generic_plans + custom_plans) FILTER (WHERE name <> '"+ClosingStatement+"'), 0) FROM pg_prepared_statements WHERE name LIKE 'pgdns_probe%'")
	if err != nil || len(row) != 2 {
		t.Fatalf("the probe's statements in its session: %q, %v", row, err)
	}
	light, err1 := strconv.Atoi(row[0])
	full, err2 := strconv.Atoi(row[1])
	if err1 != nil || err2 != nil {
		t.Fatalf("runs %q", row)
	}
	return light, full
}

// A closing probe of a primary whose session's last probe was a full one
// runs the closing statement alone, on that session (its own prepared
// statement, prepared by the first light probe), and reads the insert
// position the primary has at that moment: after WAL written since the
// full probe. A session that lost the statement prepares it again in the
// same probe; a new session (after a restart) is probed in full first,
// and light again after. A replica is never probed lightly.
func TestClosingProbeIsLight(t *testing.T) {
	t.Parallel()
	cl := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(2)})
	primary := cl.Nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := pgCheckerOf(t, "user=postgres dbname=postgres sslmode=disable", primary.Addr())
	full, err := c.Check(ctx)
	if err != nil || full.InRecovery {
		t.Fatalf("the primary's full probe: %+v, %v", full, err)
	}
	writer := primary.Conn(t)
	if _, err := writer.Exec(ctx, "CREATE TABLE w (v text)"); err != nil {
		t.Fatal(err)
	}
	light0, full0 := closingCalls(t, ctx, c)
	for i := range 4 {
		var before string
		if err := writer.QueryRow(ctx, "INSERT INTO w SELECT repeat('x', 2000) FROM generate_series(1, 10) RETURNING pg_current_wal_insert_lsn()::text").Scan(&before); err != nil {
			t.Fatal(err)
		}
		lsn, err := zone.ParseLSN(before)
		if err != nil {
			t.Fatal(err)
		}
		var s Sample
		light, err := c.checkClosing(ctx, 10*time.Second, &s)
		if err != nil || !light {
			t.Fatalf("closing probe %d: light %v, %v", i, light, err)
		}
		if want := lsn.PageBoundary(full.WALBlockSize, full.WALSegmentSize); s.InsertLSN < want || s.InsertLSN <= full.InsertLSN {
			t.Fatalf("closing probe %d read %v, before it the primary was at %v (%v at the full probe)", i, s.InsertLSN, want, full.InsertLSN)
		}
		if s.Start.IsZero() || s.End.Before(s.Start) || s.StartedAt != full.StartedAt || s.SystemID != full.SystemID || s.Timeline != full.Timeline {
			t.Fatalf("closing probe %d: %+v, of the session whose full probe read %+v", i, s, full)
		}
	}
	light1, full1 := closingCalls(t, ctx, c)
	if light1-light0 != 4 || full1 != full0 {
		t.Fatalf("4 closing probes ran the closing statement %d times and the full ones %d times, want 4 and 0", light1-light0, full1-full0)
	}

	// Deallocated under the probe: prepared again, in the same probe.
	if _, err := sessionQuery(ctx, c, "DEALLOCATE ALL"); err != nil {
		t.Fatal(err)
	}
	var s Sample
	if light, err := c.checkClosing(ctx, 10*time.Second, &s); err != nil || !light || s.InsertLSN == 0 {
		t.Fatalf("the closing probe after DEALLOCATE ALL: light %v, %+v, %v", light, s, err)
	}

	// A new session: its first probe is full, the next light again.
	if err := primary.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	if err := primary.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var light bool
	testkit.Poll(30*time.Second, 50*time.Millisecond, func() bool {
		light, err = c.checkClosing(ctx, 10*time.Second, &s)
		return err == nil
	})
	if err != nil || light || s.Standbys == nil || s.Timeline != 1 {
		t.Fatalf("the closing probe on a new session: light %v, %+v, %v; want a full sample", light, s, err)
	}
	if light, err := c.checkClosing(ctx, 10*time.Second, &s); err != nil || !light {
		t.Fatalf("the next closing probe of the new session: light %v, %v", light, err)
	}
	if l, _ := closingCalls(t, ctx, c); l != 1 {
		t.Fatalf("the new session ran the closing statement %d times, want 1", l)
	}

	// A replica: full probes only.
	rc := pgCheckerOf(t, "user=postgres dbname=postgres sslmode=disable", cl.Nodes[1].Addr())
	for range 2 {
		if light, err := rc.checkClosing(ctx, 10*time.Second, &s); err != nil || light || !s.InRecovery {
			t.Fatalf("a closing probe of the replica: light %v, %+v, %v; want a full replica sample", light, s, err)
		}
	}
}

// A light probe on an open session allocates nothing, as a full one
// (TestCheckAllocations).
func TestClosingProbeAllocations(t *testing.T) {
	_, ch, ctx := probedNode(t, 60*time.Second)
	c := ch.(*pgChecker)
	var s Sample
	if light, err := c.checkClosing(ctx, 30*time.Second, &s); err != nil || !light { // prepares the statement
		t.Fatalf("light %v, %v", light, err)
	}
	allocs := testkit.FewestAllocs(100, 0, func() {
		if light, err := checkProbe(ctx, c, 30*time.Second, &s, true); err != nil || !light { // as a host's goroutine probes
			t.Fatalf("light %v, %v", light, err)
		}
	})
	if allocs > 0 {
		t.Fatalf("a light probe allocated %.1f times, want none", allocs)
	}
}

// writesAfter is the checker of a replica that, after each probe, writes
// WAL on the primary (through write) and reads where the primary's insert
// position then is (after the write's last row): the round's closing
// probe of the primary, kicked when this result is in, starts after that. It holds gate from before the
// probe until the write is done, so that no probe of the primary
// (gatedPrimary) runs meanwhile: one that started after the sample ended
// and before the write, which pgdns may rightly take for the sample's byte
// bound (lag.go: p_j), would have read a position below the one the write
// returned.
type writesAfter struct {
	Checker
	write func(ctx context.Context) (zone.LSN, error)
	gate  *sync.Mutex

	mu    sync.Mutex
	after map[time.Time]zone.LSN // by the sample's End: the primary's position read after it
}

func (w *writesAfter) Check(ctx context.Context) (Sample, error) {
	w.gate.Lock()
	defer w.gate.Unlock()
	s, err := w.Checker.Check(ctx)
	if err != nil {
		return s, err
	}
	lsn, werr := w.write(ctx)
	if werr == nil {
		w.mu.Lock()
		w.after[s.End] = lsn
		w.mu.Unlock()
	}
	return s, err
}

// gatedPrimary is the primary's checker, whose every probe, full or
// light, runs holding gate: none starts while the replica's probe and the
// write after it (writesAfter) are under way, and none is under way when
// they start. The rest is the checker's own (waiter, Watcher).
type gatedPrimary struct {
	*pgChecker
	gate *sync.Mutex
}

func (g *gatedPrimary) Check(ctx context.Context) (Sample, error) {
	g.gate.Lock()
	defer g.gate.Unlock()
	return g.pgChecker.Check(ctx)
}

func (g *gatedPrimary) checkInto(ctx context.Context, timeout time.Duration, s *Sample) error {
	g.gate.Lock()
	defer g.gate.Unlock()
	return g.pgChecker.checkInto(ctx, timeout, s)
}

func (g *gatedPrimary) checkClosing(ctx context.Context, timeout time.Duration, s *Sample) (bool, error) {
	g.gate.Lock()
	defer g.gate.Unlock()
	return g.pgChecker.checkClosing(ctx, timeout, s)
}

// A round's closing probe is the light statement, and the byte bounds of
// the round's replica still come from it, right: with the replica's
// replay paused and the primary written to between each replica sample
// and the closing probe, every byte bound published is at least the
// primary's position read after the write, less the replica's replay
// position (it comes from a primary read that started after the
// replica's sample ended: no primary probe runs between the sample and
// the write, so such a read started after the write), and bounds are published while the primary's
// own facts are still those of its last full probe, older than the
// replica's sample (the closing probe refreshes no fact but the WAL
// clock; it is not the primary's next tick that gives the bound). The
// primary's row never loses what only a full probe reads (role,
// timeline, its standby). At the server (pg_stat_statements), the
// primary ran the closing statement, and its full statements only as
// often as it was probed otherwise.
func TestClosingProbeBoundsBytesRight(t *testing.T) {
	t.Parallel()
	cl := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(2), Conf: []string{"shared_preload_libraries = 'pg_stat_statements'"}})
	primary, replica := cl.Nodes[0], cl.Nodes[1]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := primary.Conn(t)
	if _, err := admin.Exec(ctx, "CREATE EXTENSION pg_stat_statements; CREATE TABLE w (v text)"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, 50*time.Millisecond, "the replica has the table", func() (error, bool) {
		_, err := replica.Conn(t).Exec(ctx, "SELECT FROM w")
		return err, err == nil
	})
	if _, err := replica.Conn(t).Exec(ctx, "SELECT pg_wal_replay_pause()"); err != nil {
		t.Fatal(err)
	}
	writer := primary.Conn(t)
	newChecker, err := PostgresCheckers("user=postgres dbname=postgres sslmode=disable", AdmissionInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	var gate sync.Mutex
	wa := &writesAfter{gate: &gate, after: map[time.Time]zone.LSN{}, write: func(ctx context.Context) (zone.LSN, error) {
		var s string
		if err := writer.QueryRow(ctx, "WITH i AS (INSERT INTO w SELECT repeat('x', 1000) FROM generate_series(1, 8) RETURNING pg_current_wal_insert_lsn() AS l) SELECT max(l)::text FROM i").Scan(&s); err != nil {
			return 0, err
		}
		return zone.ParseLSN(s)
	}}
	checkers := func(addr string) (Checker, error) {
		c, err := newChecker(addr)
		if err != nil {
			return c, err
		}
		if addr == primary.Addr() {
			return &gatedPrimary{pgChecker: c.(*pgChecker), gate: &gate}, nil
		}
		wa.Checker = c
		return wa, nil
	}
	const interval = 200 * time.Millisecond
	cfg := Config{Interval: interval, Timeout: 5 * time.Second, MaxFails: 3,
		Clusters: []ClusterConfig{{Name: "main", Hosts: []string{primary.Addr(), replica.Addr()}}}}
	var (
		mu                   sync.Mutex
		closingAsked, bounds int
		framed               int // bounds published while the primary's last full probe was before the replica's
		primaryProbes        int
		wrong                []string
		block, segment       uint64 = 8192, 16 << 20
	)
	cfg.Hooks.Probes = func(_ string, why ProbeCause, n int) {
		mu.Lock()
		defer mu.Unlock()
		if why == ProbeClosing {
			closingAsked += n
		}
	}
	cfg.Hooks.ProbeDone = func(_, addr string, _ time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		if addr == primary.Addr() && err == nil {
			primaryProbes++
		}
	}
	cfg.Hooks.Published = func(_, next *zone.Snapshot) {
		if !next.Ready || len(next.Clusters) != 1 {
			return
		}
		c := next.Clusters[0]
		p, r := &c.Hosts[0], &c.Hosts[1]
		mu.Lock()
		defer mu.Unlock()
		if p.Seen && (p.Role != zone.RolePrimary || p.Timeline != 1 || len(p.Standbys) != 1) {
			wrong = append(wrong, "the primary as published: "+p.Role.String()+", timeline "+strconv.Itoa(int(p.Timeline))+", "+strconv.Itoa(len(p.Standbys))+" standbys")
		}
		if r.Role != zone.RoleReplica || !r.BytesKnown {
			return
		}
		wa.mu.Lock()
		after, ok := wa.after[r.ProbedAt]
		wa.mu.Unlock()
		if !ok {
			return
		}
		bounds++
		if want := uint64(after.PageBoundary(block, segment) - r.ReplayLSN); r.LagBytes < want {
			wrong = append(wrong, "byte bound "+strconv.FormatUint(r.LagBytes, 10)+" of replay "+r.ReplayLSN.String()+
				", the primary at "+after.String()+" after the sample: want at least "+strconv.FormatUint(want, 10))
		}
		if p.ProbedAt.Before(r.ProbedAt) {
			framed++
		}
	}
	p := New(cfg, zone.NewTable(), checkers, slog.New(slog.NewTextHandler(io.Discard, nil)), "main")
	pctx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { p.Run(pctx); close(stopped) }()
	defer func() { stop(); <-stopped }()
	waitReady(t, p, 60*time.Second)
	statements := func() (light, full int) {
		t.Helper()
		// The full statements' constants are $n in pg_stat_statements's
		// text: they are told by what they read (the closing statement
		// reads no receive position).
		if err := admin.QueryRow(ctx, "SELECT coalesce(sum(calls) FILTER (WHERE query = $1), 0), "+
			"coalesce(sum(calls) FILTER (WHERE query LIKE '%pg_current_wal_insert_lsn%pg_last_wal_receive_lsn%'), 0) FROM pg_stat_statements",
			ClosingSQL).Scan(&light, &full); err != nil {
			t.Fatal(err)
		}
		return light, full
	}
	time.Sleep(4 * time.Second) // past the first rounds, and the flux of the start
	mu.Lock()
	probes0, asked0 := primaryProbes, closingAsked
	mu.Unlock()
	light0, full0 := statements()
	time.Sleep(6 * time.Second)
	light1, full1 := statements()
	mu.Lock()
	probes1, asked1 := primaryProbes, closingAsked
	mu.Unlock()
	stop()
	<-stopped

	mu.Lock()
	defer mu.Unlock()
	for i, w := range wrong {
		if i < 5 {
			t.Error(w)
		}
	}
	if len(wrong) > 0 {
		t.Fatalf("%d wrong snapshots", len(wrong))
	}
	light, full, probes, asked := light1-light0, full1-full0, probes1-probes0, asked1-asked0
	t.Logf("over 6s: %d closing probes asked, the primary probed %d times: %d closing statements, %d full ones; %d byte bounds checked, %d before the primary's next full probe",
		asked, probes, light, full, bounds, framed)
	if asked < 5 || light < asked/2 || light > asked {
		t.Errorf("%d closing probes asked, %d closing statements run: want most of them", asked, light)
	}
	// Every probe of the primary ran one statement or the other (a probe
	// under way at either edge of the window may fall on one side only).
	if d := light + full - probes; d < -2 || d > 2 {
		t.Errorf("the primary was probed %d times, and ran %d closing and %d full statements", probes, light, full)
	}
	if bounds < 5 || framed < 3 {
		t.Errorf("%d byte bounds checked, %d of them published before the primary's next full probe: want at least 5 and 3", bounds, framed)
	}
}
