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
	"strings"
	"testing"

	"github.com/pgdns/pgdns/internal/pgtest"
)

func TestEveryRoleFenceThroughAReadOnlyProbeRole(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(2)})
	p, r := pg.Nodes[0], pg.Nodes[1]
	e := attachWithHardenedRole(t, pg, "default_transaction_read_only = on")

	write := func() error { return applicationExec(p, "CREATE TABLE IF NOT EXISTS fenced (id int)") }
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
