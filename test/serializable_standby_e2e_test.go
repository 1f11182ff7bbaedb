package test

// A hot standby whose new sessions are serializable refuses every read
// (review 8, R8-8): "cannot use serializable mode in a hot standby". pgdns
// sets read committed for its own session (so that its probe works), and
// must still answer what a new client session gets: no read name answers
// such a standby until the setting is lifted (docs/decisions.md rule 12).

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// execReadCommitted runs sql on n in a session of read committed, which a
// standby at serializable still serves (pg_reload_conf() is a query).
func execReadCommitted(t *testing.T, n *pgtest.Node, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(n.DSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["default_transaction_isolation"] = "read committed"
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, sql); err != nil {
		t.Fatalf("%s on %s: %v", sql, n.Name, err)
	}
}

// wantRefused fails t unless a client's read on n is refused as a hot
// standby at serializable refuses it.
func wantRefused(t *testing.T, n *pgtest.Node) {
	t.Helper()
	testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "a client's read refused on "+n.Name, func() (error, bool) {
		err := inNewSession(t, n, "SELECT 1")
		return err, err != nil && strings.Contains(err.Error(), "cannot use serializable mode in a hot standby")
	})
}

func TestStandbyRefusingEveryReadLeavesEveryReadName(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(3)})
	e := attach(t, pg, envOptions{})
	p, n2, n3 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	both := []string{n2.IP, n3.IP}
	e.waitFor(t, "replica.db.local.", both)
	resolveWhy := func(name, addr string) string {
		t.Helper()
		_, body := e.get(t, http.DefaultClient, "/v1/resolve?name="+name, "")
		i := strings.Index(body, `{"addr":"`+addr+`","reason":"`)
		if i < 0 {
			return "not excluded: " + body
		}
		return body[i:]
	}

	t.Run("ALTER SYSTEM on one standby, then RESET", func(t *testing.T) {
		n2.Exec(t, "ALTER SYSTEM SET default_transaction_isolation = 'serializable'")
		n2.Exec(t, "SELECT pg_reload_conf()")
		wantRefused(t, n2)
		// Before the fix: replica.db.local kept answering n2.
		e.waitFor(t, "replica.db.local.", []string{n3.IP})
		e.waitFor(t, "prefer-replica.db.local.", []string{n3.IP})
		e.waitFor(t, "any.db.local.", []string{p.IP, n3.IP})
		e.waitFor(t, "lag-10s.replica.db.local.", []string{n3.IP})
		token := e.insertAndTakeLSN(t, p)
		e.waitFor(t, "lsn-"+token+".replica.db.local.", []string{n3.IP})
		if why := resolveWhy("replica", n2.Addr()); !strings.Contains(why, "drained (serializable)") ||
			!strings.Contains(why, "cannot use serializable mode in a hot standby") {
			t.Errorf("/v1/resolve?name=replica for %s: %s, want the serializable reason", n2.Addr(), why)
		}
		hostName := strings.ReplaceAll(n2.IP, ".", "-") + "-5432.host.main.db.local."
		if txt := e.txt(t, hostName); len(txt) != 1 || !strings.Contains(txt[0], "drained_by=serializable") {
			t.Errorf("TXT of n2's host name = %q, want drained_by=serializable", txt)
		}

		// Lifted: answered again (before the fix's re-read on a reload:
		// never, the session kept what it started with).
		execReadCommitted(t, n2, "ALTER SYSTEM RESET default_transaction_isolation")
		execReadCommitted(t, n2, "SELECT pg_reload_conf()")
		testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "a client's read served on n2", func() (error, bool) {
			err := inNewSession(t, n2, "SELECT 1")
			return err, err == nil
		})
		e.waitFor(t, "replica.db.local.", both)
		e.waitFor(t, "any.db.local.", []string{p.IP, n2.IP, n3.IP})
	})

	for _, c := range []struct{ name, set, reset string }{
		{"ALTER ROLE ALL", "ALTER ROLE ALL SET default_transaction_isolation = 'serializable'", "ALTER ROLE ALL RESET default_transaction_isolation"},
		{"ALTER DATABASE", "ALTER DATABASE postgres SET default_transaction_isolation = 'serializable'", "ALTER DATABASE postgres RESET default_transaction_isolation"},
	} {
		t.Run(c.name+" on the primary, then RESET", func(t *testing.T) {
			p.Exec(t, c.set) // replicated: every standby refuses its new sessions' reads
			wantRefused(t, n2)
			wantRefused(t, n3)
			e.waitFor(t, "replica.db.local.", []string{})
			e.waitFor(t, "prefer-replica.db.local.", []string{p.IP}) // the primary serves serializable reads
			e.waitFor(t, "any.db.local.", []string{p.IP})
			e.waitFor(t, "primary.db.local.", []string{p.IP})
			if why := resolveWhy("replica", n3.Addr()); !strings.Contains(why, "drained (serializable)") {
				t.Errorf("/v1/resolve?name=replica for %s: %s, want the serializable reason", n3.Addr(), why)
			}
			p.Exec(t, c.reset)
			e.waitFor(t, "replica.db.local.", both)
		})
	}
}
