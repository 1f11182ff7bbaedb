package test

import (
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// TestReloadDuringAFailoverThatLosesAWrite is
// TestTimelinelessTokenOfAWriteLostInAFailover with a reload in the middle
// of the failover (two faults at once): once pgdns has seen the old
// primary insert past the lost write, a reload changing probe.interval
// (100ms to 250ms) and dns.lsn_wait (0 to 200ms) runs while the old
// primary is killed and the replica promoted. The new prober probes the
// dead primary once (refused) and inherits what the old one saw: the lost
// write's token, with or without -t1, is answered by no name.
func TestReloadDuringAFailoverThatLosesAWrite(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(3)})
	old, promoted, follower := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	old.Exec(t, "CREATE TABLE ryw (v text)")
	e := attach(t, pg, envOptions{})
	kept := e.insertAndTakeLSN(t, old)
	e.waitFor(t, "lsn-"+kept+".replica.db.local.", []string{promoted.IP, follower.IP})

	reloaded := make(chan error, 1)
	lost := failoverLosingAWrite(t, old, promoted, follower, "INSERT INTO ryw SELECT 'LOST' FROM generate_series(1, 50)", func(lost string) {
		e.waitProbedPast(t, old, lost, "pgdns to probe the old primary past the token")
		next := *e.cfg
		next.Probe.Interval = 250 * time.Millisecond
		next.DNS.LSNWait = 200 * time.Millisecond
		go func() { reloaded <- e.app.Reload(&next) }()
	})
	if err := <-reloaded; err != nil {
		t.Fatal(err)
	}
	later := e.insertAndTakeLSN(t, promoted)
	waitStreaming(t, follower, 2, later)
	e.waitFor(t, "primary.db.local.", []string{promoted.IP})
	e.waitFor(t, "lsn-"+later+".replica.db.local.", []string{follower.IP})
	e.waitFor(t, "lsn-"+kept+".replica.db.local.", []string{follower.IP})
	for _, name := range []string{"lsn-" + lost + "-t1.prefer-replica.db.local.", "lsn-" + lost + ".replica.db.local.",
		"lsn-" + lost + ".prefer-replica.db.local.", "lsn-" + lost + ".any.db.local.", "lsn-" + lost + ".primary.db.local."} {
		e.holds(t, name, time.Second, exactly(), "no host: every host now on timeline 2 lacks the lost write")
	}
}
