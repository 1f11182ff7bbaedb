package probe

import (
	"context"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// A replica promoted behind a slow path (each request held 500 ms, a
// probe timeout of 900 ms: one round trip fits, two do not, nor a new
// session's four) stays probed on its new timeline (review 5, F14): the
// first probes on it also asked for the history privilege or read the
// timeline's history file within the probe's deadline, ran past it, lost
// the session, and every probe after needed a new session it could not
// open in time. The read waits for a probe that leaves room for it; one
// never started leaves nothing pending.
func TestHistoryReadLeavesASlowPathsProbeAlone(t *testing.T) {
	t.Parallel()
	cl := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(2)})
	replica := cl.Nodes[1]
	proxy := testkit.DelayProxy(t, pgtestAddr(t), replica.Addr(), 500*time.Millisecond)
	c := pgCheckerOf(t, "user=postgres dbname=postgres sslmode=disable", proxy.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := c.Check(ctx) // the session opens with time to spare
	if err != nil || !s.InRecovery {
		t.Fatalf("the replica's first probe: %+v, %v", s, err)
	}
	if err := replica.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	probe := func() (Sample, error) { return c.CheckWithin(ctx, 900*time.Millisecond) }
	testkit.Eventually(t, 30*time.Second, 10*time.Millisecond, "the promoted replica probed as a primary on timeline 2", func() (string, bool) {
		s, err := probe()
		if err != nil {
			t.Fatalf("a probe of the promoted replica behind the slow path: %v", err)
		}
		return "in recovery", !s.InRecovery && s.Timeline == 2
	})
	for i := range 4 {
		if _, err := probe(); err != nil {
			t.Fatalf("probe %d on the new timeline behind the slow path: %v", i+1, err)
		}
	}
	// A quick path reads the history at once (its second probe: the
	// first asks for the privilege).
	direct := pgCheckerOf(t, "user=postgres dbname=postgres sslmode=disable", replica.Addr())
	if _, err := direct.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if s, err := direct.Check(ctx); err != nil || len(s.History) == 0 {
		t.Fatalf("the new primary probed directly: history %v, %v", s.History, err)
	}
}
