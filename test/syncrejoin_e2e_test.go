package test

// A synchronous standby that rejoins after an outage (review 14a, finding
// 1). With FIRST 1 (r1, r2) and synchronous_commit = remote_apply, a
// commit returns once the one standby shown sync has applied it. While r1
// is away, r2 is that standby, and the commits of that time return once
// r2 has them. When r1 is back, its WAL sender is sync again the moment
// it has sent r1 everything (walsender state streaming), not once r1 has
// replayed it: r1 may lack commits that returned without it, for as long
// as its replay catches up (held here by recovery_min_apply_delay: a
// paused replay would not start its WAL receiver again). The
// sync filter must not answer it until it has replayed what the primary
// had written when it became synchronous; nor may a pgdns started while
// r1 catches up, which never saw it away.

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/testkit"
)

func TestRejoinedSyncStandbyLacksTheCommitsOfItsAbsence(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	p, r1, r2 := e.pg.Nodes[0], e.pg.Nodes[1], e.pg.Nodes[2]
	dsns := nodeDSNs(e.pg)
	e.insertAndTakeLSN(t, p)
	p.Exec(t, fmt.Sprintf(`ALTER SYSTEM SET synchronous_standby_names = 'FIRST 1 ("%s", "%s")'`, r1.Name, r2.Name))
	p.Exec(t, "SELECT pg_reload_conf()")
	e.waitFor(t, "sync.replica.db.local.", []string{r1.IP})

	// r1's WAL receiver stops: r2 becomes the synchronous standby.
	r1.Exec(t, "ALTER SYSTEM SET primary_conninfo = ''")
	r1.Exec(t, "SELECT pg_reload_conf()")
	e.waitFor(t, "sync.replica.db.local.", []string{r2.IP})
	r1.Exec(t, "ALTER SYSTEM SET recovery_min_apply_delay = '1h'")
	r1.Exec(t, "SELECT pg_reload_conf()")

	conn := p.Conn(t)
	if _, err := conn.Exec(t.Context(), "SET synchronous_commit = remote_apply"); err != nil {
		t.Fatal(err)
	}
	marker := "committed while r1 was away"
	tok := writeAndTakeLSN(t, conn, "INSERT INTO t (v) VALUES ($1)", marker)
	if has, ok := holdsRow(r2.DSN(), marker); !ok || !has {
		t.Fatalf("r2, the synchronous standby, lacks a remote_apply commit that returned (has %v, asked %v)", has, ok)
	}

	// r1 streams again, its replay held: the primary shows it sync
	// once its WAL sender has caught up.
	r1.Follow(t, p)
	testkit.Eventually(t, 30*time.Second, 20*time.Millisecond, "r1 sync again on the primary", func() (string, bool) {
		var got string
		p.Query(t, "SELECT coalesce(string_agg(application_name || '=' || sync_state, ',' ORDER BY application_name), '') FROM pg_stat_replication", &got)
		return got, strings.Contains(got, r1.Name+"=sync")
	})
	// A pgdns started now (a restart, a second instance) knows nothing of
	// r1's absence: the same holds for it.
	fresh := attach(t, e.pg, envOptions{})
	for _, d := range []*env{e, fresh} {
		neverLacking(t, d, dsns, 3*time.Second, marker, "sync.replica.db.local.", "sync.any.db.local.", "lsn-"+tok+".replica.db.local.")
		if got := d.ips(t, "sync.replica.db.local."); slices.Contains(got, r1.IP) {
			t.Fatalf("sync.replica answered %v, r1 among them, which lacks the row", got)
		}
	}
	var resolve string
	testkit.Eventually(t, 10*time.Second, 20*time.Millisecond, "/v1/resolve says why r1 is not answered", func() (string, bool) {
		_, resolve = e.get(t, http.DefaultClient, "/v1/resolve?name=sync.replica", "")
		return resolve, strings.Contains(resolve, "synchronous only since")
	})

	// Its replay no longer held, it has the commit and is answered again.
	r1.Exec(t, "ALTER SYSTEM RESET recovery_min_apply_delay")
	r1.Exec(t, "SELECT pg_reload_conf()")
	e.waitFor(t, "sync.replica.db.local.", []string{r1.IP})
	fresh.waitFor(t, "sync.replica.db.local.", []string{r1.IP})
	if has, ok := holdsRow(r1.DSN(), marker); !ok || !has {
		t.Fatalf("r1 answered by sync.replica without the row (has %v, asked %v)", has, ok)
	}
}
