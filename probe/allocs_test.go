package probe

import (
	"context"
	"testing"
	"time"
)

// A probe on an open session allocates little, and what it allocates is
// pgconn's: the row's buffers are reused and unchanged strings kept, and
// neither the socket's failure record nor the check for a lost statement
// costs an allocation when nothing failed. What remains: pgconn's watch
// of the probe's context (a channel and a context.AfterFunc, about 4),
// the row's field descriptions and the command tag, made anew for every
// result. At a thousand hosts every 250 ms each allocation here is 4,000
// a second; the bound keeps a new one from creeping in unnoticed.
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
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := c.Check(pctx); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 6 {
		t.Fatalf("a probe allocated %.1f times, want at most 6", allocs)
	}
}
