package test

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/app"
	"github.com/pgdns/pgdns/internal/app/apptest"
	"github.com/pgdns/pgdns/internal/config"
	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/zone"
)

// env is a running cluster with pgdns in front of it.
type env struct {
	pg   *pgtest.Cluster
	app  *app.App
	cfg  *config.Config
	logs *testkit.Buffer
	// block is the address block the cluster stands on, for any more
	// addresses the test needs (a proxy's, a resolver's); newEnv's nodes
	// take its first ones. Nil when the test brought its own cluster.
	block *pgtest.Block
}

// envOptions tune the pgdns in front of a test cluster.
type envOptions struct {
	Interval string   // probe.interval, default 100ms
	Timeout  string   // probe.timeout, default 1s
	LSNWait  string   // dns.lsn_wait, default 0s (answer at once)
	Replicas string   // clusters.main.replicas, default all
	DSN      string   // probe.dsn, default user=postgres
	Extra    []string // more host:port entries after the cluster's nodes
	Hosts    []string // the whole host list, in this order, instead of the nodes and Extra
	Listen   string   // dns.listen, default 127.0.0.1:0
	MinGap   string   // dns.lsn_refresh_min_gap, default the built-in one
	// DefaultCluster is dns.default_cluster, default none (one cluster).
	DefaultCluster string
	// NameServers is dns.nameservers ("ns1=127.x.y.z", ...), default none.
	NameServers []string
	State       string // state.path, default "" (memory only)
	Cluster     string // more keys of clusters.main, each line "    key: value\n"
	Probe       string // more keys of probe, each line "  key: value\n"
	Name        string // the cluster's name, default main
	// AdminTokenFile is http.admin_token_file, default "" (admin endpoints off).
	AdminTokenFile string
	// Nodes is the size of newEnv's cluster: a primary and Nodes-1
	// streaming replicas, default 3.
	Nodes int
}

// newEnv is the ground most end-to-end tests stand on: a primary and two
// streaming replicas (o.Nodes in all) on the first addresses of a block of
// the test's own, pgdns in front of them as o says, and pgdns answering the
// primary. A test that needs a cluster of another make (its own postgresql.conf
// lines, a stray, two pgdns on one cluster) starts it with pgtest.New and
// puts pgdns in front with attach or launch.
func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	return newEnvIn(t, pgtest.Addrs(t), o)
}

// newEnvIn is newEnv on a block the test has taken already, for a test
// that must place something on it before pgdns starts (pgdns's listener at
// b.IP(53) with a resolver pointing there).
func newEnvIn(t *testing.T, b *pgtest.Block, o envOptions) *env {
	t.Helper()
	pg := pgtest.New(t, pgtest.Options{IPs: b.IPs(cmp.Or(o.Nodes, 3))})
	e := attach(t, pg, o)
	e.block = b
	return e
}

// ip is the address of the cluster's i-th node as started: 0 the first
// primary, 1 and 2 its replicas.
func (e *env) ip(i int) string { return e.pg.Nodes[i].IP }

// attach starts pgdns in front of a running cluster and waits until it
// answers the primary.
func attach(t *testing.T, pg *pgtest.Cluster, o envOptions) *env {
	t.Helper()
	e := launch(t, pg, o)
	e.waitFor(t, "primary.db.local.", []string{pg.Nodes[0].IP})
	return e
}

