package test

// A standby promoted while its replay is paused (pg_wal_replay_pause())
// with WAL received beyond it. While paused, a token between its replay
// and receive positions is answered only by the replica that replayed it.
// PostgreSQL 15 ends the pause at a promotion and replays everything it
// received first (timeline 1 ends at its receive position in the new
// history file), so after it the promoted server has the write and
// answers its token; with the old primary still writing, what it writes
// after the promotion is answered by no name. The data is the oracle
// (roworacle_helpers_test.go). Review 12a, item 3.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/testkit"
)

func TestPromotionOfAPausedStandby(t *testing.T) {
	for _, how := range []string{"old primary stopped, the other follows", "old primary stopped, the other does not follow", "old primary writing on"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			p, r1, r2 := e.pg.Nodes[0], e.pg.Nodes[1], e.pg.Nodes[2]
			dsns := nodeDSNs(e.pg)
			ctx := context.Background()
			e.insertAndTakeLSN(t, p)
			r1.Exec(t, "SELECT pg_wal_replay_pause()")
			conn := p.Conn(t)
			tok := writeAndTakeLSN(t, conn, "INSERT INTO t (v) VALUES ('between')")
			at := time.Now()
			testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "r1 received the write", func() (string, bool) {
				return positionsLine(t, dsns), positionOf(t, r1, "pg_last_wal_receive_lsn()") >= positionOf(t, p, "pg_current_wal_flush_lsn()")
			})
			if positionOf(t, r1, "pg_last_wal_replay_lsn()") >= positionOf(t, p, "pg_current_wal_flush_lsn()") {
				t.Fatalf("r1 replayed the write although paused: %s", positionsLine(t, dsns))
			}
			t.Logf("paused: token %s; %s", tok, positionsLine(t, dsns))
			names := []string{"lsn-" + tok + ".replica.db.local.", "lsn-" + tok + "-t1.replica.db.local.", "lsn-" + tok + ".prefer-replica.db.local.",
				"lsn-" + tok + "-t1.any.db.local.", "lsn-" + tok + ".primary.db.local.", "lsn-" + tok + "-t1.primary.db.local."}
			e.waitFor(t, names[1], []string{r2.IP})
			neverLacking(t, e, dsns, 2*time.Second, "between", names...)
			time.Sleep(time.Until(at.Add(600 * time.Millisecond)))
			neverLacking(t, e, dsns, time.Second, "between", "lag-500ms.replica.db.local.")

			alive := strings.HasPrefix(how, "old primary writing")
			if !alive {
				if err := p.Stop(ctx, "fast"); err != nil {
					t.Fatal(err)
				}
				delete(dsns, p.IP)
			}
			r1.Exec(t, "SELECT pg_promote(true, 60)")
			var hist string
			r1.Query(t, "SELECT pg_read_file('pg_wal/00000002.history')", &hist)
			has, _ := holdsRow(r1.DSN(), "between")
			t.Logf("r1 promoted while paused: has the row %v, history %q; %s", has, hist, positionsLine(t, dsns))
			if !has {
				t.Fatalf("r1 was promoted without the WAL it had received: PostgreSQL behaves otherwise than this test expects")
			}
			var later string
			switch {
			case alive:
				later = writeAndTakeLSN(t, conn, "INSERT INTO t (v) VALUES ('old primary after')")
			case strings.HasSuffix(how, "the other follows"):
				r2.Follow(t, r1)
			}
			r1.Exec(t, "INSERT INTO t (v) SELECT 'tl2' FROM generate_series(1, 1000)")
			e.waitFor(t, "primary.db.local.", []string{r1.IP})
			e.waitFor(t, "lsn-"+tok+"-t1.primary.db.local.", []string{r1.IP})
			seen := neverLacking(t, e, dsns, 3*time.Second, "between", names...)
			t.Logf("after the promotion: %v; %s", seen, positionsLine(t, dsns))
			for _, n := range []string{"primary.db.local.", "any.db.local.", "replica.db.local."} {
				// Left on timeline 1: the old primary and r2 streaming from
				// it, or r2 not following (no receiver, timeline 1 its lower
				// bound).
				e.holds(t, n, time.Second, func(got []string) bool {
					return (!alive || !slices.Contains(got, p.IP) && !slices.Contains(got, r2.IP)) &&
						(!strings.HasSuffix(how, "does not follow") || !slices.Contains(got, r2.IP))
				}, "a host left on timeline 1")
			}
			if alive {
				for _, target := range []string{"replica", "prefer-replica", "any", "primary"} {
					for _, tl := range []string{"", "-t1"} {
						e.holds(t, fmt.Sprintf("lsn-%s%s.%s.db.local.", later, tl, target), time.Second, exactly(), "a host lacking the old primary's write after the promotion")
					}
				}
				t.Logf("the old primary's later write %s: TXT %q", later, e.txt(t, "lsn-"+later+"-t1.any.db.local."))
			}
		})
	}
}
