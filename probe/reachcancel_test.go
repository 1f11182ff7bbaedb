//go:build linux

package probe

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// A checker with an open session makes its bare connect a CancelRequest
// for that session's own backend (review 8, R8-4): sent once the probe is
// done with the session, and closed by the forked backend without a word
// in the log (a wrong pid or key would be logged). Probes back to back,
// each with a bare connect due, never fail for it: the next probe waits
// a little for the cancel's close, and a statement a late cancel reaches
// runs again.
func TestBareConnectCancelsNoProbe(t *testing.T) {
	node, c, ctx := probedNode(t, 2*time.Minute)
	pc := c.(*pgChecker)
	for range 2 { // the first probe learns the grant, the next reads the status
		if _, err := c.Check(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !pc.readsStatus || !pc.ready || pc.sess.pid == 0 {
		t.Fatalf("a superuser's probe: reads the status %v, ready %v, backend pid %d; want all", pc.readsStatus, pc.ready, pc.sess.pid)
	}
	const probes = 200 // bounded: 200 probes, each at most cancelWait longer
	cancels := 0
	for i := range probes {
		pc.reachedAt, pc.reaches = time.Time{}, 0 // due, and not the reach that sends a startup packet
		if _, err := c.Check(ctx); err != nil {
			t.Fatalf("probe %d of %d back to back with bare connects: %v", i+1, probes, err)
		}
		if r := pc.reachRaw; r != nil {
			if !r.cancel || !r.asked {
				t.Fatalf("probe %d: after it the bare connect is not a cancel sent (cancel %v, sent %v)", i+1, r.cancel, r.asked)
			}
			cancels++
		}
		if pc.reachTimeouts != 0 {
			t.Fatalf("probe %d: a bare connect counted as no answer", i+1)
		}
	}
	if cancels < probes/4 {
		t.Fatalf("%d cancels sent in %d probes, want one at least every other probe", cancels, probes)
	}
	log := node.Log()
	for _, bad := range []string{"cancel request", "could not accept SSL connection", "incomplete startup packet", "could not receive data"} {
		if strings.Contains(log, bad) {
			t.Fatalf("the server logged %q for a bare connect:\n%s", bad, log)
		}
	}
	t.Logf("%d cancels in %d probes; statements a cancel reached (run again): %d", cancels, probes,
		strings.Count(log, "canceling statement due to user request"))
}

// A statement that a cancel of ours reaches (a fork slower than the
// probe's wait, a frozen postmaster's listen queue read when it thaws)
// gets 57014, and the probe runs it again while one of ours is out, twice
// at most (the postmaster signals a backend and then its process group):
// the probe succeeds. The same cancel with none of ours out fails the
// probe, as anyone's cancel did before.
func TestCancelOfOursInAQueryIsRunAgain(t *testing.T) {
	node, c, ctx := probedNode(t, 2*time.Minute)
	pc := c.(*pgChecker)
	for _, ours := range []bool{true, false} {
		pc.reachedAt = time.Now()               // no bare connect of the probes' own here
		if _, err := c.Check(ctx); err != nil { // a session (again)
			t.Fatal(err)
		}
		pc.stopAdmission()
		pc.reachedAt = time.Now()
		pid, key := pc.sess.pid, pc.sess.key
		if pid == 0 {
			t.Fatal("the session has no backend key")
		}
		pc.cancelsOut = 0
		if ours {
			pc.cancelsOut = 1
		}
		locker := lockProbedView(t, ctx, node)
		held := probeHeld(t, ctx, c, locker)
		r := startRawCancel(pc.host, pc.port, 10*time.Second, pid, key)
		if r == nil {
			t.Fatal("no cancel to an IP address")
		}
		for !r.send() {
			if done, err := r.poll(); done {
				t.Fatalf("the cancel ended before it was sent: %v", err)
			}
			time.Sleep(time.Millisecond)
		}
		if err := pollRaw(t, r); err != nil || !r.signalled {
			t.Fatalf("the cancel: %v, closed by the server %v", err, r.signalled)
		}
		if ours {
			// The statement run again waits for the lock too (unless the
			// postmaster's second signal cancelled that run as well): it
			// is let go once the cancel is spent.
			testkit.Eventually(t, 10*time.Second, 10*time.Millisecond, "the statement run again to wait for the lock", func() (string, bool) {
				var state string
				if err := locker.QueryRow(ctx, "SELECT coalesce(wait_event_type, '') FROM pg_stat_activity WHERE pid = $1", int32(pid)).Scan(&state); err != nil {
					t.Fatal(err)
				}
				return state, state == "Lock"
			})
		}
		if _, err := locker.Exec(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		if ours {
			wantProbed(t, held, "a probe a cancel of ours reached")
			continue
		}
		var pgErr *pgconn.PgError
		select {
		case err := <-held.done:
			if !errors.As(err, &pgErr) || pgErr.Code != "57014" {
				t.Fatalf("a probe cancelled with none of ours out: %v, want its 57014", err)
			}
		case <-time.After(20 * time.Second):
			held.cancel()
			<-held.done
			t.Fatal("a cancelled probe did not return in 20 s")
		}
	}
}

// The cancel is kept for sessions that leave room to run a statement
// again within a probe; a slow one's bare connect stays the SSLRequest,
// and so does a session without a key.
func TestCancelOnlyWithRoomAndAKey(t *testing.T) {
	cl := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(1)})
	c := pgCheckerOf(t, "user=postgres dbname=postgres sslmode=disable", cl.Nodes[0].Addr())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Check(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what  string
		rtt   time.Duration
		pid   uint32
		bound time.Duration
		want  bool
	}{
		{"a quick session", time.Millisecond, c.sess.pid, time.Second, true},
		{"a round trip of a third of the bound", 300 * time.Millisecond, c.sess.pid, 900 * time.Millisecond, false},
		{"no key", time.Millisecond, 0, time.Second, false},
	} {
		c.lastRTT, c.reachBound = tc.rtt, tc.bound
		pid := c.sess.pid
		c.sess.pid = tc.pid
		r := c.startReach()
		c.sess.pid = pid
		if r == nil {
			t.Fatalf("%s: no bare connect", tc.what)
		}
		r.close()
		if r.cancel != tc.want {
			t.Fatalf("%s: a cancel %v, want %v", tc.what, r.cancel, tc.want)
		}
	}
}
