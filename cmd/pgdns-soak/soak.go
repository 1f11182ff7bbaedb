package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdns/pgdns/internal/app"
	"github.com/pgdns/pgdns/internal/config"
	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// Options describe one soak run.
type Options struct {
	Seed     uint64
	Duration time.Duration // how long faults are injected
	// Short injects every fault kind once, in an order drawn from the
	// seed, instead of drawing kinds at random until Duration is up.
	Short   bool
	Workers int           // checking clients, default 3
	Pace    time.Duration // pause of each client between checks, default 30ms
	Addrs   *pgtest.Block // loopback addresses: see net.go
	Foreign bool          // list a server of another cluster among the hosts
	// PlainProbe makes pgdns probe as a role without pg_monitor (nor
	// superuser) for the whole run, but during the fault probe-role.
	PlainProbe bool
	// Kinds restricts the faults to these kinds (nil: all the run can
	// play).
	Kinds []string
	// MaxFaults is how many faults may run at once (default 2; 1 plays
	// them one after another).
	MaxFaults int
	// Partitions plays packet drops with nftables. It needs the soak's
	// own network namespace (InNetns): Run refuses it elsewhere.
	Partitions bool
	Log        io.Writer // progress, one line per fault; nil = discard
	PGDNS      io.Writer // pgdns's own log; nil = discard
}

// Probe settings of the pgdns under test. Stale is the longest a correct
// pgdns may keep using a probe sample (max_fails × interval + timeout, see
// docs/decisions.md, "Stale knowledge"); every tolerance below derives from it.
const (
	probeInterval = 50 * time.Millisecond
	probeTimeout  = 250 * time.Millisecond
	probeMaxFails = 3
	Stale         = probeMaxFails*probeInterval + probeTimeout
	// Grace is how long after a role change an answer from before it may
	// still be served: a sample may be Stale old, plus one interval for
	// the probe that was in flight when the change happened.
	Grace = Stale + probeInterval
	// SeeGrace is how long after a promotion pgdns may not yet have seen
	// the new primary at all: a host pgdns last saw down (re-cloned or
	// restarted just before) is probed with a backoff of up to 2 s
	// (probe.maxBackoff), then Grace.
	SeeGrace = 2*time.Second + Grace
	// heartbeatEvery is the period of the heartbeat the primary writes.
	heartbeatEvery = 5 * time.Millisecond
)

// harness is a running soak: the cluster, pgdns in front of it, the truth.
type harness struct {
	opts     Options
	w        *world
	logf     func(format string, args ...any)
	idle     atomic.Bool  // writes paused (fault "idle")
	async    atomic.Bool  // every write with synchronous_commit = off (fault "async-commits")
	writeIDs atomic.Int64 // numbers the clients' rows across the run
	pgdns    *app.App
	proxy    *delayProxy
	cuts     *partitions // nil outside the soak's network namespace

	setupMu sync.Mutex
	setup   pgdnsSetup
	cfg     string // pgdns config file
	dns     string // pgdns DNS address

	checks  *ledger
	notes   []string // harness problems (not violations)
	notesMu sync.Mutex
	start   time.Time // the run began (setup included); times in the report count from it
	ready   time.Time // setup done: clients and faults began
}

