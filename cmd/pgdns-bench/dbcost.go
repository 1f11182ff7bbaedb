package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/probe"
)

// dbCostResult is what a probe costs the database: the server CPU time of
// one execution of the probe's statement, measured on the backend that
// ran it (/proc/PID/schedstat, nanoseconds of CPU), on the real primary
// and a real replica.
type dbCostResult struct {
	stamp stamp
	execs int
	// The statement alone, run execs times on a session of its own: sent
	// as a simple query (planned every time, as pgdns did before it
	// prepared it) and prepared (planned once).
	simple, prepared [2]time.Duration // [0] primary, [1] replica
	// pgdns's own probe sessions (the 3-host instance, probe.interval
	// 250ms) over window: CPU per probe of each, and probes/s of each.
	window         time.Duration
	rest           [2]time.Duration
	restRate       [2]float64
	refresh        [2]time.Duration // the same under lsn- lookups of LSNs just written
	refreshRate    [2]float64
	refreshLookups float64 // lsn- lookups/s during it
	// A new session opened and closed at once, as pgdns's admission
	// check does under trust authentication, sessions times: the
	// postmaster's CPU and its exited children's (/proc/PID/stat, 10 ms
	// ticks) per session.
	sessions   int
	perSession time.Duration
}

// dbCostStep is dbCost as a step of the whole run.
func (b *bench) dbCostStep(ctx context.Context, r *report) (err error) {
	r.dbCost, err = b.dbCost(ctx)
	return err
}

// schedNS is a process's CPU time so far, in nanoseconds: the first field
// of /proc/PID/schedstat, exact where /proc/PID/stat counts 10 ms ticks.
func schedNS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, fmt.Errorf("/proc/%d/schedstat: empty", pid)
	}
	return strconv.ParseInt(f[0], 10, 64)
}

// dbCost measures what the probe costs the primary and the first replica
// of the bench's cluster, with the 3-host pgdns running.
func (b *bench) dbCost(ctx context.Context) (*dbCostResult, error) {
	res := &dbCostResult{stamp: b.stampNow(), execs: 1000, window: 10 * time.Second}
	nodes := [2]*pgtest.Node{b.pg.Nodes[0], b.pg.Nodes[1]}
	for i, n := range nodes {
		var err error
		if res.simple[i], res.prepared[i], err = statementCost(ctx, n, res.execs); err != nil {
			return nil, fmt.Errorf("%s: %w", n.Name, err)
		}
	}
	res.sessions = 300
	var err error
	if res.perSession, err = sessionCost(ctx, nodes[1], res.sessions); err != nil {
		return nil, fmt.Errorf("%s: %w", nodes[1].Name, err)
	}
	if res.rest, res.restRate, err = b.probeSessionCost(ctx, nodes, res.window); err != nil {
		return nil, err
	}
	// Under the refresh bound: writers on the primary each look up the
	// LSN they just wrote (lsn-….replica), which the last snapshot's
	// replicas have not reached: every lookup asks for a round of fresh
	// probes of the cluster, as often as dns.lsn_refresh_min_gap lets it.
	setup, err := pgxConnect(ctx, b.pg.Nodes[0].DSN())
	if err != nil {
		return nil, err
	}
	_, err = setup.Exec(ctx, "CREATE TABLE IF NOT EXISTS bench (id bigserial PRIMARY KEY, v text)")
	setup.Close(ctx)
	if err != nil {
		return nil, err
	}
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	var lookups atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		conn, err := pgxConnect(ctx, b.pg.Nodes[0].DSN())
		if err != nil {
			return nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Close(context.Background())
			c := &dns.Client{Timeout: time.Second}
			for lctx.Err() == nil {
				var lsn string
				if _, err := conn.Exec(lctx, "INSERT INTO bench (v) VALUES ('x')"); err != nil {
					errs <- err
					return
				}
				if err := conn.QueryRow(lctx, "SELECT lower(replace(pg_current_wal_insert_lsn()::text, '/', '-'))").Scan(&lsn); err != nil {
					errs <- err
					return
				}
				req := new(dns.Msg)
				req.SetQuestion("lsn-"+lsn+".replica.db.local.", dns.TypeA)
				if _, _, err := c.Exchange(req, b.addr.pgdnsDNS); err == nil {
					lookups.Add(1)
				}
			}
		}()
	}
	time.Sleep(time.Second) // the rounds under way
	n0, start := lookups.Load(), time.Now()
	res.refresh, res.refreshRate, err = b.probeSessionCost(ctx, nodes, res.window)
	res.refreshLookups = float64(lookups.Load()-n0) / time.Since(start).Seconds()
	stop()
	wg.Wait()
	if err != nil {
		return nil, err
	}
	select {
	case err := <-errs:
		if lctx.Err() == nil || !errors.Is(err, context.Canceled) {
			return nil, fmt.Errorf("writer: %w", err)
		}
	default:
	}
	return res, nil
}

