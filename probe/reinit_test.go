package probe

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// Review 7, H5, against real PostgreSQL 15: a backend killed makes the
// postmaster reinitialise the server. The checker's session gets the
// server's crash notice (57P02) before its end, and the checker's next
// sample says so (Sample.Crashed), whether or not a probe in between was
// refused in crash recovery (57P03 "in recovery mode", crashRecovery);
// the sample after says nothing more.
func TestCrashNoticeReachesTheSample(t *testing.T) {
	t.Parallel()
	cl := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(1)})
	node := cl.Nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := pgCheckerOf(t, "user=postgres dbname=postgres sslmode=disable", node.Addr())
	if s, err := c.Check(ctx); err != nil || s.Crashed {
		t.Fatalf("the first probe: %v, crashed %v", err, s.Crashed)
	}
	other := node.Conn(t)
	var pid int
	if err := other.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !waitEnd(c.sess) || !c.sess.crashed {
		t.Fatalf("the checker's session: ended with %v, crash notice %v; want the notice", c.sess.end, c.sess.crashed)
	}
	var s Sample
	testkit.Eventually(t, 30*time.Second, 20*time.Millisecond, "a probe once the server is back", func() (string, bool) {
		var err error
		s, err = c.Check(ctx)
		if err != nil && !errors.Is(err, ErrNotServing) {
			t.Fatalf("a probe while the server reinitialises: %v, neither its crash recovery nor the session's end", err)
		}
		return fmt.Sprint(err), err == nil
	})
	if !s.Crashed {
		t.Fatal("the first sample after the crash does not say the session ended with the crash notice")
	}
	if s, err := c.Check(ctx); err != nil || s.Crashed {
		t.Fatalf("the next probe: %v, crashed %v; want it said once", err, s.Crashed)
	}
}