// Run sets up a cluster and pgdns, injects faults for opts.Duration while
// the clients check every answer, checks that every acknowledged write
// survived, and returns the report. An error is a harness failure, not a
// verdict on pgdns: the verdict is Report.Violations.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if opts.Workers == 0 {
		opts.Workers = 3
	}
	if opts.Pace == 0 {
		opts.Pace = 30 * time.Millisecond
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.PGDNS == nil {
		opts.PGDNS = io.Discard
	}
	if opts.MaxFaults == 0 {
		opts.MaxFaults = 2
	}
	h := &harness{opts: opts, checks: newLedger(), dns: opts.Addrs.Addr(53, 5353), setup: pgdnsSetup{removed: map[int]bool{}}}
	h.setup.probeUser, _ = h.probeUsers()
	if opts.Partitions {
		if !InNetns() {
			return nil, errors.New("partitions need the soak's own network namespace (run it through Reexec, as root)")
		}
		if err := SetupNetns(); err != nil {
			return nil, err
		}
		h.cuts = &partitions{}
	}
	h.logf = func(format string, args ...any) {
		fmt.Fprintf(opts.Log, "soak %7.1fs  %s\n", time.Since(h.start).Seconds(), fmt.Sprintf(format, args...))
	}
	h.start = time.Now()
	h.logf("seed %d, %s of faults (short=%v), %d clients, up to %d faults at once, partitions %v", opts.Seed, opts.Duration, opts.Short, opts.Workers, opts.MaxFaults, opts.Partitions)

	setupCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	pg, err := pgtest.Start(setupCtx, pgtest.Options{IPs: opts.Addrs.IPs(3), Conf: serverConf,
		Listen: h.listenPaths, Upstream: h.upstreamPath})
	if err != nil {
		return nil, err
	}
	defer pg.Close()
	var foreign *pgtest.Cluster
	if opts.Foreign {
		if foreign, err = pgtest.Start(setupCtx, pgtest.Options{IPs: []string{opts.Addrs.IP(foreignIdx)}, Conf: serverConf, Listen: h.listenPaths}); err != nil {
			return nil, err
		}
		defer foreign.Close()
	}
	if h.proxy, err = startProxy(h.pathIP(pathProxy, proxied)+":5432", h.pathIP(pathPGDNS, proxied)+":5432"); err != nil {
		return nil, err
	}
	defer h.proxy.close()
	if err := createTables(setupCtx, pg.Nodes[0], foreign); err != nil {
		return nil, err
	}
	var sysid string
	if err := pg.Nodes[0].QueryOnce(setupCtx, "SELECT system_identifier::text FROM pg_control_system()", &sysid); err != nil {
		return nil, err
	}
	h.w = newWorld(pg, foreign, sysid)
	dir, err := os.MkdirTemp("", "pgdns-soak-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := h.startPGDNS(dir); err != nil {
		return nil, err
	}
	defer h.stopPGDNS()
	if err := h.waitHealed(setupCtx); err != nil {
		return nil, fmt.Errorf("cluster never streamed: %w", err)
	}
	h.logf("cluster up: primary %s, replicas %s %s, foreign %v; pgdns on %s", pg.Nodes[0].Addr(), pg.Nodes[1].Addr(), pg.Nodes[2].Addr(), opts.Foreign, h.dns)

	// Clients and the heartbeat run until the faults are over and the
	// cluster has healed, then a little longer so the last fault's
	// recovery is seen.
	h.ready = time.Now()
	runCtx, stopRun := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); h.heartbeat(runCtx) }()
	for i := range opts.Workers {
		wg.Add(1)
		go func() { defer wg.Done(); h.client(runCtx, i) }()
	}
	faults := h.inject(ctx)
	h.logf("faults over; watching the healed cluster for 3s")
	select {
	case <-time.After(3 * time.Second):
	case <-ctx.Done():
	}
	stopRun()
	wg.Wait()
	end := time.Now()

	finalCtx, cancelFinal := context.WithTimeout(context.Background(), time.Minute)
	defer cancelFinal()
	durability, err := h.checkWrites(finalCtx)
	if err != nil {
		h.note("final check of the writes: %v", err)
	}
	return h.report(faults, durability, end), nil
}