// dbCostHeading starts the section on what a probe costs the database.
const dbCostHeading = "## What a probe costs the database"

// dbCostTarget is pgdns's bound on the server time one probe costs.
const dbCostTarget = 200 * time.Microsecond

func (d *dbCostResult) markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	us := func(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d.Nanoseconds())/1000) }
	worst := max(d.rest[0], d.rest[1], d.refresh[0], d.refresh[1])
	w("%s\n\n%s\n\n", dbCostHeading, d.stamp)
	w("Server CPU time per execution of the probe's statement, read from the backend that ran it (`/proc/PID/schedstat`), on the real primary and a real replica:\n\n")
	w("| | primary | replica |\n|---|---:|---:|\n")
	w("| the statement sent as a simple query (parsed and planned every time), %d times on a session of its own | %s | %s |\n", d.execs, us(d.simple[0]), us(d.simple[1]))
	w("| the statement prepared (planned once per session), %d times on a session of its own | %s | %s |\n", d.execs, us(d.prepared[0]), us(d.prepared[1]))
	w("| pgdns's probe session at rest (`probe.interval: 250ms`), over %v | %s (%.1f probes/s) | %s (%.1f probes/s) |\n", d.window, us(d.rest[0]), d.restRate[0], us(d.rest[1]), d.restRate[1])
	w("| pgdns's probe session under the `lsn-` refresh bound (%.0f lookups/s of LSNs just written, `dns.lsn_refresh_min_gap` default), over %v | %s (%.1f probes/s) | %s (%.1f probes/s) |\n\n", d.refreshLookups, d.window, us(d.refresh[0]), d.refreshRate[0], us(d.refresh[1]), d.refreshRate[1])
	w("Per probe of pgdns's own sessions, target ≤ %s: %s (the most: %s).\n\n", us(dbCostTarget), verdict(worst <= dbCostTarget), us(worst))
	w("Beside its probes, pgdns asks each host whether it still admits a new session (a server stopping smartly refuses new ones while the open one keeps working) once every 4 probes and at most once a second. A new session opened and closed at once, as that check does under trust authentication (with a password the check stops at the server's request for it, before the backend loads its caches), cost the replica %s of CPU (its postmaster's and the exited backends', `/proc/PID/stat`, over %d sessions in a row).\n\n", us(d.perSession), d.sessions)
	return b.String()
}

// statementCost runs the probe's statement execs times on a new session
// to n, first as a simple query, then prepared, and returns the server's
// CPU time per execution of each.
func statementCost(ctx context.Context, n *pgtest.Node, execs int) (simple, prepared time.Duration, err error) {
	pc, err := pgconn.Connect(ctx, n.DSN())
	if err != nil {
		return 0, 0, err
	}
	defer pc.Close(context.Background())
	rows, err := pc.Exec(ctx, "SELECT pg_backend_pid()").ReadAll()
	if err != nil {
		return 0, 0, err
	}
	pid, err := strconv.Atoi(string(rows[0].Rows[0][0]))
	if err != nil {
		return 0, 0, err
	}
	run := func(one func() error) (time.Duration, error) {
		if err := one(); err != nil { // warm the session's caches
			return 0, err
		}
		t0, err := schedNS(pid)
		if err != nil {
			return 0, err
		}
		for range execs {
			if err := one(); err != nil {
				return 0, err
			}
		}
		t1, err := schedNS(pid)
		return time.Duration((t1 - t0) / int64(execs)), err
	}
	if simple, err = run(func() error { _, err := pc.Exec(ctx, probe.ProbeSQL).ReadAll(); return err }); err != nil {
		return 0, 0, fmt.Errorf("simple query: %w", err)
	}
	sd, err := pc.Prepare(ctx, probe.ProbeStatement, probe.ProbeSQL, nil)
	if err != nil {
		return 0, 0, err
	}
	prepared, err = run(func() error { _, err := pc.ExecStatement(ctx, sd, nil, nil, nil).Close(); return err })
	return simple, prepared, err
}

