package test

import (
	"context"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// cascadeFromRelay points n4 at n2, a standby of n1's that pgdns does not
// list (a DR site's relay), and waits until n4's WAL receiver streams
// from it.
func cascadeFromRelay(t *testing.T, n2, n4 *pgtest.Node) {
	t.Helper()
	n4.Follow(t, n2)
	testkit.Eventually(t, 30*time.Second, 50*time.Millisecond, "n4 cascading from n2", func() (string, bool) {
		var s string
		n4.Query(t, "SELECT coalesce((SELECT status||' '||sender_host FROM pg_stat_wal_receiver), '')", &s)
		return s, s == "streaming "+n2.IP
	})
}

// relayPromotedBesideW is the DR drill: the relay n2 is promoted
// (timeline 2) while n1 goes on as the primary on timeline 1 and writes W
// into table t right after the split, then much more; n2 writes a
// little, so that n4, cascading from n2 (cascadeFromRelay), replays past
// W's position numerically while staying behind n1's. It returns once n3
// has streamed W from n1 and n4 has replayed past W's position on n2's
// branch, with W's token.
func relayPromotedBesideW(t *testing.T, n1, n2, n3, n4 *pgtest.Node) (w string) {
	t.Helper()
	ctx := context.Background()
	if err := n2.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	c1 := n1.Conn(t)
	w = writeAndTakeLSN(t, c1, "INSERT INTO t (v) VALUES ('W')")
	if _, err := c1.Exec(ctx, "INSERT INTO t (v) SELECT repeat('a', 100) FROM generate_series(1, 2000)"); err != nil {
		t.Fatal(err)
	}
	c2 := n2.Conn(t)
	for range 10 {
		if _, err := c2.Exec(ctx, "INSERT INTO t (v) VALUES ('drill')"); err != nil {
			t.Fatal(err)
		}
	}
	waitStreaming(t, n3, 1, w)
	testkit.Eventually(t, 30*time.Second, 50*time.Millisecond, "n4 past W's position on n2's branch", func() (string, bool) {
		var s string
		n4.Query(t, "SELECT (pg_last_wal_replay_lsn() >= '"+stringsLSN(w)+"'::pg_lsn)::text", &s)
		return s, s == "true"
	})
	return w
}

// stringsLSN writes an lsn- label's token as PostgreSQL prints an LSN.
func stringsLSN(token string) string {
	for i := range token {
		if token[i] == '-' {
			return token[:i] + "/" + token[i+1:]
		}
	}
	return token
}
