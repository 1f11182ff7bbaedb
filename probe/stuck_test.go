package probe

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A host that accepts no session (new backends wait in their startup
// behind a catalog lock) is not tried again by Watch after each probe:
// every try leaves one more backend stuck, holding a connection slot, until
// the lock goes. Probes alone leave one per probe; Watch must not double it.
func TestWatchLeavesNoExtraStuckSessions(t *testing.T) {
	t.Parallel()
	node, c, ctx := probedNode(t, 60*time.Second)
	lockProbedView(t, ctx, node)
	// Backends are counted from ps: a new session would wait on the lock.
	pid, err := os.ReadFile(node.Dir + "/postmaster.pid")
	if err != nil {
		t.Fatal(err)
	}
	backends := func() int {
		out, err := exec.Command("ps", "--ppid", strings.SplitN(string(pid), "\n", 2)[0], "-o", "args=").Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(out), "postgres postgres")
	}
	before := backends() // the locker
	const probes = 8
	for range probes {
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, err := c.Check(pctx)
		pcancel()
		if err == nil {
			t.Fatal("a probe succeeded behind the lock")
		}
		wctx, wcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_ = c.(Watcher).Watch(wctx)
		wcancel()
	}
	if n := backends() - before; n > probes+2 {
		t.Fatalf("%d probes (and Watch between them) left %d backends stuck in startup, want at most %d", probes, n, probes+2)
	}
}