// sessionCost opens and closes n sessions to node, one after the other,
// and returns the server CPU time each cost: the postmaster's (it forks
// the backend) and its children's that exited meanwhile.
func sessionCost(ctx context.Context, node *pgtest.Node, n int) (time.Duration, error) {
	pm, err := node.PostmasterPID()
	if err != nil {
		return 0, err
	}
	t0, err := familyTicks(pm)
	if err != nil {
		return 0, err
	}
	for range n {
		pc, err := pgconn.Connect(ctx, node.DSN())
		if err != nil {
			return 0, err
		}
		if err := pc.Close(ctx); err != nil {
			return 0, err
		}
	}
	time.Sleep(100 * time.Millisecond) // the last backends reaped
	t1, err := familyTicks(pm)
	return time.Duration(t1-t0) * 10 * time.Millisecond / time.Duration(n), err
}

// familyTicks is a process's CPU time and that of its children it has
// waited for, in clock ticks (utime, stime, cutime, cstime of
// /proc/PID/stat).
func familyTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+2:])
	var sum int64
	for _, i := range []int{11, 12, 13, 14} {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

// probeSessionCost reads, over window, the CPU time of the session the
// 3-host pgdns probes each of nodes on and that host's probes, and
// returns the CPU time per probe and the probes/s of each.
func (b *bench) probeSessionCost(ctx context.Context, nodes [2]*pgtest.Node, window time.Duration) (per [2]time.Duration, rate [2]float64, err error) {
	var pids [2]int
	var t0, n0 [2]int64
	for i, n := range nodes {
		// The probe's session is the oldest of pgdns's: the admission
		// checks open one now and then and end it at once.
		if err := n.QueryOnce(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgdns' AND backend_type = 'client backend' ORDER BY backend_start LIMIT 1", &pids[i]); err != nil {
			return per, rate, fmt.Errorf("%s: pgdns's session: %w", n.Name, err)
		}
	}
	read := func(t, c *[2]int64) error {
		for i, n := range nodes {
			var err1, err2 error
			t[i], err1 = schedNS(pids[i])
			var probes float64
			probes, err2 = scrapeLabelled(b.addr.pgdnsHTTP, "pgdns_probe_duration_seconds_count", `host="`+n.Addr()+`"`)
			c[i] = int64(probes)
			if err := errors.Join(err1, err2); err != nil {
				return err
			}
		}
		return nil
	}
	if err := read(&t0, &n0); err != nil {
		return per, rate, err
	}
	start := time.Now()
	time.Sleep(window)
	var t1, n1 [2]int64
	if err := read(&t1, &n1); err != nil {
		return per, rate, err
	}
	took := time.Since(start)
	for i := range nodes {
		if n1[i] <= n0[i] {
			return per, rate, fmt.Errorf("%s: no probes in %v", nodes[i].Name, window)
		}
		per[i] = time.Duration((t1[i] - t0[i]) / (n1[i] - n0[i]))
		rate[i] = float64(n1[i]-n0[i]) / took.Seconds()
	}
	return per, rate, nil
}

// scrapeLabelled sums the samples of the metric name on pgdns's /metrics
// whose labels contain label.
func scrapeLabelled(httpAddr, name, label string) (float64, error) {
	body, err := scrapePage(httpAddr)
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, name+"{") && strings.Contains(l, label) {
			f := strings.Fields(l)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				return 0, fmt.Errorf("/metrics: %q: %w", l, err)
			}
			sum += v
		}
	}
	return sum, nil
}
