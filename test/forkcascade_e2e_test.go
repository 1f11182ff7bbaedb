package test

// Review 7, H3: a replica cascading from a replica on another branch is on
// that branch too, but only its own position could prove it (forks.go): a
// cascade behind the restored primary's position (one that was cut off for
// a moment) replays the dead branch's WAL from its upstream while the
// restored primary writes ahead of it, and was answered by replica and
// lag- names with the dead branch's data, although pgdns set its upstream
// aside and read that the cascade streams from it.

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/testkit"
)

func TestCascadeOfAForkedReplica(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{Nodes: 3})
	n1, n2, n3 := e.pg.Nodes[0], e.pg.Nodes[1], e.pg.Nodes[2]
	ctx := context.Background()
	// n3 cascades from n2.
	n3.Follow(t, n2)
	e.waitFor(t, "replica.db.local.", []string{n2.IP, n3.IP})
	writeAndTakeLSN(t, n1.Conn(t), "CREATE TABLE t (id serial PRIMARY KEY, v text)")

	snap := snapshotInPlace(t, e, n1)
	// n3 is cut off from n2 for a while (a network blip, a restart).
	n3.Exec(t, "ALTER SYSTEM SET primary_conninfo = 'host="+e.block.IP(99)+" port=5432 user=postgres connect_timeout=1'")
	n3.Exec(t, "SELECT pg_reload_conf()")
	conn := n1.Conn(t)
	writeAndTakeLSN(t, conn, "INSERT INTO t (v) SELECT repeat('w', 200) FROM generate_series(1, 500)")
	lost := writeAndTakeLSN(t, conn, "INSERT INTO t (v) VALUES ('lost to the restore')")
	conn.Close(ctx)
	waitStreaming(t, n2, 1, lost)
	// n2 loses its upstream too, as in H2: its WAL stays the dead branch's
	// (a receiver reconnecting to the restored n1 once that has written
	// past n2's segment start would overwrite it with the restored branch).
	n2.Exec(t, "ALTER SYSTEM SET primary_conninfo = 'host="+e.block.IP(98)+" port=5432 user=postgres connect_timeout=1'")
	n2.Exec(t, "SELECT pg_reload_conf()")

	// The restore in place, and the restored n1 writes ahead at once.
	restoreInPlace(t, n1, snap)
	// n2, read past the restored n1's position before a probe of it, is
	// proven on another branch (H2) before n1 writes past it: a probe of n1
	// only after that write would prove nothing of n2's position.
	e.waitHost(t, n2.Addr(), "set aside as on another branch", func(h hostState) bool { return h.Aside == "forked" })
	onB := writeAndTakeLSN(t, n1.Conn(t), "CREATE TABLE b AS SELECT repeat('y', 100) AS v FROM generate_series(1, 5000)")
	var n3replay string
	n3.Query(t, "SELECT pg_last_wal_replay_lsn()::text", &n3replay)
	t.Logf("restored n1 at %s; n3 replayed %s; the lost write at %s", onB, n3replay, lost)
	if parseLSN(t, n3replay) >= parseLSN(t, onB) {
		t.Fatalf("n3 (%s) is not behind the restored n1 (%s): nothing to test", n3replay, onB)
	}
	// n3 reconnects to n2 and replays the dead branch (the lost write).
	time.Sleep(time.Second)
	n3.Follow(t, n2)
	testkit.Eventually(t, 20*time.Second, 100*time.Millisecond, "n3 to replay the lost write from n2", func() (int, bool) {
		var has int
		n3.Query(t, "SELECT count(*) FROM t WHERE v = 'lost to the restore'", &has)
		return has, has == 1
	})
	var b int
	n3.Query(t, "SELECT count(*) FROM pg_class WHERE relname = 'b'", &b)
	t.Logf("n3: the lost write's row 1, table b (the restored branch's) %d; TXT %q", b, e.txt(t, "any.db.local."))
	// Set aside at pgdns's first probe of n3 that shows its receiver
	// streaming from n2 (until then pgdns knew n3 only behind, on the
	// branches' shared prefix), and for good.
	h := e.waitHost(t, n3.Addr(), "set aside as on n2's branch", func(h hostState) bool { return h.Aside == "forked" })
	if want := "streams from " + n2.Addr() + ", which is on another branch of timeline 1"; !strings.Contains(h.Note, want) {
		t.Errorf("n3 set aside with %q, want %q", h.Note, want)
	}
	for _, name := range []string{"replica.db.local.", "lag-10s.replica.db.local."} {
		e.holds(t, name, 2*time.Second, without(n3.IP),
			"n3, which cascades from n2 and replayed the dead branch of timeline 1 (it has the lost write, lacks table b)")
	}
	if _, body := e.get(t, http.DefaultClient, "/v1/resolve?name=replica.db.local.", ""); !strings.Contains(body, "streams from "+n2.Addr()) {
		t.Errorf("/v1/resolve does not say why n3 is set aside: %s", body)
	}
}
