package test

import (
	"slices"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/dnspoll"
)

// pg_terminate_backend of pgdns's sessions, over and over while probes
// run every 20 ms (so that terminations land mid-probe too), never takes the
// primary out of primary.db.local (review 5, F11): a probe whose session
// ends with 57P01 probes on a new one, which the serving server admits.
// Terminating every session of a role or database is routine (before
// DROP DATABASE, in "kill all but me" scripts).
func TestTerminatedSessionsKeepThePrimary(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{Interval: "20ms"})
	primary := e.pg.Nodes[0]
	e.waitFor(t, "primary.db.local.", []string{primary.IP})
	pl := dnspoll.Start(e.app.DNSAddr(), "primary.db.local.", 2*time.Millisecond, 500*time.Millisecond)
	// A kill every 150 ms: each lands on whatever session pgdns has then,
	// idle or mid-probe or in its setup, and leaves pgdns room for one
	// probe on a new session before the next, even on a loaded machine.
	// Faster, a loaded pgdns can have the session of max_fails probes in a
	// row ended in its setup (as the same kills every 25 ms did, once, at
	// load 12): then no probe got through and the host is down, rightly.
	killed := 0
	for range 30 {
		var n int
		primary.Query(t, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'pgdns' AND pid <> pg_backend_pid()", &n)
		killed += n
		time.Sleep(150 * time.Millisecond)
	}
	polls := pl.Finish()
	if killed < 15 {
		t.Fatalf("terminated %d pgdns sessions in 30 tries, want most of them", killed)
	}
	missing := 0
	for _, p := range polls {
		if !slices.Equal(p.IPs, []string{primary.IP}) {
			missing++
			if missing <= 3 {
				t.Errorf("primary.db.local answered %v (rcode %d) at %v while pgdns's sessions were terminated, want the serving primary %s", p.IPs, p.Rcode, p.At.Format("15:04:05.000"), primary.IP)
			}
		}
	}
	t.Logf("%d sessions terminated, %d answers, %d without the primary", killed, len(polls), missing)
}
