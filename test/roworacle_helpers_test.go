package test

// The data as the oracle of an answer: every host a name answers for a
// write is asked, after the answer, whether it has the write's row (table
// t, v = marker). A replica that lacks the row after the answer lacked it
// when it was answered (a replica loses no committed row), so a host
// found lacking it was the wrong place to send the client.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/zone"
)

// positionsLine is one line of every node's positions, for the log.
func positionsLine(t *testing.T, dsns map[string]string) string {
	t.Helper()
	var b strings.Builder
	for _, ip := range slices.Sorted(func(yield func(string) bool) {
		for k := range dsns {
			if !yield(k) {
				return
			}
		}
	}) {
		dsn := dsns[ip]
		var s string
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		c, err := pgx.Connect(ctx, dsn)
		if err == nil {
			err = c.QueryRow(ctx, `SELECT CASE WHEN pg_is_in_recovery() THEN
			  format('recovery tl=%s receive=%s replay=%s paused=%s', (SELECT received_tli FROM pg_stat_wal_receiver), pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn(), pg_get_wal_replay_pause_state())
			  ELSE format('writable tl=%s insert=%s flush=%s', (SELECT timeline_id FROM pg_control_checkpoint()), pg_current_wal_insert_lsn(), pg_current_wal_flush_lsn()) END`).Scan(&s)
			c.Close(ctx)
		}
		cancel()
		if err != nil {
			s = "error: " + err.Error()
		}
		fmt.Fprintf(&b, "[%s %s] ", ip, s)
	}
	return b.String()
}

// holdsRow asks the server at dsn whether table t has a row v = marker:
// ok false when it could not be asked.
func holdsRow(dsn, marker string) (has, ok bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return false, false
	}
	defer c.Close(ctx)
	var n int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM t WHERE v = $1", marker).Scan(&n); err != nil {
		return false, false
	}
	return n > 0, true
}

// answeredLacking asks name now and, for every address answered, whether that
// host has marker's row (dsns maps an answered address to a DSN the test
// may use). It returns the answer and the addresses answered that lack it.
func answeredLacking(t *testing.T, e *env, dsns map[string]string, name, marker string) (got, lacking []string) {
	t.Helper()
	got = e.ips(t, name)
	for _, ip := range got {
		dsn, known := dsns[ip]
		if !known {
			t.Fatalf("%s answered %s, no host of the test", name, ip)
		}
		if has, ok := holdsRow(dsn, marker); ok && !has {
			lacking = append(lacking, ip)
		}
	}
	return got, lacking
}

// neverLacking asks each name every 50ms for d and fails at the first
// host answered that lacks marker's row.
func neverLacking(t *testing.T, e *env, dsns map[string]string, d time.Duration, marker string, names ...string) map[string][]string {
	t.Helper()
	seen := map[string][]string{}
	if n, ok := testkit.Holds(d, 50*time.Millisecond, func() bool {
		for _, name := range names {
			got, lacking := answeredLacking(t, e, dsns, name, marker)
			seen[name] = got
			if len(lacking) > 0 {
				t.Logf("WRONG: %s answered %v; %v lack the row %q; %s; TXT %q", name, got, lacking, marker, positionsLine(t, dsns), e.txt(t, name))
				return false
			}
		}
		return true
	}); !ok {
		t.Fatalf("a name sent a client to a host lacking %q after %d rounds", marker, n)
	}
	return seen
}

// nodeDSNs maps each node's address to its DSN.
func nodeDSNs(pg *pgtest.Cluster) map[string]string {
	m := map[string]string{}
	for _, n := range pg.Nodes {
		m[n.IP] = n.DSN()
	}
	return m
}

// positionOf reads one pg_lsn-valued expression on node as a zone.LSN
// (0 when the node cannot be asked, logged).
func positionOf(t *testing.T, n *pgtest.Node, expr string) zone.LSN {
	t.Helper()
	return positionAt(t, n.DSN(), expr)
}

// positionAt is positionOf on a DSN.
func positionAt(t *testing.T, dsn, expr string) zone.LSN {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Logf("%s: %v", expr, err)
		return 0
	}
	defer c.Close(ctx)
	var s string
	if err := c.QueryRow(ctx, "SELECT coalesce(("+expr+")::text, '0/0')").Scan(&s); err != nil {
		t.Logf("%s: %v", expr, err)
		return 0
	}
	l, err := zone.ParseLSN(s)
	if err != nil {
		t.Fatalf("%s: %q: %v", expr, s, err)
	}
	return l
}
