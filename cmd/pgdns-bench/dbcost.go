package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
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
	// The statement alone, run execs times back to back on a session of
	// its own: unprepared (planned every time, as pgdns did before it
	// prepared it) and prepared (planned once), the variant pgdns runs on
	// each (on the primary the one for WAL senders it knows, on the
	// replica the replica's).
	simple, prepared [2]time.Duration // [0] primary, [1] replica
	// The variant that also reads the server's status (postmaster.pid),
	// which pgdns runs for a role that may read server files, prepared.
	preparedStatus [2]time.Duration
	// floorBackToBack: a prepared SELECT 1, execs times back to back on
	// the same session: the least a statement costs with warm caches.
	floorBackToBack [2]time.Duration
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
	// The same check under password authentication: the startup packet
	// of a role the server asks a password of, and the connection closed
	// at the request, as pgdns's admission check does; asks times.
	asks   int
	perAsk time.Duration
	// floor: a prepared SELECT 1 on a session of its own every 250 ms
	// over the rest window, the server CPU a backend costs each time it is
	// woken for the least statement, [0] primary, [1] replica.
	floor [2]time.Duration
	// admitRate: new sessions per second the server saw over the rest
	// window (pg_stat_database.sessions of pgdns's database): pgdns's
	// admission checks.
	admitRate [2]float64
}

