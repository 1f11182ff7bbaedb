package probe

import (
	"context"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/testkit"
)

// A probe on an open session allocates nothing, in the checker or in the
// session's reader (AllocsPerRun counts every goroutine's): its deadline
// is the checker's own timer, reset for each probe, the request's
// bytes are encoded once, the reply is read into the session's buffer and
// the row's columns are slices of it, unchanged strings are kept, and
// neither the socket's failure record nor the check for a lost statement
// costs an allocation when nothing failed. On pgconn's query path a probe
// cost up to 6 (its watch of the probe's context, the row's field
// descriptions, the command tag). At a thousand hosts every 250 ms each
// allocation here is 4,000 a second; the bound keeps one from creeping in
// unnoticed.
func TestCheckAllocations(t *testing.T) {
	_, c, ctx := probedNode(t, 60*time.Second)
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for range 3 { // the admission check runs beside every 4th probe at most once a second: let it be
		if _, err := c.Check(pctx); err != nil {
			t.Fatal(err)
		}
	}
	c.(*pgChecker).admittedAt = time.Now().Add(time.Hour) // no admission check while measured
	var s Sample
	allocs := testkit.FewestAllocs(100, 0, func() {
		if err := checkWithin(ctx, c, 30*time.Second, &s); err != nil { // as a host's goroutine probes
			t.Fatal(err)
		}
	})
	if allocs > 0 {
		t.Fatalf("a probe allocated %.1f times, want none", allocs)
	}
}
