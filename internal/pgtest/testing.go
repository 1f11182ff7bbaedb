package pgtest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdns/pgdns/internal/testkit"
)

// startBudget bounds New's start of a cluster: initdb, the primary's
// start, then a copy (pg_basebackup) and a start of each replica. Seconds
// on a quiet machine; at load 40-50 the starts of a four-node and a
// three-node cluster passed the 2 minutes this was, and their copies were
// stopped (pg_basebackup: exit status 130, our SIGINT).
const startBudget = 6 * time.Minute

// New starts a cluster for a test and stops it when the test ends. Without
// PostgreSQL binaries the test is skipped on a developer's machine and
// fails under CI (CI=true), where a missing install must not pass green.
func New(t testing.TB, opts Options) *Cluster {
	t.Helper()
	Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), startBudget)
	defer cancel()
	c, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("server log of %s:\n%s", n.Name, tail(n.Log(), 3000))
			}
		}
		c.Close()
	})
	return c
}

// NewPatroni starts a Patroni cluster for a test; missing packages fail
// the test under CI and skip it elsewhere.
func NewPatroni(t testing.TB, etcdIP string, ips []string) *PatroniCluster {
	t.Helper()
	testkit.SkipShort(t, "needs Patroni, etcd and PostgreSQL")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pc, err := StartPatroni(ctx, etcdIP, ips)
	if err != nil {
		if strings.Contains(err.Error(), "not found") {
			testkit.Require(t, err)
		}
		t.Fatalf("patroni: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("patroni logs:\n%s", pc.Logs())
		}
		pc.Close()
	})
	return pc
}

// Require stops a test that needs PostgreSQL binaries when there are none,
// under testkit.Require's rule: it fails under CI (CI set), where a
// missing install must not pass green, and is skipped on a developer's
// machine. Under go test -short (make test-unit) the test is skipped
// outside CI: it runs against real PostgreSQL.
func Require(t testing.TB) {
	t.Helper()
	testkit.SkipShort(t, "needs PostgreSQL")
	_, err := BinDir()
	testkit.Require(t, err)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Conn opens a connection to the node, closed when the test ends.
func (n *Node) Conn(t testing.TB) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, n.DSN())
	if err != nil {
		t.Fatalf("connect to %s: %v", n.Name, err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// Exec runs sql on the node and fails the test on error.
func (n *Node) Exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	n.withConn(t, sql, func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, sql, args...)
		return err
	})
}

// withConn runs fn on a fresh connection to the node, with a deadline,
// and fails the test on error.
func (n *Node) withConn(t testing.TB, sql string, fn func(context.Context, *pgx.Conn) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, n.DSN())
	if err != nil {
		t.Fatalf("connect to %s: %v", n.Name, err)
	}
	defer conn.Close(context.Background())
	if err := fn(ctx, conn); err != nil {
		t.Fatalf("%s on %s: %v", sql, n.Name, err)
	}
}

// Follow points a replica at another upstream (after a failover) and
// reloads it; it switches to the upstream's latest timeline.
func (n *Node) Follow(t testing.TB, upstream *Node) {
	t.Helper()
	n.Exec(t, "ALTER SYSTEM SET primary_conninfo = '"+
		"host="+upstream.IP+" port="+strconv.Itoa(upstream.Port)+" user=postgres application_name="+n.Name+"'")
	n.Exec(t, "SELECT pg_reload_conf()")
}

// Query runs sql on the node and scans one row into dest.
func (n *Node) Query(t testing.TB, sql string, dest ...any) {
	t.Helper()
	n.withConn(t, sql, func(ctx context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(ctx, sql).Scan(dest...)
	})
}
