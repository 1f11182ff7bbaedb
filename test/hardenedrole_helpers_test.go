package test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// attachWithHardenedRole creates the probe role pgdns (pg_monitor) on pg's
// primary with a role setting of its own (setting, as "name = value"),
// which hides the server's value of that setting from pgdns's session,
// waits until the standby pg.Nodes[1] has the role, and puts pgdns in
// front of both nodes probing as pgdns.
func attachWithHardenedRole(t *testing.T, pg *pgtest.Cluster, setting string) *env {
	t.Helper()
	p, r := pg.Nodes[0], pg.Nodes[1]
	p.Exec(t, "CREATE ROLE pgdns LOGIN IN ROLE pg_monitor")
	p.Exec(t, "ALTER ROLE pgdns SET "+setting)
	testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "the probe role on "+r.Name, func() (bool, bool) {
		var ok bool
		err := r.QueryOnce(t.Context(), "SELECT count(*) = 1 FROM pg_roles WHERE rolname = 'pgdns'", &ok)
		return ok, err == nil && ok
	})
	return attach(t, pg, envOptions{DSN: "user=pgdns dbname=postgres sslmode=disable", Nodes: 2})
}

// applicationExec runs sql on a new session of n, as an application's
// own session gets the every-role settings: its error, if any.
func applicationExec(n *pgtest.Node, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, n.DSN())
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, sql)
	return err
}
