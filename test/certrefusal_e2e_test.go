package test

// A replica whose TLS no longer lets in the clients that connect as
// probe.dsn says (review 9, R9-1). Its certificate replaced by an expired
// one (a renewal that failed on that host) and reloaded: every client
// with sslmode=verify-ca is refused at the handshake, pgdns's own new
// sessions included, while pgdns's session, whose handshake was made
// before, works on. Or ssl turned off and reloaded (a config push that
// lost the line): every client with sslmode=require is refused ("server
// refused TLS connection"). Before the fix the host stayed in
// replica.db.local for as long as pgdns's session lived: the admission
// attempt's and the trial's TLS failures proved nothing. Now such a
// failure takes the host out with the reason, as an hba refusal does;
// it is back once a handshake verifies; and under sslmode=prefer, which
// verifies nothing and may go on without TLS, nothing changes.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// One cluster (ssl on, certificates of the test's CA), three pgdns in
// front of it probing as postgres with sslmode verify-ca, require (no
// root certificate: nothing verified) and prefer (the control).
// probe.admission_interval is 100ms: the startup packet goes every 1.2 s
// (every third reach) and a trial every 6 s.
func TestHostWhoseTLSRefusesClientsLeaves(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ca := pgtest.NewCA(t)
	pg := pgtest.NewTLS(t, ca, pgtest.Options{IPs: pgtest.Addrs(t).IPs(3)}, "pg")
	n2 := pg.Nodes[1]
	both := []string{n2.IP, pg.Nodes[2].IP}
	dsns := map[string]string{
		"verify-ca": "user=postgres dbname=postgres sslmode=verify-ca sslrootcert=" + ca.File,
		"require":   "user=postgres dbname=postgres sslmode=require",
		"prefer":    "user=postgres dbname=postgres sslmode=prefer sslrootcert=" + ca.File,
	}
	pgdns := map[string]*env{}
	for mode, dsn := range dsns {
		pgdns[mode] = attach(t, pg, envOptions{DSN: dsn, Probe: "  admission_interval: 100ms\n"})
	}
	for _, e := range pgdns {
		e.waitFor(t, "replica.db.local.", both)
	}
	// refused waits until a client connecting to n2 as probe.dsn of mode
	// says is refused with why.
	refused := func(t *testing.T, mode, why string) {
		t.Helper()
		refusesNewSessions(t, ctx, fmt.Sprintf("host=%s port=5432 connect_timeout=3 %s", n2.IP, dsns[mode]), why)
	}
	// leaves: the pgdns of each mode takes n2 out of replica.db.local
	// with why in /v1/resolve's reason (the startup packet every 1.2 s:
	// out within seconds).
	leaves := func(t *testing.T, why string, modes ...string) {
		t.Helper()
		for _, mode := range modes {
			if !t.Run("sslmode="+mode, func(t *testing.T) {
				took := pgdns[mode].takesOut(t, n2, []string{pg.Nodes[2].IP}, why)
				t.Logf("pgdns with sslmode=%s took n2 out after %v: %q", mode, took, pgdns[mode].txt(t, "any.db.local."))
			}) {
				t.FailNow()
			}
		}
	}
	back := func(t *testing.T, modes ...string) {
		t.Helper()
		for _, mode := range modes {
			took := pgdns[mode].waitWithin(t, 60*time.Second, "replica.db.local.", both)
			t.Logf("pgdns with sslmode=%s answered n2 again %v after the fix", mode, took)
		}
	}

	t.Run("an expired certificate", func(t *testing.T) {
		now := time.Now()
		crt, key := ca.IssueValid(t, now.Add(-48*time.Hour), now.Add(-time.Hour), "pg")
		n2.UseCertificate(t, crt, key)
		renew := func() {
			crt, key := ca.Issue(t, "pg")
			n2.UseCertificate(t, crt, key)
		}
		fixed := false
		defer func() {
			if !fixed {
				renew()
			}
		}()
		refused(t, "verify-ca", "certificate has expired")
		leaves(t, "its certificate does not verify: x509: certificate has expired", "verify-ca")
		// Neither prefer nor require without a root certificate verifies.
		keepsBothReplicas(t, pgdns, "prefer", "require")
		renew()
		fixed = true
		back(t, "verify-ca")
	})
	t.Run("ssl turned off", func(t *testing.T) {
		n2.Exec(t, "ALTER SYSTEM SET ssl = off")
		n2.Exec(t, "SELECT pg_reload_conf()")
		fixed := false
		defer func() {
			if !fixed {
				n2.Exec(t, "ALTER SYSTEM RESET ssl")
				n2.Exec(t, "SELECT pg_reload_conf()")
			}
		}()
		refused(t, "require", "server refused TLS connection")
		leaves(t, "it refuses TLS", "require", "verify-ca")
		keepsBothReplicas(t, pgdns, "prefer") // which goes on without TLS, as its clients do
		n2.Exec(t, "ALTER SYSTEM RESET ssl")
		n2.Exec(t, "SELECT pg_reload_conf()")
		fixed = true
		back(t, "require", "verify-ca")
	})
}
