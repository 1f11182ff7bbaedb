package test

// The probe's own session must not change what pgdns reads of a server
// (review 2, R15 and R1): a role or database setting on the probe role
// (search_path, pgdns.drain) is applied to pgdns's session only, and
// replicated to every host; the server's state is what its configuration
// says. One cluster for every case; each case starts a new pgdns, whose
// sessions start with the settings in place.

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

func TestProbeSessionSettings(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(3)})
	p, r1, r2 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	p.Exec(t, "CREATE ROLE pgdns LOGIN IN ROLE pg_monitor")
	o := envOptions{DSN: "user=pgdns dbname=postgres sslmode=disable"}
	replicas := slices.Sorted(slices.Values([]string{r1.IP, r2.IP}))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The role reaches the replicas by replication.
	for _, n := range []*pgtest.Node{r1, r2} {
		testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "the probe role on "+n.Name, func() (bool, bool) {
			var ok bool
			err := n.QueryOnce(ctx, "SELECT count(*) = 1 FROM pg_roles WHERE rolname = 'pgdns'", &ok)
			return ok, err == nil && ok
		})
	}
	// settingsReplicated waits until both replicas have replayed the role
	// and database settings the primary has now. A session pgdns opens on
	// a replica before it replays an ALTER ROLE or ALTER DATABASE ... SET
	// starts without the setting, rightly reads the server's value, and
	// keeps it (a session whose settings are not shadowed is not
	// reopened): a case that attached pgdns right after the SET tested
	// that race, and under load lost it (the drain case: replica.db.local
	// kept r1 or r2).
	settingsReplicated := func() {
		t.Helper()
		const settings = `SELECT coalesce(string_agg(setdatabase::text || '/' || setrole::text || '=' || array_to_string(setconfig, ','), ';'
		  ORDER BY setdatabase, setrole), '') FROM pg_db_role_setting`
		var want string
		p.Query(t, settings, &want)
		for _, n := range []*pgtest.Node{r1, r2} {
			testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "the role and database settings on "+n.Name, func() (string, bool) {
				var got string
				err := n.QueryOnce(ctx, settings, &got)
				return got, err == nil && got == want
			})
		}
	}
	hostNote := func(e *env, addr string) string {
		t.Helper()
		_, body := e.get(t, http.DefaultClient, "/v1/hosts", "")
		i := strings.Index(body, `"addr":"`+addr+`"`)
		if i < 0 {
			t.Fatalf("/v1/hosts has no %s: %s", addr, body)
		}
		return body[i : i+strings.Index(body[i:], "}")]
	}

	t.Run("a search_path on the probe role shadows no function of the probe", func(t *testing.T) {
		p.Exec(t, "CREATE SCHEMA evil")
		p.Exec(t, "CREATE FUNCTION evil.pg_is_in_recovery() RETURNS boolean LANGUAGE sql AS 'SELECT true'")
		p.Exec(t, "CREATE FUNCTION evil.pg_current_wal_insert_lsn() RETURNS pg_lsn LANGUAGE sql AS 'SELECT ''0/1''::pg_lsn'")
		p.Exec(t, "GRANT USAGE ON SCHEMA evil TO PUBLIC")
		p.Exec(t, "ALTER ROLE pgdns SET search_path = evil, pg_catalog")
		defer p.Exec(t, "ALTER ROLE pgdns RESET search_path")
		settingsReplicated()
		// A session of the probe role without pgdns's startup parameter
		// takes the look-alike.
		conn, err := pgx.Connect(ctx, strings.Replace(p.DSN(), "user=postgres", "user=pgdns", 1))
		if err != nil {
			t.Fatal(err)
		}
		var inRecovery bool
		err = conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery)
		conn.Close(ctx)
		if err != nil || !inRecovery {
			t.Fatal("the look-alike function does not shadow pg_catalog's: the test proves nothing")
		}
		e := attach(t, pg, o) // fails here before the fix: primary.db.local empty
		e.waitFor(t, "replica.db.local.", replicas)
		if got := e.ips(t, "primary.db.local."); !slices.Equal(got, []string{p.IP}) {
			t.Fatalf("primary.db.local answers %v, want %s", got, p.IP)
		}
	})

	t.Run("timeouts and isolation on the probe role stop no probe and end no session", func(t *testing.T) {
		// Review 5, F9: before the fix statement_timeout made every host
		// down (prepare: 57014), idle_session_timeout ended the session
		// between two probes (a flap), serializable made the hot standbys
		// refuse the probe.
		settings := []string{"statement_timeout = '1ms'", "lock_timeout = '1ms'", "idle_in_transaction_session_timeout = '1ms'",
			"idle_session_timeout = '50ms'", "default_transaction_isolation = serializable"}
		for _, s := range settings {
			p.Exec(t, "ALTER ROLE pgdns SET "+s)
		}
		defer func() {
			for _, s := range settings {
				p.Exec(t, "ALTER ROLE pgdns RESET "+s[:strings.Index(s, " ")])
			}
		}()
		for _, n := range []*pgtest.Node{r1, r2} { // the role's settings reach the replicas
			testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "the role's settings on "+n.Name, func() (int, bool) {
				var k int
				err := n.QueryOnce(ctx, "SELECT coalesce(array_length(setconfig, 1), 0) FROM pg_db_role_setting WHERE setrole = 'pgdns'::regrole", &k)
				return k, err == nil && k == len(settings)
			})
		}
		e := attach(t, pg, o) // fails here before the fix: primary.db.local empty
		e.waitFor(t, "replica.db.local.", replicas)
		// Ten probe intervals of 100 ms, each idle for longer than 50 ms: a
		// session the server ended would have taken its host down.
		if n, ok := testkit.Holds(2*time.Second, 100*time.Millisecond, func() bool {
			return slices.Equal(e.ips(t, "primary.db.local."), []string{p.IP}) && slices.Equal(e.ips(t, "replica.db.local."), replicas)
		}); !ok {
			t.Fatalf("the answers changed after %d checks:\n%s", n, e.logs.String())
		}
		if logs := e.logs.String(); strings.Contains(logs, "to=down") {
			t.Fatalf("a host went down:\n%s", logs)
		}
	})

	t.Run("ALTER ROLE SET pgdns.drain drains every replica until RESET", func(t *testing.T) {
		p.Exec(t, "ALTER ROLE pgdns SET pgdns.drain = on")
		settingsReplicated()
		e := attach(t, pg, o)
		e.waitFor(t, "replica.db.local.", []string{})
		if got := e.ips(t, "primary.db.local."); !slices.Equal(got, []string{p.IP}) {
			t.Fatalf("primary.db.local answers %v, want %s: a drained primary stays the primary", got, p.IP)
		}
		if note := hostNote(e, r1.Addr()); !strings.Contains(note, "ALTER ROLE") || !strings.Contains(note, "counted as drained") {
			t.Errorf("%s's note does not say why it is drained: %s", r1.Addr(), note)
		}
		p.Exec(t, "ALTER ROLE pgdns RESET pgdns.drain")
		// Before the fix: never (the open sessions keep the role's value).
		e.waitFor(t, "replica.db.local.", replicas)
		if note := hostNote(e, r1.Addr()); strings.Contains(note, "counted as drained") {
			t.Errorf("%s is undrained but its note still says: %s", r1.Addr(), note)
		}
	})

	for _, c := range []struct{ name, set, reset string }{
		{"ALTER ROLE", "ALTER ROLE pgdns SET pgdns.drain = off", "ALTER ROLE pgdns RESET pgdns.drain"},
		{"ALTER DATABASE", "ALTER DATABASE postgres SET pgdns.drain = off", "ALTER DATABASE postgres RESET pgdns.drain"},
		{"ALTER ROLE IN DATABASE", "ALTER ROLE pgdns IN DATABASE postgres SET pgdns.drain = off", "ALTER ROLE pgdns IN DATABASE postgres RESET pgdns.drain"},
	} {
		t.Run(c.name+" SET pgdns.drain = off does not hide the server's drain", func(t *testing.T) {
			p.Exec(t, c.set)
			settingsReplicated() // else r1 may be drained by its own value alone: the case would prove nothing
			if err := r1.SetCustom(ctx, "pgdns.drain", "on"); err != nil {
				t.Fatal(err)
			}
			e := attach(t, pg, o)
			// Before the fix: .r1 answered (pgdns's session reads off).
			e.waitFor(t, "replica.db.local.", []string{})
			p.Exec(t, c.reset)
			e.waitFor(t, "replica.db.local.", []string{r2.IP})
			if err := r1.SetCustom(ctx, "pgdns.drain", ""); err != nil {
				t.Fatal(err)
			}
			e.waitFor(t, "replica.db.local.", replicas)
		})
	}
}
