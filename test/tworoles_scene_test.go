package test

import (
	"context"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// twoRoles is a primary and two streaming replicas with two pgdns in front,
// for a fault that each way of checking admission must see: "status"
// probes as postgres, which reads postmaster.pid (the bare connect, reach,
// is what checks), "sessions" as a role in pg_monitor only (a new session
// every admission interval). Both answer both replicas when it returns.
func twoRoles(t *testing.T, ctx context.Context) (*pgtest.Cluster, map[string]*env) {
	t.Helper()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(3)})
	pg.Nodes[0].Exec(t, "CREATE ROLE watcher LOGIN IN ROLE pg_monitor")
	testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "the role on the replica", func() (bool, bool) {
		var ok bool
		err := pg.Nodes[1].QueryOnce(ctx, "SELECT count(*) = 1 FROM pg_roles WHERE rolname = 'watcher'", &ok)
		return ok, err == nil && ok
	})
	pgdns := map[string]*env{
		"status":   attach(t, pg, envOptions{}),
		"sessions": attach(t, pg, envOptions{DSN: "user=watcher dbname=postgres sslmode=disable"}),
	}
	for _, e := range pgdns {
		e.waitFor(t, "replica.db.local.", []string{pg.Nodes[1].IP, pg.Nodes[2].IP})
	}
	return pg, pgdns
}
