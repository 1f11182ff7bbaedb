package test

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestForkedReplicaStaysAsideWithoutAPrimary: the scene of
// TestTwoBranchesOfOneTimeline (n2 promoted to timeline 2, n4 follows it
// and replays n2's writes, n2 is lost, n1 promoted to timeline 2 too from
// an earlier point; n4 is proven on n2's branch and set aside as forked),
// then n1, the primary, stops. n4 still holds n2's writes, not n1's, and
// nothing it shows has changed: no name may answer it while n1 is down.
func TestForkedReplicaStaysAsideWithoutAPrimary(t *testing.T) {
	t.Parallel()
	state := filepath.Join(t.TempDir(), "state.json")
	e := newEnv(t, envOptions{Nodes: 4, State: state})
	n2, n1, n4 := e.pg.Nodes[1], e.pg.Nodes[2], e.pg.Nodes[3]
	e.waitFor(t, "replica.db.local.", []string{n1.IP, n2.IP, n4.IP})
	ctx := context.Background()

	n2sBranch(t, e)

	if err := n2.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n2.Signal(syscall.SIGKILL); _ = n2.Signal(syscall.SIGCONT) })
	e.waitFor(t, "primary.db.local.", nil)
	if err := n1.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	e.insertAndTakeLSN(t, n1)
	e.waitFor(t, "primary.db.local.", []string{n1.IP})
	e.waitHost(t, n4.Addr(), "was set aside as another branch", func(h hostState) bool { return h.Aside == "forked" })

	if err := n1.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", nil)
	for _, name := range []string{"replica.db.local.", "any.db.local.", "prefer-replica.db.local.", "lag-10s.replica.db.local."} {
		e.holds(t, name, time.Second, without(n4.IP), "n4, which holds n2's writes, not n1's, while n1 is down")
	}

	// pgdns restarts from its state file while n1 is still down: the
	// proof is remembered, and n1, never seen by the new run, was the
	// primary it was made against.
	if err := e.app.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	e = launch(t, e.pg, envOptions{State: state})
	e.waitFirstRound(t, "the restarted pgdns")
	for _, name := range []string{"replica.db.local.", "any.db.local.", "prefer-replica.db.local."} {
		e.holds(t, name, time.Second, without(n4.IP), "n4, which holds n2's writes, not n1's, after pgdns restarted while n1 is down")
	}
}
