package test

// Helpers of the tests of a host that refuses new sessions (its pg_hba.conf
// reloaded, a certificate that no longer verifies, a misspelt
// session_preload_libraries, a standby at serializable) while pgdns's own
// session, open from before, works on: what a client gets is asked of a
// new session, and what pgdns answers of each pgdns in front.

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// inNewSession runs sql in a new session on n, as an application would,
// and returns the statement's error; a session that does not start fails
// t (these tests ask what a started session is let do).
func inNewSession(t *testing.T, n *pgtest.Node, sql string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, n.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, sql)
	return err
}

// refusesNewSessions waits until a client connecting with dsn is refused
// with an error that says why (a reload is asynchronous).
func refusesNewSessions(t *testing.T, ctx context.Context, dsn, why string) {
	t.Helper()
	testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "a client of "+dsn+" refused", func() (string, bool) {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		c, err := pgx.Connect(cctx, dsn)
		if err == nil {
			c.Close(cctx)
			return "admitted", false
		}
		return err.Error(), strings.Contains(err.Error(), why)
	})
}

// takesOut waits until e answers replica.db.local with rest alone, out
// taken out, and /v1/resolve gives out's reason with why in it (as its
// JSON has it: a quote is \"); it returns how long the first took. The
// bound is generous: the evidence comes with an admission attempt or a
// trial, seconds apart, more under load.
func (e *env) takesOut(t *testing.T, out *pgtest.Node, rest []string, why string) time.Duration {
	t.Helper()
	took := e.waitWithin(t, 60*time.Second, "replica.db.local.", rest)
	var res string
	if !testkit.Poll(10*time.Second, 50*time.Millisecond, func() bool {
		_, res = e.get(t, http.DefaultClient, "/v1/resolve?name="+url.QueryEscape("replica.db.local"), "")
		return strings.Contains(res, `{"addr":"`+out.Addr()+`","reason":"`) && strings.Contains(res, why)
	}) {
		t.Fatalf("/v1/resolve does not say %s is out because %s: %s", out.Name, why, res)
	}
	return took
}

// keepsBothReplicas fails t unless the pgdns of pgdns that names name
// each answer both replicas in replica.db.local all through 15 s (at
// probe.admission_interval 100ms: a dozen startup packets and two
// trials): a refusal that proves nothing of the clients must not take a
// host out.
func keepsBothReplicas(t *testing.T, pgdns map[string]*env, names ...string) {
	t.Helper()
	if took, held := testkit.Holds(15*time.Second, 100*time.Millisecond, func() bool {
		for _, name := range names {
			if got := pgdns[name].ips(t, "replica.db.local."); len(got) != 2 {
				t.Logf("pgdns %s answers %v: %q", name, got, pgdns[name].txt(t, "any.db.local."))
				return false
			}
		}
		return true
	}); !held {
		t.Fatalf("a replica left the answers after %v", took)
	}
}
