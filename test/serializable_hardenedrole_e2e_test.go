package test

// Review 14a, finding 3: as for a fence (readonly_hardenedrole_e2e_test.go),
// a probe role with an isolation of its own hides the value a new session
// gets, but ALTER ROLE ALL SET default_transaction_isolation = serializable
// is in the catalog rows pgdns reads, and every application session on a
// hot standby then refuses every query: no read name may answer one.

import (
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

func TestEveryRoleSerializableThroughAProbeRoleOfItsOwnIsolation(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(2)})
	p, r := pg.Nodes[0], pg.Nodes[1]
	e := attachWithHardenedRole(t, pg, "default_transaction_isolation = 'read committed'")
	e.waitFor(t, "replica.db.local.", []string{r.IP})

	read := func() error { return applicationExec(r, "SELECT 1") }
	p.Exec(t, "ALTER ROLE ALL SET default_transaction_isolation = serializable")
	testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "an application's read on the standby refused", func() (string, bool) {
		err := read()
		if err == nil {
			return "admitted", false
		}
		return err.Error(), strings.Contains(err.Error(), "serializable")
	})
	e.waitFor(t, "replica.db.local.", nil)
	e.waitFor(t, "prefer-replica.db.local.", []string{p.IP})

	p.Exec(t, "ALTER ROLE ALL RESET default_transaction_isolation")
	e.waitFor(t, "replica.db.local.", []string{r.IP})
}
