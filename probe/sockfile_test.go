//go:build unix

package probe

import (
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/testkit"
)

// TestWaitAllocations: the wait between probes on an open session
// allocates nothing, whether it ends by its deadline (the next tick) or
// by a kick (a round's, which moves the deadline into the past from the
// aggregator's goroutine). Every probe of a host is followed by such a
// wait, so at 10,000 hosts every 1s an allocation here is 10,000 a
// second: net's RawConn wrapped each deadline's end in a net.OpError,
// about one allocation a probe and 19% of the objects pgdns allocated
// (issue 28), until the session held its socket as a file (sockfile.go).
func TestWaitAllocations(t *testing.T) {
	_, c, ctx := probedNode(t, 60*time.Second)
	pc := c.(*pgChecker)
	if pc.sess == nil || pc.sess.raw == nil {
		t.Fatal("the probed session does not drive its socket's descriptor: the test would not test the session's wait")
	}
	if _, ok := pc.sess.sock.Conn.(*fileConn); !ok {
		t.Fatalf("the session's socket is a %T, want it held as a file (sockfile.go)", pc.sess.sock.Conn)
	}
	t.Run("deadline", func(t *testing.T) {
		allocs := testkit.FewestAllocs(50, 0, func() {
			kicked, o := pc.waitIdle(ctx, time.Now().Add(time.Millisecond), nil)
			if kicked || o != idleWaited {
				t.Fatalf("a wait until its deadline: kicked %v, outcome %d, want not kicked and waited", kicked, o)
			}
		})
		if allocs > 0 {
			t.Fatalf("a wait ended by its deadline allocated %.1f times, want none", allocs)
		}
	})
	t.Run("kick", func(t *testing.T) {
		// One goroutine kicks every wait as the aggregator does (the
		// kick's channel, then the alarm), started before the measure:
		// AllocsPerRun counts its allocations too.
		kicks := make(chan struct{}, 1)
		start, stop := make(chan struct{}), make(chan struct{})
		defer close(stop)
		go func() {
			for {
				select {
				case <-start:
				case <-stop:
					return
				}
				time.Sleep(200 * time.Microsecond) // mostly after the wait is armed: the alarm's kick cuts it
				kicks <- struct{}{}
				pc.wakeup().kick()
			}
		}()
		allocs := testkit.FewestAllocs(50, 0, func() {
			start <- struct{}{}
			kicked, o := pc.waitIdle(ctx, time.Now().Add(time.Minute), kicks)
			if !kicked || o != idleWaited {
				t.Fatalf("a kicked wait: kicked %v, outcome %d, want kicked and waited", kicked, o)
			}
		})
		if allocs > 0 {
			t.Fatalf("a wait ended by a kick allocated %.1f times, want none", allocs)
		}
	})
	if _, err := c.Check(ctx); err != nil {
		t.Fatalf("the probe after the waits: %v", err)
	}
}
