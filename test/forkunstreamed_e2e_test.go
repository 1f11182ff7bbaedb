package test

// Review 7, H2: a replica on another branch of the primary's timeline was
// proven so (rule 1, "forked") only from a sample with an exact timeline,
// i.e. while its WAL receiver streamed. A replica whose upstream is
// unreachable has no receiver; its replay position past the restored
// primary's (read before the primary's probe started) proves just as well
// that it does not follow the primary's WAL, and it was answered by
// replica, lag- names at lag 0, and by a fresh pgdns for lsn- tokens of the
// primary's new writes, which it lacks.

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestReplicaAheadOfARestoredPrimaryWithoutReceiver(t *testing.T) {
	t.Parallel()
	running := newEnv(t, envOptions{Nodes: 2})
	n1, n2 := running.pg.Nodes[0], running.pg.Nodes[1]
	ctx := context.Background()
	running.waitFor(t, "replica.db.local.", []string{n2.IP})
	writeAndTakeLSN(t, n1.Conn(t), "CREATE TABLE t (id serial PRIMARY KEY, v text)")

	snap := snapshotInPlace(t, running, n1)
	conn := n1.Conn(t)
	writeAndTakeLSN(t, conn, "INSERT INTO t (v) SELECT repeat('w', 200) FROM generate_series(1, 500)")
	lost := writeAndTakeLSN(t, conn, "INSERT INTO t (v) VALUES ('lost to the restore')")
	waitStreaming(t, n2, 1, lost)
	conn.Close(ctx)

	// n2 loses its upstream (a network change, a VIP moved): no WAL
	// receiver streams any more. Then n1 is restored in place.
	n2.Exec(t, "ALTER SYSTEM SET primary_conninfo = 'host="+running.block.IP(99)+" port=5432 user=postgres connect_timeout=1'")
	n2.Exec(t, "SELECT pg_reload_conf()")
	restoreInPlace(t, n1, snap)
	var has int
	n2.Query(t, "SELECT count(*) FROM t WHERE v = 'lost to the restore'", &has)
	if has != 1 {
		t.Fatalf("n2 lacks the lost write (%d rows)", has)
	}
	fresh := attach(t, running.pg, envOptions{})

	// A client writes on the restored n1: its token lies below n2's replay.
	mine := writeAndTakeLSN(t, n1.Conn(t), "INSERT INTO t (v) VALUES ('after the restore')")
	var n2replay string
	n2.Query(t, "SELECT pg_last_wal_replay_lsn()::text", &n2replay)
	if parseLSN(t, mine) >= parseLSN(t, n2replay) {
		t.Fatalf("the new write %s is not below n2's replay %s: nothing to test", mine, n2replay)
	}
	n2.Query(t, "SELECT count(*) FROM t WHERE v = 'after the restore'", &has)
	if has != 0 {
		t.Fatalf("n2 has the new write (%d rows)", has)
	}
	t.Logf("token %s, n2 replayed %s (with the lost write), n1 restored", mine, n2replay)
	for _, e := range []struct {
		name string
		e    *env
	}{{"the pgdns running throughout", running}, {"a pgdns started after the restore", fresh}} {
		// Once pgdns has probed the restored n1 (its position below n2's;
		// a pgdns backing off a host that was down may take seconds),
		// n2 is never answered.
		e.e.waitHost(t, n1.Addr(), "seen at the restored n1's position", func(h hostState) bool {
			return h.ReplayLSN != nil && parseLSN(t, *h.ReplayLSN) < parseLSN(t, n2replay)
		})
		for _, name := range []string{"lsn-" + mine + ".replica.db.local.", "lsn-" + mine + ".prefer-replica.db.local.",
			"replica.db.local.", "lag-1s.replica.db.local."} {
			e.e.holds(t, name, 500*time.Millisecond, without(n2.IP),
				e.name+": n2 is on another branch of timeline 1 (replayed "+n2replay+", past the restored primary; it lacks "+
					mine+" and has a write the primary lost)")
		}
		// Set aside, and /v1/resolve says why.
		h := e.e.waitHost(t, n2.Addr(), "set aside as on another branch", func(h hostState) bool { return h.Aside == "forked" })
		if !strings.Contains(h.Note, "another branch of timeline 1") {
			t.Errorf("%s: n2 set aside with %q", e.name, h.Note)
		}
		if _, body := e.e.get(t, http.DefaultClient, "/v1/resolve?name=replica.db.local.", ""); !strings.Contains(body, "another branch of timeline 1") {
			t.Errorf("%s: /v1/resolve does not say why n2 is set aside: %s", e.name, body)
		}
	}
}
