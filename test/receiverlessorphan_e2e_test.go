package test

// A token without a timeline of a write that only an orphaned replica has,
// when pgdns first probes that replica after its upstream died: the
// primary and the orphan are both cut off from pgdns while the primary's
// last write W reaches the orphan alone; the primary dies and the replica
// that lacks W is promoted; then the orphan is back in reach. It has no
// WAL receiver (its upstream is dead), so pgdns knows its timeline only as
// a lower bound (timeline 1: its control file's), and its replay position
// past where timeline 2 branched off may be timeline 1's WAL that the new
// primary lacks. Before, such a replica counted for nothing (only one
// whose receiver streams timeline 1 did, review 12a R12a-1) and lsn-W.any
// answered the new primary, which lacks the row.

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
)

func TestTimelinelessTokenOfAWriteOnlyAReceiverlessOrphanHas(t *testing.T) {
	b := pgtest.Addrs(t)
	pg, altDSN := newDualAddressCluster(t, b)
	e := attach(t, pg, envOptions{})
	old, promoted, orphan := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	dsns := map[string]string{}
	for _, n := range pg.Nodes {
		dsns[n.IP] = altDSN(n)
	}
	ctx := context.Background()
	e.insertAndTakeLSN(t, old)
	e.waitFor(t, "replica.db.local.", []string{promoted.IP, orphan.IP})

	// pgdns loses the primary and the orphan; clients and replicas do not.
	cutOff(t, fmt.Sprintf("pgdns_rlo_p_%d", b.Port()), old.IP)
	heal := cutOff(t, fmt.Sprintf("pgdns_rlo_o_%d", b.Port()), orphan.IP)
	e.waitWithin(t, 30*time.Second, "replica.db.local.", []string{promoted.IP})
	conn, err := pgx.Connect(ctx, dsns[old.IP])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// The promoted one's WAL sender held: only the orphan receives W.
	holdWALSender(t, conn, promoted.Name)
	w := writeAndTakeLSN(t, conn, "INSERT INTO t (v) VALUES ('W')")
	testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "the orphan replayed W", func() (bool, bool) {
		h, _ := holdsRow(dsns[orphan.IP], "W")
		return h, h
	})

	killAndPromote(t, old, promoted)
	delete(dsns, old.IP)
	testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "timeline 2 past W", func() (bool, bool) {
		promoted.Exec(t, "INSERT INTO t (v) SELECT repeat('y', 1000) FROM generate_series(1, 100)")
		l := positionOf(t, promoted, "pg_current_wal_lsn()")
		past := uint64(l) >= parseLSN(t, w)
		return past, past
	})
	if has, ok := holdsRow(dsns[promoted.IP], "W"); !ok || has {
		t.Fatalf("the promoted replica has W (%v, %v): nothing is tested", has, ok)
	}
	e.waitFor(t, "primary.db.local.", []string{promoted.IP})

	// The orphan back in reach, without a WAL receiver: its timeline is
	// only a lower bound.
	heal()
	e.waitHost(t, orphan.Addr(), "probed past W without a WAL receiver", func(h hostState) bool {
		return replayedPast(t, h, w)
	})
	var receivers int
	orphan.Query(t, "SELECT count(*) FROM pg_stat_wal_receiver", &receivers)
	if receivers != 0 {
		t.Fatalf("the orphan has a WAL receiver (%d rows): nothing is tested", receivers)
	}
	// W's token without a timeline: no host that lacks W, the new primary
	// included; with -t1 its history proves it lost.
	for _, target := range []string{"any", "prefer-replica", "primary", "replica"} {
		for _, tl := range []string{"", "-t1"} {
			name := "lsn-" + w + tl + "." + target + ".db.local."
			e.holds(t, name, time.Second, func(got []string) bool {
				_, lacking := answeredLacking(t, e, dsns, name, "W")
				return len(lacking) == 0 && !slices.Contains(got, orphan.IP)
			}, "a host lacking W, or the orphan")
		}
	}
	txt := e.txt(t, "lsn-"+w+".any.db.local.")
	if !slices.ContainsFunc(txt, func(s string) bool {
		return strings.HasPrefix(s, "unprovable=") && strings.Contains(s, "may be a write of timeline 1 lost in the failover to 2") &&
			strings.Contains(s, "pgdns saw "+orphan.Addr()+" (in recovery, its timeline not known: at least 1) hold WAL up to ")
	}) {
		t.Errorf("TXT of W's token %q: no unprovable= string saying it may be lost, shown by the orphan's position", txt)
	}
	t.Logf("lsn-%s.any: TXT %q; /v1/resolve: %q; %s", w, txt, resolveReason(t, e, "lsn-"+w+".any", promoted.Addr()), positionsLine(t, dsns))
	// A write of timeline 2 is answered as ever, with and without -t2.
	later := e.insertAndTakeLSN(t, promoted)
	e.waitFor(t, "lsn-"+later+".any.db.local.", []string{promoted.IP})
	e.waitFor(t, "lsn-"+later+"-t2.any.db.local.", []string{promoted.IP})
}
