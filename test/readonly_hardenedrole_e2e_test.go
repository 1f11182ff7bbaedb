package test

// A fence for every role seen through a read-only probe role (review 14a,
// finding 2). The probe role hardened as usual (ALTER ROLE pgdns SET
// default_transaction_read_only = on) hides the server's value from
// pgdns's session, and rightly counts for nothing; but a fence of every
// role (ALTER ROLE ALL SET default_transaction_read_only = on) is in the
// very catalog rows pgdns reads, and it is what every application session
// gets (a role or database of its own aside): primary must not answer a
// host that refuses their writes.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

func TestEveryRoleFenceThroughAReadOnlyProbeRole(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(2)})
	p, r := pg.Nodes[0], pg.Nodes[1]
	p.Exec(t, "CREATE ROLE pgdns LOGIN IN ROLE pg_monitor")
	p.Exec(t, "ALTER ROLE pgdns SET default_transaction_read_only = on")
	testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "the probe role on "+r.Name, func() (bool, bool) {
		var ok bool
		err := r.QueryOnce(t.Context(), "SELECT count(*) = 1 FROM pg_roles WHERE rolname = 'pgdns'", &ok)
		return ok, err == nil && ok
	})
	e := attach(t, pg, envOptions{DSN: "user=pgdns dbname=postgres sslmode=disable", Nodes: 2})

	write := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, p.DSN())
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		_, err = c.Exec(ctx, "CREATE TABLE IF NOT EXISTS fenced (id int)")
		return err
	}
	p.Exec(t, "ALTER ROLE ALL SET default_transaction_read_only = on")
	if err := write(); err == nil || !strings.Contains(err.Error(), "read-only transaction") {
		t.Fatalf("an application session wrote on the fenced primary: %v", err)
	}
	e.waitFor(t, "primary.db.local.", nil)
	e.waitFor(t, "any.db.local.", []string{p.IP, r.IP})

	p.Exec(t, "BEGIN READ WRITE; ALTER ROLE ALL RESET default_transaction_read_only; COMMIT")
	if err := write(); err != nil {
		t.Fatalf("an application session cannot write on the unfenced primary: %v", err)
	}
	e.waitFor(t, "primary.db.local.", []string{p.IP})
}
