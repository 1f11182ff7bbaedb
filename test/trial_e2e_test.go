package test

// A replica whose every new session fails at its start, after
// authentication (review 8, R8-6): `ALTER SYSTEM SET
// session_preload_libraries = 'auto_explian'` (a typo in an extension
// rollout) and a reload make every new session end with FATAL 58P01
// "could not access file", a client's and pgdns's own, while pgdns's
// session, open from before, works. Before the fix the host stayed in
// replica.db.local for as long as that session lived: the status read
// said "ready", the bare connect ends at the SSLRequest's answer, and the
// startup packet at the password request. pgdns now completes a whole
// session start now and then (probe/trial.go): such a FATAL takes the
// host out with the server's message, and it is back once the setting
// is fixed; a failure of pgdns's own role (its password changed, its
// connection limit reached) keeps every host.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// One cluster, three pgdns in front of it: "trust" probes as postgres
// (trust; reads postmaster.pid, so the reach checks), "scram" as a
// superuser role authenticated by SCRAM-SHA-256 (reach, as in
// production), "sessions" as a pg_monitor role by SCRAM (an admission
// attempt every admission interval). probe.admission_interval is 100ms,
// so that a trial comes every 6 s (60 admission intervals; a minute at
// the default).
func TestSessionsFailingAtStartLeave(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(3), HBA: []string{"host all pgdns,watcher 0.0.0.0/0 scram-sha-256"}})
	pg.Nodes[0].Exec(t, "CREATE ROLE pgdns SUPERUSER LOGIN PASSWORD 'trial-secret'")
	pg.Nodes[0].Exec(t, "CREATE ROLE watcher LOGIN PASSWORD 'trial-secret' IN ROLE pg_monitor")
	testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "the roles on the replicas", func() (bool, bool) {
		var ok bool
		err := pg.Nodes[2].QueryOnce(ctx, "SELECT count(*) = 2 FROM pg_roles WHERE rolname IN ('pgdns', 'watcher')", &ok)
		return ok, err == nil && ok
	})
	o := func(dsn string) envOptions {
		return envOptions{DSN: dsn, Timeout: "5s", Probe: "  admission_interval: 100ms\n"}
	}
	pgdns := map[string]*env{
		"trust":    attach(t, pg, o("")),
		"scram":    attach(t, pg, o("user=pgdns password=trial-secret dbname=postgres sslmode=disable")),
		"sessions": attach(t, pg, o("user=watcher password=trial-secret dbname=postgres sslmode=disable")),
	}
	n2 := pg.Nodes[1]
	both := []string{n2.IP, pg.Nodes[2].IP}
	for _, e := range pgdns {
		e.waitFor(t, "replica.db.local.", both)
	}
	// Sessions opened before the faults: the server's settings are
	// changed and put back on them, since no new session starts meanwhile.
	admin := map[*pgtest.Node]*pgx.Conn{pg.Nodes[0]: pg.Nodes[0].Conn(t), n2: n2.Conn(t)}
	exec := func(t *testing.T, n *pgtest.Node, sqls ...string) {
		t.Helper()
		for _, sql := range sqls {
			if _, err := admin[n].Exec(ctx, sql); err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
		}
	}

	// pgdns's own role refused past authentication proves nothing about
	// the clients: for two trial periods every host stays answered, while
	// n2 logs pgdns's trials refused (logged, a refusal of the trials).
	keeps := func(t *testing.T, logged string, names ...string) {
		t.Helper()
		from := len(n2.Log())
		defer func() {
			if !strings.Contains(n2.Log()[from:], logged) {
				t.Errorf("n2 did not log %q: no trial of pgdns's ran", logged)
			}
		}()
		keepsBothReplicas(t, pgdns, names...)
	}
	t.Run("pgdns's own password changed", func(t *testing.T) {
		exec(t, pg.Nodes[0], "ALTER ROLE pgdns PASSWORD 'changed'")
		defer exec(t, pg.Nodes[0], "ALTER ROLE pgdns PASSWORD 'trial-secret'")
		keeps(t, `password authentication failed for user "pgdns"`, "scram")
	})
	t.Run("pgdns's own role at its connection limit", func(t *testing.T) {
		exec(t, pg.Nodes[0], "ALTER ROLE watcher CONNECTION LIMIT 1") // its one session a host
		defer exec(t, pg.Nodes[0], "ALTER ROLE watcher CONNECTION LIMIT -1")
		keeps(t, `too many connections for role "watcher"`, "sessions")
	})

	t.Run("a misspelt session_preload_libraries", func(t *testing.T) {
		exec(t, n2, "ALTER SYSTEM SET session_preload_libraries = 'auto_explian'", "SELECT pg_reload_conf()")
		fixed := false
		defer func() {
			if !fixed {
				exec(t, n2, "ALTER SYSTEM RESET session_preload_libraries", "SELECT pg_reload_conf()")
			}
		}()
		const why = `could not access file \"auto_explian\"` // as /v1/resolve's JSON has it
		refusesNewSessions(t, ctx, n2.DSN()+" connect_timeout=2", "58P01")
		for name, e := range pgdns {
			t.Run(name, func(t *testing.T) {
				// A trial every 6 s: out within one, more under load.
				took := e.takesOut(t, n2, []string{pg.Nodes[2].IP}, why)
				t.Logf("pgdns probing for %s took n2 out after %v", name, took)
			})
		}
		exec(t, n2, "ALTER SYSTEM RESET session_preload_libraries", "SELECT pg_reload_conf()")
		fixed = true
		for name, e := range pgdns {
			took := e.waitWithin(t, 30*time.Second, "replica.db.local.", both)
			t.Logf("pgdns probing for %s answered n2 again %v after the fix", name, took)
		}
	})
}