// serverConf is the soak's PostgreSQL settings on top of pgtest's. A
// widened wal_writer_delay keeps asynchronous commits unwritten for up to
// a second (the default 200 ms gives the same effect, less often). TCP
// keepalives (an idle session) and tcp_user_timeout (one with data
// unacknowledged) end, within about 3 s, a session whose client a
// partition cut off, so that it does not hold a later smart shutdown.
var serverConf = []string{
	"wal_keep_size = '512MB'", "max_connections = 100", "wal_writer_delay = '1s'",
	"tcp_keepalives_idle = 1", "tcp_keepalives_interval = 1", "tcp_keepalives_count = 2",
	"tcp_user_timeout = 3000",
}

// probeRole is a login role without pg_monitor (nor superuser): what an
// operator who skipped the GRANT of docs/operating.md gives pgdns.
const probeRole = "soak_probe"

// probeUsers are the role pgdns probes as for most of the run, and the one
// it probes as during the fault probe-role.
func (h *harness) probeUsers() (usual, other string) {
	if h.opts.PlainProbe {
		return probeRole, "postgres"
	}
	return "postgres", probeRole
}

// createTables makes the heartbeat and the clients' table (on the foreign
// host too, so that a check reading it there fails on identity, not on a
// missing table), and the probe role without pg_monitor.
func createTables(ctx context.Context, primary *pgtest.Node, foreign *pgtest.Cluster) error {
	nodes := []*pgtest.Node{primary}
	if foreign != nil {
		nodes = append(nodes, foreign.Nodes[0])
	}
	for _, n := range nodes {
		conn, err := pgx.Connect(ctx, n.DSN())
		if err != nil {
			return err
		}
		_, err = conn.Exec(ctx, `CREATE TABLE soak_hb (seq bigint PRIMARY KEY);
			CREATE TABLE soak_w (id bigint PRIMARY KEY, at timestamptz NOT NULL DEFAULT now());
			CREATE TABLE soak_burst (pad text);
			CREATE ROLE `+probeRole+` LOGIN`)
		conn.Close(context.Background())
		if err != nil {
			return err
		}
	}
	return nil
}

// pgdnsSetup is what the faults change in pgdns's config.
type pgdnsSetup struct {
	probeUser string
	removed   map[int]bool // node indexes (4: foreign) left out of the hosts
	// dupForeign lists the foreign host a second time, by its main
	// address.
	dupForeign bool
}

// hosts lists the configured host addresses of setup c: each node's
// address on pgdns's path (the proxied node's through the proxy).
func (h *harness) hosts(c pgdnsSetup) []string {
	var hosts []string
	for i := 1; i <= 3; i++ {
		if c.removed[i] {
			continue
		}
		p := pathPGDNS
		if i == proxied {
			p = pathProxy
		}
		hosts = append(hosts, h.pathIP(p, i)+":5432")
	}
	if h.opts.Foreign && !c.removed[foreignIdx] {
		hosts = append(hosts, h.pathIP(pathPGDNS, foreignIdx)+":5432")
		if c.dupForeign {
			hosts = append(hosts, h.pathIP(pathMain, foreignIdx)+":5432")
		}
	}
	return hosts
}

// pgdnsConfig is the config file of the pgdns under test.
func (h *harness) pgdnsConfig(c pgdnsSetup) string {
	return fmt.Sprintf(`dns:
  listen: %s
  zone: db.local
  ttl: 1
  lsn_wait: 20ms
http:
  listen: ""
probe:
  interval: %s
  timeout: %s
  max_fails: %d
  dsn: "user=%s dbname=postgres sslmode=disable"
state:
  path: %s
clusters:
  main:
    hosts: [%s]
    replicas: all
`, h.dns, probeInterval, probeTimeout, probeMaxFails, c.probeUser, filepath.Join(filepath.Dir(h.cfg), "state.json"), strings.Join(h.hosts(c), ", "))
}