// launch starts pgdns in front of a cluster and returns at once, for tests
// in which pgdns must not (yet) answer a primary.
func launch(t *testing.T, pg *pgtest.Cluster, o envOptions) *env {
	t.Helper()
	o.Interval = cmp.Or(o.Interval, "100ms")
	o.Timeout = cmp.Or(o.Timeout, "1s")
	o.LSNWait = cmp.Or(o.LSNWait, "0s")
	o.Replicas = cmp.Or(o.Replicas, "all")
	o.DSN = cmp.Or(o.DSN, "user=postgres dbname=postgres sslmode=disable")
	o.Listen = cmp.Or(o.Listen, "127.0.0.1:0")
	o.Name = cmp.Or(o.Name, "main")
	var hosts []string
	for _, n := range pg.Nodes {
		hosts = append(hosts, n.Addr())
	}
	hosts = append(hosts, o.Extra...)
	if o.Hosts != nil {
		hosts = o.Hosts
	}
	dnsExtra := ""
	if o.MinGap != "" {
		dnsExtra = "  lsn_refresh_min_gap: " + o.MinGap + "\n"
	}
	if o.DefaultCluster != "" {
		dnsExtra += "  default_cluster: " + o.DefaultCluster + "\n"
	}
	if o.NameServers != nil {
		dnsExtra += "  nameservers: [" + strings.Join(o.NameServers, ", ") + "]\n"
	}
	a, cfg, logs := apptest.Start(t, fmt.Sprintf(`
dns:
  listen: %s
  ttl: 1
  lsn_wait: %s
%shttp:
  listen: 127.0.0.1:0
  admin_token_file: %q
probe:
  interval: %s
  timeout: %s
  max_fails: 3
  dsn: %q
%sclusters:
  %s:
    hosts: [%s]
    replicas: %s
%sstate:
  path: %q
`, o.Listen, o.LSNWait, dnsExtra, o.AdminTokenFile, o.Interval, o.Timeout, o.DSN, o.Probe, o.Name, strings.Join(hosts, ", "), o.Replicas, o.Cluster, o.State))
	return &env{pg: pg, app: a, cfg: cfg, logs: logs}
}

// startYAML starts pgdns in front of pg with yaml, its whole config, for
// a test whose config envOptions cannot say (clusters of its own, a pin,
// a second name for the servers); clustersHead writes most of one.
func startYAML(t *testing.T, pg *pgtest.Cluster, yaml string) *env {
	t.Helper()
	a, cfg, logs := apptest.Start(t, yaml)
	return &env{pg: pg, app: a, cfg: cfg, logs: logs}
}

// clustersHead is the config, up to "clusters:", of a pgdns probing every
// 100ms that answers at once (lsn_wait 0s), main its default cluster, its
// state file at state ("" none); the test writes its clusters after it.
func clustersHead(state string) string {
	head := `
dns:
  listen: 127.0.0.1:0
  lsn_wait: 0s
  default_cluster: main
http:
  listen: 127.0.0.1:0
probe:
  interval: 100ms
  timeout: 1s
  dsn: "user=postgres dbname=postgres sslmode=disable"
`
	if state != "" {
		head += fmt.Sprintf("state:\n  path: %q\n", state)
	}
	return head + "clusters:\n"
}

// reloadTo writes yaml to a file of the test's own in dir and reloads e's
// pgdns with it, as SIGHUP does (the file loaded and validated).
func (e *env) reloadTo(t *testing.T, dir, yaml string) {
	t.Helper()
	path := filepath.Join(dir, "pgdns.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	next, err := config.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.app.Reload(next); err != nil {
		t.Fatal(err)
	}
}

// waitProbedPast waits, as what, until pgdns has probed the primary n at
// or past lsn (a primary's replay_lsn in /v1/hosts is its insert position).
func (e *env) waitProbedPast(t *testing.T, n *pgtest.Node, lsn, what string) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, 50*time.Millisecond, what, func() (string, bool) {
		got := e.hostStates(t)[n.Addr()].ReplayLSN
		return deref(got), got != nil && parseLSN(t, *got) >= parseLSN(t, lsn)
	})
}

// deref is *s, or "nil".
func deref(s *string) string {
	if s == nil {
		return "nil"
	}
	return *s
}

// query asks pgdns over network ("udp" or "tcp").
func (e *env) query(t *testing.T, network, name string, qtype uint16) *dns.Msg {
	t.Helper()
	return query(t, network, e.app.DNSAddr(), name, qtype)
}

func query(t *testing.T, network, addr, name string, qtype uint16) *dns.Msg {
	t.Helper()
	req := new(dns.Msg)
	req.SetQuestion(name, qtype)
	req.SetEdns0(1232, false)
	c := &dns.Client{Net: network, Timeout: 2 * time.Second}
	m, _, err := c.Exchange(req, addr)
	if err != nil {
		t.Fatalf("%s %s: %v", network, name, err)
	}
	return m
}