// perSecond is the server CPU pgdns costs host i each second at rest: its
// probes and, under trust authentication, its admission checks' sessions.
func (d *dbCostResult) perSecond(i int) time.Duration {
	return time.Duration(float64(d.rest[i])*d.restRate[i] + float64(d.perSession)*d.admitRate[i])
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
		if res.simple[i], res.prepared[i], res.preparedStatus[i], res.floorBackToBack[i], err = statementCost(ctx, n, i == 1, res.execs); err != nil {
			return nil, fmt.Errorf("%s: %w", n.Name, err)
		}
	}
	res.sessions, res.asks = 300, 300
	var err error
	if res.perSession, err = sessionCost(ctx, nodes[1], res.sessions); err != nil {
		return nil, fmt.Errorf("%s: %w", nodes[1].Name, err)
	}
	if res.perAsk, err = askCost(ctx, nodes[1], res.asks); err != nil {
		return nil, fmt.Errorf("%s: password request: %w", nodes[1].Name, err)
	}
	// askCost reloaded the replica: pgdns's next probe of it opens a new
	// session, which reads what a reload may have changed (probe's
	// shadow.go, R8-8). The windows below measure the session after it.
	time.Sleep(time.Second)
	var sessions0 [2]int64
	for i, n := range nodes {
		if sessions0[i], err = sessionCount(ctx, n); err != nil {
			return nil, err
		}
	}
	floorDone := make(chan error, 2)
	for i, n := range nodes {
		go func() {
			var err error
			res.floor[i], err = floorCost(ctx, n, res.window)
			floorDone <- err
		}()
	}
	restStart := time.Now()
	res.rest, res.restRate, err = b.probeSessionCost(ctx, nodes, res.window)
	restTook := time.Since(restStart)
	err = errors.Join(err, <-floorDone, <-floorDone)
	if err != nil {
		return nil, err
	}
	for i, n := range nodes {
		// Three sessions are the bench's own: the first count's, the
		// floor's and probeSessionCost's look-up of pgdns's session.
		s1, err := sessionCount(ctx, n)
		if err != nil {
			return nil, err
		}
		res.admitRate[i] = float64(s1-sessions0[i]-3) / restTook.Seconds()
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
	w("| the statement unprepared (parsed and planned every time), %d times on a session of its own | %s | %s |\n", d.execs, us(d.simple[0]), us(d.simple[1]))
	w("| the statement prepared (planned once per session): the variant pgdns runs on each (on the primary, for the WAL senders it knows), %d times | %s | %s |\n", d.execs, us(d.prepared[0]), us(d.prepared[1]))
	w("| its variant reading the server's status from `postmaster.pid` (what pgdns runs for a role that may read server files), prepared, %d times | %s | %s |\n", d.execs, us(d.preparedStatus[0]), us(d.preparedStatus[1]))
	w("| a prepared `SELECT 1`, %d times on the same session: the least a statement costs back to back | %s | %s |\n", d.execs, us(d.floorBackToBack[0]), us(d.floorBackToBack[1]))
	w("| pgdns's probe session at rest (`probe.interval: 250ms`), over %v | %s (%.1f probes/s) | %s (%.1f probes/s) |\n", d.window, us(d.rest[0]), d.restRate[0], us(d.rest[1]), d.restRate[1])
	w("| pgdns's probe session under the `lsn-` refresh bound (%.0f lookups/s of LSNs just written, `dns.lsn_refresh_min_gap` default), over %v | %s (%.1f probes/s) | %s (%.1f probes/s) |\n\n", d.refreshLookups, d.window, us(d.refresh[0]), d.refreshRate[0], us(d.refresh[1]), d.refreshRate[1])
	w("Per probe of pgdns's own sessions, target ≤ %s: %s (the most: %s", us(dbCostTarget), verdict(worst <= dbCostTarget), us(worst))
	if worst > dbCostTarget {
		w(", %.1f× the target; waking the backend alone, the next paragraph, is %s of it", float64(worst)/float64(dbCostTarget), us(max(d.floor[0], d.floor[1])))
	}
	w(").\n\n")
	w("What a backend costs each time it is woken, whatever the statement: a prepared `SELECT 1` every 250 ms on a session of its own, over the same %v: %s on the primary, %s on the replica. What a probe at rest costs beyond it is the statement's own. What a wake consists of (PostgreSQL's code and data back through cold caches, the reply's send, the switch in and out; no timer), and what each part of the statement costs, measured apart: [What waking a backend for a probe consists of](#what-waking-a-backend-for-a-probe-consists-of).\n\n", d.window, us(d.floor[0]), us(d.floor[1]))
	w("pgdns must also learn whether each host still admits a new session (a server stopping smartly refuses new ones while the open one keeps working). Its probe role here is `postgres`, a superuser, which may read server files: each probe reads the server's status from `postmaster.pid` in its own statement (the variant above), and pgdns opens no other session (it connects to each host once every 4 admission intervals and closes at once without a startup packet, to see that new connections still get through: a fork, not a session). The servers saw %.2f (primary) and %.2f (replica) new sessions a second over the rest window (`pg_stat_database.sessions`, less the bench's own). A role that may not read server files makes pgdns ask with a new session instead, once every 4 probes and at most once every `probe.admission_interval` (default 1s; 0 never asks): a new session opened and closed at once, as that check does under trust authentication, cost the replica %s of CPU (its postmaster's and the exited backends', `/proc/PID/stat`, over %d sessions in a row); under password authentication the check stops at the server's request for the password, which cost %s (over %d in a row).\n\n", d.admitRate[0], d.admitRate[1], us(d.perSession), d.sessions, us(d.perAsk), d.asks)
	pct := func(t time.Duration) string { return fmt.Sprintf("%.2f%%", float64(t)/float64(time.Second)*100) }
	w("So at rest, per pgdns instance: the primary spends %s of CPU a second on pgdns (%s of a core), the replica %s (%s): probes per second × CPU per probe, plus admission sessions per second × CPU per session. A role without the grant adds, under trust authentication, about one session a second per host: %s a second (%s of a core) on each host, or %s per ask under password authentication.\n\n",
		us(d.perSecond(0)), pct(d.perSecond(0)), us(d.perSecond(1)), pct(d.perSecond(1)), us(d.perSession), pct(d.perSession), us(d.perAsk))
	return b.String()
}