// reconfigure changes the setup, writes the config and reloads pgdns. A
// reload pgdns refuses (it could not probe every new host in time) keeps
// the running config: the file and the setup are put back.
func (h *harness) reconfigure(change func(*pgdnsSetup)) error {
	h.setupMu.Lock()
	defer h.setupMu.Unlock()
	old := h.setup
	next := pgdnsSetup{probeUser: old.probeUser, removed: maps.Clone(old.removed), dupForeign: old.dupForeign}
	change(&next)
	if err := os.WriteFile(h.cfg, []byte(h.pgdnsConfig(next)), 0o600); err != nil {
		return err
	}
	// Recorded before the reload: a client may check an answer from the
	// new list before Reload returns.
	done := h.w.reloading(h.hosts(next))
	if err := h.reloadPGDNS(); err != nil {
		done(false)
		_ = os.WriteFile(h.cfg, []byte(h.pgdnsConfig(old)), 0o600)
		return fmt.Errorf("reload refused, config kept: %w", err)
	}
	done(true)
	h.setup = next
	return nil
}

// startPGDNS writes the config and starts pgdns in-process through the
// real config loader, as cmd/pgdns does.
func (h *harness) startPGDNS(dir string) error {
	h.cfg = filepath.Join(dir, "pgdns.yaml")
	h.setupMu.Lock()
	text, hosts := h.pgdnsConfig(h.setup), h.hosts(h.setup)
	h.setupMu.Unlock()
	if err := os.WriteFile(h.cfg, []byte(text), 0o600); err != nil {
		return err
	}
	if h.w.epochs == nil {
		h.w.reloading(hosts)(true)
	}
	cfg, err := config.Load(h.cfg, nil)
	if err != nil {
		return err
	}
	a, err := app.New(cfg, slog.New(slog.NewTextHandler(h.opts.PGDNS, nil)))
	if err != nil {
		return err
	}
	// The port of a stopped instance may take a moment to be free.
	var startErr error
	testkit.Poll(5*time.Second, 100*time.Millisecond, func() bool {
		startErr = a.Start()
		return startErr == nil
	})
	if startErr != nil {
		return startErr
	}
	h.pgdns = a
	return nil
}

func (h *harness) stopPGDNS() {
	if h.pgdns == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), app.ShutdownTimeout)
	defer cancel()
	if err := h.pgdns.Stop(ctx); err != nil {
		h.note("pgdns stop: %v", err)
	}
	h.pgdns = nil
}

// reloadPGDNS re-reads the config file and applies it, as SIGHUP does in
// cmd/pgdns.
func (h *harness) reloadPGDNS() error {
	cfg, err := config.Load(h.cfg, nil)
	if err != nil {
		return err
	}
	return h.pgdns.Reload(cfg)
}

// note records a harness problem: not a violation, but shown in the
// report.
func (h *harness) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	h.logf("note: %s", msg)
	h.notesMu.Lock()
	defer h.notesMu.Unlock()
	h.notes = append(h.notes, fmt.Sprintf("%.1fs %s", time.Since(h.start).Seconds(), msg))
}