// ips returns the sorted A records of name, failing on anything but
// NOERROR.
func (e *env) ips(t *testing.T, name string) []string {
	t.Helper()
	return answerIPs(t, e.query(t, "udp", name, dns.TypeA))
}

func answerIPs(t *testing.T, m *dns.Msg) []string {
	t.Helper()
	if m.Rcode != dns.RcodeSuccess {
		t.Fatalf("%s: rcode %s", m.Question[0].Name, dns.RcodeToString[m.Rcode])
	}
	ips := []string{}
	for _, rr := range m.Answer {
		if a, ok := rr.(*dns.A); ok {
			ips = append(ips, a.A.String())
		}
	}
	slices.Sort(ips)
	return ips
}

// waitFor polls until name answers exactly want (in any order) and returns
// how long that took.
func (e *env) waitFor(t *testing.T, name string, want []string) time.Duration {
	t.Helper()
	return e.waitWithin(t, 20*time.Second, name, want)
}

// waitWithin is waitFor with a bound of its own.
func (e *env) waitWithin(t *testing.T, bound time.Duration, name string, want []string) time.Duration {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	start := time.Now()
	var got []string
	if !testkit.Poll(bound, 20*time.Millisecond, func() bool {
		m := e.query(t, "udp", name, dns.TypeA)
		if m.Rcode != dns.RcodeSuccess {
			return false
		}
		got = answerIPs(t, m)
		return slices.Equal(got, want)
	}) {
		t.Fatalf("%s answered %v, want %v (evidence: %q)", name, got, want, e.txt(t, "any.db.local."))
	}
	return time.Since(start)
}

// txt returns the TXT evidence for name.
func (e *env) txt(t *testing.T, name string) []string {
	t.Helper()
	var out []string
	for _, rr := range e.query(t, "tcp", name, dns.TypeTXT).Answer {
		if txt, ok := rr.(*dns.TXT); ok {
			out = append(out, strings.Join(txt.Txt, ""))
		}
	}
	slices.Sort(out)
	return out
}

// insertAndTakeLSN writes a row on node and returns its WAL insert
// position after the commit as a token for lsn- names: "hi-lo", lower-case.
func (e *env) insertAndTakeLSN(t *testing.T, node *pgtest.Node) string {
	t.Helper()
	conn := node.Conn(t)
	if _, err := conn.Exec(context.Background(), "CREATE TABLE IF NOT EXISTS t (id serial PRIMARY KEY, v text)"); err != nil {
		t.Fatal(err)
	}
	return writeAndTakeLSN(t, conn, "INSERT INTO t (v) VALUES (now()::text)")
}

// writeAndTakeLSN runs a write on conn and returns, as a read-your-writes
// client takes it after the commit, its WAL position as an lsn- label
// token: "hi-lo", lower-case.
func writeAndTakeLSN(t *testing.T, conn *pgx.Conn, sql string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatal(err)
	}
	var lsn string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	return lsnLabel(lsn)
}

// lsnLabel writes an LSN as PostgreSQL prints it ("0/3000060") the way
// lsn- names carry it ("0-3000060"): zone.LSN.Label. Text that is no LSN
// comes back as it is, so the name built from it is refused, not guessed.
func lsnLabel(lsn string) string {
	l, err := zone.ParseLSN(lsn)
	if err != nil {
		return lsn
	}
	return l.Label()
}

// steadyWrites inserts a row every 100ms on conn until the test ends (at
// most 40 s), so that lag has something to measure.
func steadyWrites(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for range 400 {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := conn.Exec(context.Background(), "INSERT INTO t (v) VALUES ('tick')"); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
}

// switchover stops old (fast) and promotes next, and returns when the
// promotion returned: the moment a test measures how soon pgdns answers
// the new primary from.
func switchover(t *testing.T, old, next *pgtest.Node) (promoted time.Time) {
	t.Helper()
	ctx := context.Background()
	if err := old.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	if err := next.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	return time.Now()
}
