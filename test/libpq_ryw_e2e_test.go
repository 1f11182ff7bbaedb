package test

// Read-your-writes through real libpq with the DSN the docs give
// (docs/clients/libpq.md, rule 13, examples/ryow): the lsn-…-tN token's
// prefer-replica name alone. Review 7, H12: with ",primary.db.local"
// after it, every refusal of rules 9, 12 and 13 became a silent read on a
// primary without the write.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// documentedToken runs a write on conn and takes its token after the
// commit as docs/clients/libpq.md says, with the timeline:
// "lsn-0-3000060-t1".
func documentedToken(t *testing.T, conn *pgx.Conn, sql string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatal(err)
	}
	var lsn string
	var timeline int
	if err := conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text,
	  ('x' || substr(pg_walfile_name(pg_current_wal_insert_lsn()), 1, 8))::bit(32)::int`).Scan(&lsn, &timeline); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("lsn-%s-t%d", lsnLabel(lsn), timeline)
}

// TestDocumentedReadYourWritesDSNThroughLibpq runs host=<token>.prefer-replica.db.local
// through psql after a failover that lost a write: the lost write's token
// (and one of a timeline no host has) fails to connect, loudly; a token the
// replica has replayed connects to the replica, one it has not replayed
// yet to the primary, each reading its write.
func TestDocumentedReadYourWritesDSNThroughLibpq(t *testing.T) {
	t.Parallel()
	b := pgtest.Addrs(t)
	dnsIP := b.IP(53)
	ns := newResolverNS(t, dnsIP)
	e := newEnvIn(t, b, envOptions{Interval: "250ms", LSNWait: "20ms", Listen: dnsIP + ":53"})
	old, promoted, follower := e.pg.Nodes[0], e.pg.Nodes[1], e.pg.Nodes[2]
	old.Exec(t, "CREATE TABLE ryw (v text)")
	// Both replicas have the table (and KEPT) before the failover.
	kept := documentedToken(t, old.Conn(t), "INSERT INTO ryw VALUES ('KEPT')")
	e.waitFor(t, kept+".replica.db.local.", []string{promoted.IP, follower.IP})

	// read connects with the documented DSN and reads where it landed and
	// whether the row v is there.
	read := func(token, v string) (addr, found string, err error) {
		out, err := ns.psql("host="+token+".prefer-replica.db.local", "SELECT inet_server_addr(), EXISTS (SELECT 1 FROM ryw WHERE v = '"+v+"')")
		addr, found, _ = strings.Cut(out, "|")
		return addr, found, err
	}

	lost := "lsn-" + failoverLosingAWrite(t, old, promoted, follower, "INSERT INTO ryw VALUES ('LOST')", nil) + "-t1"
	e.waitFor(t, "primary.db.local.", []string{promoted.IP})
	var rows int
	promoted.Query(t, "SELECT count(*) FROM ryw WHERE v = 'LOST'", &rows)
	if rows != 0 {
		t.Fatalf("the new primary has the lost row (%d): the test proves nothing", rows)
	}

	t.Run("a token no host has fails loudly", func(t *testing.T) {
		// lost: the write lost in the failover (timeline 2's history file
		// proves it); t9: a timeline no host has.
		for _, token := range []string{lost, "lsn-0-10-t9"} {
			e.holds(t, token+".prefer-replica.db.local.", 500*time.Millisecond, exactly(), "no host has the token")
			addr, found, err := read(token, "LOST")
			if err == nil {
				t.Fatalf("host=%s.prefer-replica.db.local connected to %s (row there: %s): no host has the write", token, addr, found)
			}
			if !strings.Contains(err.Error(), "could not translate host name") {
				t.Fatalf("host=%s.prefer-replica.db.local failed, but not for want of an address: %v", token, err)
			}
			t.Logf("%s fails loudly: %v", token, err)
		}
	})

	t.Run("the fallback the docs warn against reads without the write", func(t *testing.T) {
		// docs/clients/libpq.md: "Never add ,primary.db.local … after an
		// lsn- name": libpq takes the empty answer as an unresolvable host
		// and reads on the new primary.
		out, err := ns.psql("host="+lost+".prefer-replica.db.local,primary.db.local", "SELECT inet_server_addr(), EXISTS (SELECT 1 FROM ryw WHERE v = 'LOST')")
		if want := promoted.IP + "|f"; err != nil || out != want {
			t.Fatalf("the warned-against DSN: got %q, %v; docs/clients/libpq.md says it reads %q (the new primary, without the write)", out, err, want)
		}
	})

	writer := promoted.Conn(t)
	t.Run("a token the replica has replayed connects to the replica", func(t *testing.T) {
		// KEPT: timeline 1's, before the switch, so in timeline 2 too.
		e.waitFor(t, kept+".replica.db.local.", []string{follower.IP})
		if addr, found, err := read(kept, "KEPT"); err != nil || addr != follower.IP || found != "t" {
			t.Fatalf("%s: got %s|%s, %v; want %s|t (the replica, with the write)", kept, addr, found, err, follower.IP)
		}
		token := documentedToken(t, writer, "INSERT INTO ryw VALUES ('REPLAYED')")
		if !strings.HasSuffix(token, "-t2") {
			t.Fatalf("token %s: want timeline 2's", token)
		}
		waitStreaming(t, follower, 2, strings.TrimSuffix(strings.TrimPrefix(token, "lsn-"), "-t2"))
		e.waitFor(t, token+".replica.db.local.", []string{follower.IP})
		addr, found, err := read(token, "REPLAYED")
		if err != nil || addr != follower.IP || found != "t" {
			t.Fatalf("got %s|%s, %v; want %s|t (the replica, with the write)", addr, found, err, follower.IP)
		}
	})

	t.Run("a token not replayed yet connects to the primary", func(t *testing.T) {
		follower.Exec(t, "SELECT pg_wal_replay_pause()")
		t.Cleanup(func() { follower.Exec(t, "SELECT pg_wal_replay_resume()") })
		testkit.Eventually(t, 10*time.Second, 5*time.Millisecond, "replay paused", func() (string, bool) {
			var state string
			follower.Query(t, "SELECT pg_get_wal_replay_pause_state()", &state)
			return state, state == "paused"
		})
		token := documentedToken(t, writer, "INSERT INTO ryw VALUES ('UNREPLAYED')")
		addr, found, err := read(token, "UNREPLAYED")
		if err != nil || addr != promoted.IP || found != "t" {
			t.Fatalf("got %s|%s, %v; want %s|t (the primary, with the write; the replica's replay is paused)", addr, found, err, promoted.IP)
		}
	})
}