// statementCost runs the probe's statement execs times back to back on a
// new session to n, first unprepared, then prepared as pgdns runs it on
// that server (replica: the replica variants; else the primary's for the
// WAL senders it knows, with their pids), and a prepared SELECT 1, and
// returns the server's CPU time per execution of each. Each is warmed
// first, and the session's start, its planning and the warm-up are not
// counted: the backend's CPU time is read right before the execs runs and
// right after.
func statementCost(ctx context.Context, n *pgtest.Node, replica bool, execs int) (simple, prepared, status, floor time.Duration, err error) {
	pc, err := pgconn.Connect(ctx, n.DSN())
	if err != nil {
		return 0, 0, 0, 0, err
	}
	defer pc.Close(context.Background())
	rows, err := pc.Exec(ctx, "SELECT pg_backend_pid()").ReadAll()
	if err != nil {
		return 0, 0, 0, 0, err
	}
	pid, err := strconv.Atoi(string(rows[0].Rows[0][0]))
	if err != nil {
		return 0, 0, 0, 0, err
	}
	run := func(one func() error) (time.Duration, error) {
		for range 6 { // warm the session's caches, and its plan cache past its custom plans
			if err := one(); err != nil {
				return 0, err
			}
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
	// Unprepared, the statement is parsed and planned on every run (the
	// unnamed statement, as a simple query was before the statement took
	// parameters).
	if simple, err = run(func() error {
		return pc.ExecParams(ctx, probe.ProbeSQL, probe.NoSendersKnown(), nil, nil, nil).Read().Err
	}); err != nil {
		return 0, 0, 0, 0, fmt.Errorf("unprepared: %w", err)
	}
	// Prepared, it is run as pgdns runs it: on the primary with the WAL
	// senders whose names the first run of the primary's statement gave
	// (probe's senders.go), in the variant that reads no more than their
	// pids and states, and past the five runs PostgreSQL plans anew before
	// it settles on its generic plan (run's warm-up).
	sd, err := pc.Prepare(ctx, probe.ProbeStatement, probe.ProbeSQL, nil)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	first := pc.ExecStatement(ctx, sd, probe.NoSendersKnown(), nil, nil).Read()
	if first.Err != nil {
		return 0, 0, 0, 0, first.Err
	}
	params, err := knownSenders(first.Rows)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	plain, withStatus := [2]string{probe.ProbeKnownStatement, probe.ProbeKnownSQL}, [2]string{probe.ProbeKnownStatusStatement, probe.ProbeKnownStatusSQL}
	if replica {
		plain, withStatus = [2]string{probe.ProbeReplicaStatement, probe.ProbeReplicaSQL}, [2]string{probe.ProbeReplicaStatusStatement, probe.ProbeReplicaStatusSQL}
		params = nil
	}
	exec := func(sd *pgconn.StatementDescription, params [][]byte) func() error {
		return func() error {
			res := pc.ExecStatement(ctx, sd, params, nil, nil).Read()
			if res.Err == nil && len(res.Rows) == 1 && len(res.Rows[0]) > fakeStandbysColumn {
				// The known variant's null element: a sender not listed,
				// which pgdns would read with the primary's statement.
				if col := res.Rows[0][fakeStandbysColumn]; bytes.HasPrefix(col, []byte("[null")) || bytes.Contains(col, []byte("],null")) {
					return fmt.Errorf("%s: a WAL sender not known: %s", sd.Name, col)
				}
			}
			return res.Err
		}
	}
	for i, st := range [][2]string{plain, withStatus} {
		sd, err := pc.Prepare(ctx, st[0], st[1], nil)
		if err != nil {
			return 0, 0, 0, 0, err
		}
		d, err := run(exec(sd, params))
		if err != nil {
			return 0, 0, 0, 0, err
		}
		if i == 0 {
			prepared = d
		} else {
			status = d
		}
	}
	sd1, err := pc.Prepare(ctx, "floor", "SELECT 1", nil)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	floor, err = run(exec(sd1, nil))
	return simple, prepared, status, floor, err
}

// knownSenders are the parameters with which the probe's statement
// names the WAL senders of its row rows as known: the server run (the
// start time column) and their pids (the standbys column's first
// elements), as pgdns sends them.
func knownSenders(rows [][][]byte) ([][]byte, error) {
	if len(rows) != 1 || len(rows[0]) <= fakeStandbysColumn {
		return nil, fmt.Errorf("the probe's statement gave %d rows", len(rows))
	}
	var senders [][]json.RawMessage
	if err := json.Unmarshal(rows[0][fakeStandbysColumn], &senders); err != nil {
		return nil, fmt.Errorf("the standbys column %q: %w", rows[0][fakeStandbysColumn], err)
	}
	var pids []string
	for _, s := range senders {
		if len(s) > 0 {
			pids = append(pids, string(s[0]))
		}
	}
	return [][]byte{rows[0][fakeStartedColumn], []byte("{" + strings.Join(pids, ",") + "}")}, nil
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
			probes, err2 = scrapeLabelled(b.addr.pgdnsHTTP, "pgdns_host_probes_total", `host="`+n.Addr()+`"`)
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

// askCost sends n startup packets, one after the other, for a role node
// asks a password of (a pg_hba.conf line put first for the run, and taken
// out again), and closes each connection at the server's request, as
// pgdns's admission check does under password authentication; it returns
// the server CPU time each cost, as sessionCost counts it.
func askCost(ctx context.Context, node *pgtest.Node, n int) (time.Duration, error) {
	const role = "bench_password"
	hba := node.Dir + "/pg_hba.conf"
	orig, err := os.ReadFile(hba)
	if err != nil {
		return 0, err
	}
	if err := node.WriteFile("pg_hba.conf", append([]byte("host all "+role+" 0.0.0.0/0 scram-sha-256\n"), orig...)); err != nil {
		return 0, err
	}
	defer func() {
		_ = node.WriteFile("pg_hba.conf", orig)
		var ok bool
		_ = node.QueryOnce(context.Background(), "SELECT pg_reload_conf()", &ok)
	}()
	var ok bool
	if err := node.QueryOnce(ctx, "SELECT pg_reload_conf()", &ok); err != nil {
		return 0, err
	}
	time.Sleep(200 * time.Millisecond) // the postmaster rereads pg_hba.conf
	pm, err := node.PostmasterPID()
	if err != nil {
		return 0, err
	}
	ask := func() error {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", node.Addr())
		if err != nil {
			return err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		fe := pgproto3.NewFrontend(conn, conn)
		fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersionNumber,
			Parameters: map[string]string{"user": role, "database": "postgres", "application_name": "pgdns-bench"}})
		if err := fe.Flush(); err != nil {
			return err
		}
		msg, err := fe.Receive()
		if err != nil {
			return err
		}
		if _, ok := msg.(*pgproto3.AuthenticationSASL); !ok {
			return fmt.Errorf("first reply %T, want a password request (AuthenticationSASL)", msg)
		}
		return nil
	}
	if err := ask(); err != nil {
		return 0, err
	}
	t0, err := familyTicks(pm)
	if err != nil {
		return 0, err
	}
	for range n {
		if err := ask(); err != nil {
			return 0, err
		}
	}
	time.Sleep(100 * time.Millisecond) // the last backends reaped
	t1, err := familyTicks(pm)
	return time.Duration(t1-t0) * 10 * time.Millisecond / time.Duration(n), err
}

// floorCost runs a prepared SELECT 1 every 250 ms for window on a new
// session to n and returns the server CPU time of each execution.
func floorCost(ctx context.Context, n *pgtest.Node, window time.Duration) (time.Duration, error) {
	pc, err := pgconn.Connect(ctx, n.DSN())
	if err != nil {
		return 0, err
	}
	defer pc.Close(context.Background())
	rows, err := pc.Exec(ctx, "SELECT pg_backend_pid()").ReadAll()
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(string(rows[0].Rows[0][0]))
	if err != nil {
		return 0, err
	}
	sd, err := pc.Prepare(ctx, "floor", "SELECT 1", nil)
	if err != nil {
		return 0, err
	}
	t0, err := schedNS(pid)
	if err != nil {
		return 0, err
	}
	execs := int64(0)
	for deadline := time.Now().Add(window); time.Now().Before(deadline); execs++ {
		time.Sleep(250 * time.Millisecond)
		if _, err := pc.ExecStatement(ctx, sd, nil, nil, nil).Close(); err != nil {
			return 0, err
		}
	}
	t1, err := schedNS(pid)
	return time.Duration((t1 - t0) / execs), err
}

// sessionCount is the number of sessions node has started in pgdns's
// database so far (pg_stat_database.sessions, PostgreSQL 14 or later).
func sessionCount(ctx context.Context, n *pgtest.Node) (int64, error) {
	var c int64
	err := n.QueryOnce(ctx, "SELECT sessions FROM pg_stat_database WHERE datname = current_database()", &c)
	return c, err
}
