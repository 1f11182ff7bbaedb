package test

// A token beyond every position the primary can have reached (review 7,
// H9) is one the primary provably lacks: prefer-replica, any and primary
// leave it out, as they leave out a write lost in a failover, and TXT
// says why. Here the write was taken back by a restore in place that
// pgdns never saw (it starts after it: no record of the timeline, so
// rule 13 sets no window), and the lookup's refresh round probes the
// primary after the lookup arrived, so its reach is exactly its position.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
)

func TestTokenBeyondThePrimarysReach(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(1)})
	n1 := pg.Nodes[0]
	ctx := context.Background()
	n1.Exec(t, "CREATE TABLE t (id serial PRIMARY KEY, v text)")
	backup, err := n1.BaseBackup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn := n1.Conn(t)
	writeAndTakeLSN(t, conn, "INSERT INTO t (v) SELECT repeat('w', 200) FROM generate_series(1, 2000)")
	lost := writeAndTakeLSN(t, conn, "INSERT INTO t (v) VALUES ('lost to the restore')")
	conn.Close(ctx)
	if err := n1.RestoreInPlace(ctx, backup); err != nil {
		t.Fatal(err)
	}
	// A wait long enough for the second refresh round under any load: the
	// first may take a probe of the primary already in flight, whose
	// reach keeps a margin; the second's starts after the lookup arrived.
	e := attach(t, pg, envOptions{LSNWait: "2s"})
	var pos string
	n1.Query(t, "SELECT pg_current_wal_insert_lsn()::text", &pos)
	if parseLSN(t, pos) >= parseLSN(t, lost) {
		t.Fatalf("the restored n1 (%s) is not behind the token %s", pos, lost)
	}
	// The names that wait for a refresh (lsn_wait): the primary's reach is
	// then exact. (primary waits for none: its reach keeps the margin of
	// the last probe's age, as the forged token below shows.)
	for _, target := range []string{"prefer-replica", "any"} {
		name := "lsn-" + lost + "." + target + ".db.local."
		e.holds(t, name, time.Second, exactly(), "n1, whose position is below the token: it cannot have the write")
		if txt := strings.Join(e.txt(t, name), "\n"); !strings.Contains(txt, "unprovable=") || !strings.Contains(txt, "beyond any position the primary") {
			t.Errorf("%s TXT does not say the token is beyond the primary's reach: %s", name, txt)
		}
	}
	for _, target := range []string{"prefer-replica", "any", "primary"} {
		e.holds(t, "lsn-ffffffff-0."+target+".db.local.", time.Second, exactly(), "a forged token's primary")
	}
	// Positions the primary has are answered as always.
	e.waitFor(t, "lsn-"+lsnLabel(pos)+".prefer-replica.db.local.", []string{n1.IP})
}
