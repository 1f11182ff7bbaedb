package test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// Review 6, G4: a write lost in a failover, proven lost by the new
// timeline's history file, is answered by no name. The primary's WAL
// senders are stopped, a row is written on it and its token taken, the
// primary is killed, a replica promoted (timeline 2 forks off before the
// token) and the other replica re-pointed at it; timeline 2 then writes
// past the token. Before, lsn-…-t1.prefer-replica and .any answered the new
// primary, which lacks the row: the read succeeded without its write. Now
// a pgdns that reads history files (superuser) answers nothing for it,
// with the reason in TXT and /v1/resolve; one that cannot (pg_monitor) has
// only a watched lower bound of where timeline 1 ended, proves neither the
// loss nor the write in timeline 2's history, and answers nothing either,
// saying the proof is missing (review 9, R9-2: it fell back to the new
// primary, which lacks the row). A token of timeline 1 kept in timeline 2,
// and one on timeline 2 not replayed yet, answer as before.
func TestLostWriteIsAnsweredByNoName(t *testing.T) {
	t.Parallel()
	ips := pgtest.Addrs(t).IPs(3)
	pg := pgtest.New(t, pgtest.Options{IPs: ips})
	old, promoted, follower := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	p, r2 := promoted.IP, follower.IP
	old.Exec(t, "CREATE TABLE ryw (v text); CREATE ROLE watcher LOGIN IN ROLE pg_monitor")
	super := attach(t, pg, envOptions{})
	monitor := attach(t, pg, envOptions{DSN: "user=watcher dbname=postgres sslmode=disable"})

	kept := super.insertAndTakeLSN(t, old)
	for _, e := range []*env{super, monitor} {
		e.waitFor(t, "lsn-"+kept+"-t1.replica.db.local.", []string{p, r2})
	}
	// The lost write: committed on the old primary while its WAL senders
	// are stopped, so that no replica receives it; timeline 2 then writes
	// past the lost position, without the row.
	lost := failoverLosingAWrite(t, old, promoted, follower, "INSERT INTO ryw VALUES ('LOST')", nil)
	later := super.insertAndTakeLSN(t, promoted)
	var rows int
	promoted.Query(t, "SELECT count(*) FROM ryw WHERE v = 'LOST'", &rows)
	if rows != 0 {
		t.Fatalf("the new primary has the lost row (%d): the test proves nothing", rows)
	}

	for _, e := range []*env{super, monitor} {
		e.waitFor(t, "primary.db.local.", []string{p})
		e.waitFor(t, "lsn-"+later+"-t2.replica.db.local.", []string{r2})
		e.waitFor(t, "lsn-"+kept+"-t1.replica.db.local.", []string{r2})
		e.holds(t, "lsn-"+lost+"-t1.replica.db.local.", time.Second, exactly(), "a replica that lacks the lost write")
		// Not replayed yet, on the live timeline, and within the primary's
		// reach (a client may have written it since the last probe): the
		// primary may have it. 64 KiB: the reach's margin is 16 GB/s of
		// the time since that probe started, at least its own length (64 MiB
		// was beyond it when the probe had started under 4 ms before, and
		// the primary was rightly left out: 537f897).
		e.holds(t, "lsn-"+aheadOfPrimary(t, promoted, 64<<10)+"-t2.prefer-replica.db.local.", time.Second, exactly(p), "the primary")
	}

	// Proven lost: no name answers it, and TXT and /v1/resolve say why.
	for _, target := range []string{"prefer-replica", "any", "primary"} {
		super.holds(t, "lsn-"+lost+"-t1."+target+".db.local.", time.Second, exactly(), "the new primary, which lacks the lost write")
	}
	const lostWhy = " on timeline 1 lost in the failover to timeline 2 at "
	txt := super.txt(t, "lsn-"+lost+"-t1.prefer-replica.db.local.")
	if !slices.ContainsFunc(txt, func(s string) bool { return strings.HasPrefix(s, "unprovable=") && strings.Contains(s, lostWhy) }) {
		t.Errorf("TXT of the lost token %q: no unprovable= string saying it was lost", txt)
	}
	why := resolveReason(t, super, "lsn-"+lost+"-t1.prefer-replica", promoted.Addr())
	if !strings.HasPrefix(why, "primary: ") || !strings.Contains(why, lostWhy) {
		t.Errorf("/v1/resolve leaves the new primary out for %q, want it lost in the failover", why)
	}
	t.Logf("lsn-%s-t1.prefer-replica: TXT %q; /v1/resolve: %s %q, %s %q", lost, txt, promoted.Addr(), why,
		follower.Addr(), resolveReason(t, super, "lsn-"+lost+"-t1.prefer-replica", follower.Addr()))

	// Not proven without history files, either way: no name answers it,
	// and the reasons say that the proof, not the write, is missing.
	monitor.holds(t, "lsn-"+lost+"-t1.prefer-replica.db.local.", time.Second, exactly(), "the new primary (the write not proven in its history)")
	if got := monitor.txt(t, "lsn-"+lost+"-t1.prefer-replica.db.local."); !hasUnprovable(got, "is not proven in timeline 2's history") || hasUnprovable(got, " lost ") {
		t.Errorf("the pg_monitor instance's TXT %q: want the history unproven, not the write lost", got)
	}
	why = resolveReason(t, monitor, "lsn-"+lost+"-t1.replica", follower.Addr())
	if !strings.Contains(why, "is not proven in its history") {
		t.Errorf("/v1/resolve (pg_monitor) leaves %s out for %q, want the proof missing", follower.Addr(), why)
	}
	t.Logf("pg_monitor: /v1/resolve: %s %q", follower.Addr(), why)
}
