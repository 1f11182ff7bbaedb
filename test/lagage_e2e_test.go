package test

import (
	"context"
	"testing"
	"time"
)

// A lag bound is proven as of the end of the replica's probe; the sample
// is then used until the next one arrives, which on a slow path (here
// each query held 800 ms on its way to the replica) is long after
// probe.interval (review 5 F2: lag-1s answered a replica 1.23 s after its
// replay stopped). A filter may tolerate one interval of the sample's age,
// no more: once replay is paused, lag-1s must not answer the replica while
// it lacks a commit made more than 1 s + probe.interval before the lookup
// was sent. The rule is a proof from the commit log and the clock, not a
// timing: it holds at any load.
func TestLagBoundAgesWithItsSample(t *testing.T) {
	t.Parallel()
	const (
		delay    = 800 * time.Millisecond
		interval = 100 * time.Millisecond
		maxLag   = time.Second
	)
	sr := startSlowReplica(t, delay, interval)
	e, primary, proxied := sr.e, sr.primary, sr.proxied

	conn := primary.Conn(t)
	if _, err := conn.Exec(context.Background(), "CREATE TABLE t (id serial PRIMARY KEY, v text)"); err != nil {
		t.Fatal(err)
	}
	writes := writeTicks(t, conn, 2000, 20*time.Millisecond)
	e.waitFor(t, "lag-1s.replica.db.local.", []string{proxied})

	paused := sr.pauseReplay(t)
	lookups := sr.lookups(t, "lag-1s.replica.db.local.", paused)
	wrong, before, last := 0, 0, time.Duration(0)
	for _, l := range lookups {
		if !l.answered {
			continue
		}
		last = l.sent.Sub(paused)
		// A commit begun after replay stopped and acknowledged more than
		// 1 s + interval before the lookup: the replica surely lacked data
		// older than the filter allows, with the tolerated interval.
		if began, ended, ok := writes.within(paused, l.sent.Add(-maxLag-interval)); ok {
			wrong++
			if wrong == 1 {
				t.Errorf("lag-1s.replica answered the paused replica %v after replay stopped, lacking the commit made %v–%v before the lookup (evidence %q)",
					l.sent.Sub(paused).Round(time.Millisecond), l.sent.Sub(ended).Round(time.Millisecond), l.sent.Sub(began).Round(time.Millisecond),
					e.txt(t, "any.db.local."))
			}
		} else if l.sent.Sub(paused) < maxLag/2 {
			before++
		}
	}
	if wrong > 0 {
		t.Errorf("%d of %d lookups answered the replica beyond 1 s + probe.interval of missing data", wrong, len(lookups))
	}
	if _, _, ok := writes.within(paused, paused.Add(maxLag/2)); !ok {
		t.Fatal("no commit in the half second after replay stopped: the writer stalled, nothing was tested")
	}
	t.Logf("%d lookups; the paused replica was last answered %v after replay stopped (%d answers in the first 0.5 s)",
		len(lookups), last.Round(time.Millisecond), before)
}
