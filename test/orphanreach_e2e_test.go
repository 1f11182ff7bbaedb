package test

// Review 12a: a token without a timeline of a write that only an orphaned
// replica has. The primary's last write before it died reached one replica
// and not the other, and pgdns did not see the primary insert it (its last
// probe of the primary came before the write: here the primary is cut off
// from pgdns, which in a crash is the last probe interval). The replica
// that lacks the write is promoted; the one that has it cannot follow (it
// is past timeline 1's end) and stays on timeline 1, probed. Its replay
// position on timeline 1 proves that timeline 1's writer wrote that far,
// past where timeline 2 branched off: a token without a timeline up to it
// may be the lost write. Before, only the old writer's own insert position
// as pgdns last saw it bounded the window (rule 9), and lsn-W.any answered
// the new primary, which lacks the row.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

func TestTimelinelessTokenOfAWriteOnlyAnOrphanedReplicaHas(t *testing.T) {
	t.Run("replayed", func(t *testing.T) { orphanedWrite(t, false) })
	// The orphan's replay paused: it received W and did not replay it.
	t.Run("received", func(t *testing.T) { orphanedWrite(t, true) })
}

func orphanedWrite(t *testing.T, paused bool) {
	b := pgtest.Addrs(t)
	pg, dsn := newDualAddressCluster(t, b)
	e := attach(t, pg, envOptions{})
	old, promoted, orphan := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	ctx := context.Background()
	e.insertAndTakeLSN(t, old)
	e.waitFor(t, "replica.db.local.", []string{promoted.IP, orphan.IP})

	// pgdns loses the primary; clients and replicas do not.
	cutOff(t, fmt.Sprintf("pgdns_orphanreach_%d", b.Port()), old.IP)
	e.waitWithin(t, 30*time.Second, "primary.db.local.", nil)
	conn, err := pgx.Connect(ctx, dsn(old))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// The promoted one's WAL sender held: only the orphan receives W.
	holdWALSender(t, conn, promoted.Name)
	if paused {
		orphan.Exec(t, "SELECT pg_wal_replay_pause()")
	}
	w := writeAndTakeLSN(t, conn, "INSERT INTO t (v) VALUES ('W')")
	hasW := func(n *pgtest.Node) bool {
		c, err := pgx.Connect(ctx, dsn(n))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		var k int
		if err := c.QueryRow(ctx, "SELECT count(*) FROM t WHERE v = 'W'").Scan(&k); err != nil {
			t.Fatal(err)
		}
		return k > 0
	}
	if paused {
		// pgdns probes the orphan received past W.
		e.waitHost(t, orphan.Addr(), "received past W", func(h hostState) bool { return receivedPast(t, e, orphan.Addr(), w) })
	} else {
		testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "the orphan replayed W", func() (bool, bool) { b := hasW(orphan); return b, b })
		// pgdns probes the orphan past W.
		e.waitHost(t, orphan.Addr(), "replayed past W", func(h hostState) bool { return replayedPast(t, h, w) })
	}

	killAndPromote(t, old, promoted)
	testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "timeline 2 past W", func() (bool, bool) {
		promoted.Exec(t, "INSERT INTO t (v) SELECT repeat('y', 1000) FROM generate_series(1, 100)")
		var past bool
		promoted.Query(t, "SELECT pg_current_wal_lsn() > '"+strings.Replace(w, "-", "/", 1)+"'::pg_lsn", &past)
		return past, past
	})
	if hasW(promoted) || paused && hasW(orphan) {
		t.Fatal("the promoted replica has W: nothing is tested")
	}
	e.waitFor(t, "primary.db.local.", []string{promoted.IP})

	// W's token without a timeline: no host that lacks W, the new primary
	// included; with -t1 its history proves it lost.
	for _, target := range []string{"any", "prefer-replica", "primary", "replica"} {
		for _, tl := range []string{"", "-t1"} {
			e.holds(t, "lsn-"+w+tl+"."+target+".db.local.", time.Second, exactly(), "a host lacking W")
		}
	}
	txt := e.txt(t, "lsn-"+w+".any.db.local.")
	if !slices.ContainsFunc(txt, func(s string) bool {
		return strings.HasPrefix(s, "unprovable=") && strings.Contains(s, "may be a write of timeline 1 lost in the failover to 2") &&
			strings.Contains(s, "pgdns saw "+orphan.Addr()+" (in recovery) hold its WAL up to ")
	}) {
		t.Errorf("TXT of W's token %q: no unprovable= string saying it may be lost, shown by the orphan's replay", txt)
	}
	t.Logf("lsn-%s.any: TXT %q; /v1/resolve: %q", w, txt, resolveReason(t, e, "lsn-"+w+".any", promoted.Addr()))
	// A write of timeline 2 is answered as ever.
	later := e.insertAndTakeLSN(t, promoted)
	e.waitFor(t, "lsn-"+later+".any.db.local.", []string{promoted.IP})
}

// cutOff drops every packet to ip:5432 in an nftables table of the test's
// own, deleted when the test ends (or by heal, sooner): pgdns's probes and
// any client's connections to that address. A node's own WAL receiver
// connects out, and every local packet's source is 127.0.0.1, so a node
// cut off this way still streams, and is still reached by its other
// addresses.
func cutOff(t *testing.T, table, ip string) (heal func()) {
	t.Helper()
	return nftInput(t, table, "ip daddr "+ip+" tcp dport 5432 drop")
}

// receivedPast reports whether /v1/hosts shows addr received at or past lsn.
func receivedPast(t *testing.T, e *env, addr, lsn string) bool {
	t.Helper()
	_, body := e.get(t, http.DefaultClient, "/v1/hosts", "")
	var v struct {
		Hosts []struct {
			Addr       string  `json:"addr"`
			ReceiveLSN *string `json:"receive_lsn"`
		} `json:"hosts"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("/v1/hosts: %v: %s", err, body)
	}
	for _, h := range v.Hosts {
		if h.Addr == addr {
			return h.ReceiveLSN != nil && parseLSN(t, *h.ReceiveLSN) >= parseLSN(t, lsn)
		}
	}
	return false
}
