package test

// Review 6, G1d (on the G1c fix 2c5dd4e: the witnessed timeline is not in the state file). Based on G1c (on the G1 fix f3004f5): the witness is not remembered,
// so a restart of it lets the superseded primary back in. Based on G1: a pgdns that starts without knowledge (no state.path, its
// file lost, or a second instance started during the incident) meets an
// unfenced old primary still writable on timeline 1, the promoted primary
// of timeline 2 down, and a replica that followed the promotion (its
// checkpoint and minimum recovery point on timeline 2, its history file
// saying where timeline 1 ended). pgdns itself says the replica is "on
// timeline 2, above the cluster's newest proven timeline 1" and still
// answers the old primary as primary.db.local: every write sent there is
// on a branch that a rewind throws away.

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/pgdns/pgdns/internal/testkit"
)

func TestWitnessedTimelineSurvivesARestartOfPgdns(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{Nodes: 3})
	n1, n2, n3 := e.pg.Nodes[0], e.pg.Nodes[1], e.pg.Nodes[2]
	e.waitFor(t, "replica.db.local.", []string{n2.IP, n3.IP})
	ctx := context.Background()
	common := e.insertAndTakeLSN(t, n1)
	waitStreaming(t, n2, 1, common)
	waitStreaming(t, n3, 1, common)

	if err := n2.Promote(ctx); err != nil { // n1 keeps running, unfenced
		t.Fatal(err)
	}
	n3.Follow(t, n2)
	writeAndTakeLSN(t, n2.Conn(t), "INSERT INTO t (v) VALUES ('on n2')")
	onTL2 := writeAndTakeLSN(t, n2.Conn(t), "CHECKPOINT")
	waitStreaming(t, n3, 2, onTL2)
	n3.Exec(t, "CHECKPOINT") // a restartpoint on timeline 2, as the checkpointer makes on its own within checkpoint_timeout
	e.waitFor(t, "primary.db.local.", []string{n2.IP})
	if err := n2.Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", nil) // the running pgdns remembers timeline 2: right
	if err := e.app.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	var tl int
	n3.Query(t, "SELECT timeline_id FROM pg_control_checkpoint()", &tl)
	if tl != 2 {
		t.Fatalf("n3's last restartpoint is on timeline %d, want 2", tl)
	}
	writeAndTakeLSN(t, n1.Conn(t), "INSERT INTO t (v) VALUES ('on n1, superseded')") // n1 still takes writes

	statePath := filepath.Join(t.TempDir(), "state.json")
	fresh := launch(t, e.pg, envOptions{State: statePath}) // a pgdns with a state file that never saw timeline 2 proven
	if !testkit.Poll(20*time.Second, 20*time.Millisecond, func() bool {
		return fresh.query(t, "udp", "primary.db.local.", dns.TypeA).Rcode == dns.RcodeSuccess
	}) {
		t.Fatal("the fresh pgdns never finished its first round")
	}
	fresh.holds(t, "primary.db.local.", time.Second, without(n1.IP),
		"n1 is writable on timeline 1, and n3 (live, in recovery on timeline 2, its history file readable) proves a promotion superseded it")

	// The witness stops; pgdns restarts with its state file.
	if err := n3.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	fresh.holds(t, "primary.db.local.", time.Second, without(n1.IP), "n1, superseded by timeline 2 (n3, which showed it, is down: remembered in memory)")
	if err := fresh.app.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	again := launch(t, e.pg, envOptions{State: statePath})
	if !testkit.Poll(20*time.Second, 20*time.Millisecond, func() bool {
		return again.query(t, "udp", "primary.db.local.", dns.TypeA).Rcode == dns.RcodeSuccess
	}) {
		t.Fatal("the restarted pgdns never finished its first round")
	}
	again.holds(t, "primary.db.local.", 2*time.Second, without(n1.IP),
		"n1, superseded by timeline 2, which the pgdns before the restart had seen witnessed (its state file should say so)")
}
