package test

// The scene of the orphaned-replica tests (orphanreach_e2e_test.go,
// receiverlessorphan_e2e_test.go): a cluster whose nodes pgdns probes on
// one address while replication and the test's own sessions use another,
// so that pgdns can lose a node the others still reach; the primary's
// last write reaches one replica alone, and the other is promoted.

import (
	"context"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// newDualAddressCluster starts a primary and two streaming replicas on
// b's first three addresses. Every node listens on a second address too
// (b.Fleet(i) beside b.IP(i)); replicas stream from the primary's, and
// the test reaches each node by it (altDSN), so that a cut of the address
// pgdns probes (cutOff) leaves both paths open.
func newDualAddressCluster(t *testing.T, b *pgtest.Block) (pg *pgtest.Cluster, altDSN func(*pgtest.Node) string) {
	t.Helper()
	alt := func(ip string) string {
		for i := 1; i <= 3; i++ {
			if b.IP(i) == ip {
				return b.Fleet(i)
			}
		}
		return ip
	}
	pg = pgtest.New(t, pgtest.Options{IPs: b.IPs(3),
		Listen:   func(ip string) []string { return []string{alt(ip)} },
		Upstream: func(_, upstream string) string { return alt(upstream) }})
	altDSN = func(n *pgtest.Node) string { return strings.Replace(n.DSN(), "host="+n.IP, "host="+alt(n.IP), 1) }
	return pg, altDSN
}

// holdWALSender stops (SIGSTOP) the WAL sender that streams to the
// standby named name, found on conn, a session of the primary's: that
// standby receives nothing more until the sender is killed.
func holdWALSender(t *testing.T, conn *pgx.Conn, name string) {
	t.Helper()
	var pid int
	if err := conn.QueryRow(context.Background(), "SELECT pid FROM pg_stat_replication WHERE application_name = $1", name).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
}