// heartbeat inserts the next seq on the current primary every
// heartbeatEvery and records when each commit returned and the insert
// position after it. It writes straight to the node the harness knows is primary:
// it is the clock the lag and byte checks measure against.
func (h *harness) heartbeat(ctx context.Context) {
	var (
		conn *pgx.Conn
		on   *pgtest.Node
		tl   int
		seq  int64
		// connectedAt is when the connection was asked for.
		connectedAt time.Time
		// async: the session commits with synchronous_commit = off.
		async bool
		rng   = rand.New(rand.NewPCG(h.opts.Seed, 0xbeef))
	)
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	tick := time.NewTicker(heartbeatEvery)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		// While async-commits runs, a heartbeat every 50 ms only: the
		// WAL then fills no page for long, and the WAL writer leaves
		// committed, acknowledged rows unwritten for up to its delay.
		if h.async.Load() && n%10 != 0 {
			continue
		}
		p := h.w.currentPrimary()
		if h.idle.Load() || p == nil {
			continue
		}
		if h.w.draining(p) {
			// A smart shutdown waits for this session: let go.
			p = nil
		}
		if conn != nil && on != p {
			conn.Close(context.Background())
			conn = nil
		}
		if p == nil {
			continue
		}
		if conn == nil {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			dialAt := time.Now()
			c, err := pgx.Connect(cctx, p.DSN())
			if err == nil {
				err = c.QueryRow(cctx, timelineSQL).Scan(&tl)
			}
			cancel()
			if err != nil {
				if c != nil {
					c.Close(context.Background())
				}
				continue
			}
			conn, on, connectedAt, async = c, p, dialAt, false
		}
		// One heartbeat in eight commits asynchronously, every one
		// while the fault async-commits runs.
		if want := h.async.Load() || rng.IntN(8) == 0; want != async {
			if err := setAsync(ctx, conn, want); err != nil {
				conn.Close(context.Background())
				conn = nil
				continue
			}
			async = want
		}
		seq++
		a, err := commitAndPosition(ctx, conn, tokenSQL, "INSERT INTO soak_hb (seq) VALUES ($1)", seq)
		if err != nil && a.at.IsZero() {
			conn.Close(context.Background())
			conn = nil
			continue
		}
		a.id, a.node, a.tl, a.asked = seq, p.Addr(), tl, connectedAt
		h.w.mu.Lock()
		h.w.hb = append(h.w.hb, a)
		h.w.mu.Unlock()
		if err != nil {
			conn.Close(context.Background())
			conn = nil
		}
	}
}

// setAsync sets the session's synchronous_commit: off commits return once
// the commit record is inserted, before its WAL is written.
func setAsync(ctx context.Context, conn *pgx.Conn, off bool) error {
	v := "on"
	if off {
		v = "off"
	}
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err := conn.Exec(cctx, "SET synchronous_commit = "+v)
	return err
}

// timelineSQL reads a primary's current timeline.
const timelineSQL = `SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int`

// commitAndPosition runs one write (autocommit) and then reads a WAL
// position with posSQL, as a read-your-writes client takes its token. The
// ack has at set when the write committed; its lsn is 0 when the position
// could not be read (the error says why).
func commitAndPosition(ctx context.Context, conn *pgx.Conn, posSQL, sql string, args ...any) (ack, error) {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := conn.Exec(cctx, sql, args...); err != nil {
		return ack{}, err
	}
	a := ack{at: time.Now()}
	var pos string
	if err := conn.QueryRow(cctx, posSQL).Scan(&pos); err != nil {
		return a, err
	}
	a.posAt = time.Now()
	lsn, err := ParseLSN(pos)
	a.lsn = lsn
	return a, err
}

// tokenSQL reads the position after a commit: the insert position, as a
// read-your-writes client takes its token (docs/decisions.md). The heartbeat records
// it too: a commit is visible on the primary once inserted, flushed or
// not (synchronous_commit = off), so what a replica lacks is measured
// from there.
const tokenSQL = "SELECT pg_current_wal_insert_lsn()::text"

// checkWrites reads every row on the final primary and sorts the
// acknowledged writes into present, lost with a killed primary (async
// replication: excused), and missing (a violation each).
func (h *harness) checkWrites(ctx context.Context) (durability, error) {
	var d durability
	p := h.w.currentPrimary()
	if p == nil {
		return d, errors.New("no primary at the end")
	}
	conn, err := pgx.Connect(ctx, p.DSN())
	if err != nil {
		return d, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, "SELECT id FROM soak_w")
	if err != nil {
		return d, err
	}
	have := map[int64]bool{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return d, err
		}
		have[id] = true
	}
	if err := rows.Err(); err != nil {
		return d, err
	}
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	d.final = p.Addr()
	for _, a := range h.w.writes {
		d.acked++
		switch {
		case have[a.id]:
			d.present++
		case h.w.lostWithKill(a):
			d.lostWithKill++
		default:
			d.missing = append(d.missing, a)
		}
	}
	return d, nil
}
