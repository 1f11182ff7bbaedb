package test

import (
	"context"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// supersededScene builds review 6's G1 scene, which its tests (G1, G1c,
// G1d) then attack: n2 promoted while n1 keeps running unfenced, n3
// following n2 with a restartpoint on timeline 2, n2 stopped, the running
// pgdns stopped (it rightly answered no primary), and n1 still taking
// writes on timeline 1. It returns the stopped pgdns's env and the nodes.
func supersededScene(t *testing.T) (e *env, n1, n2, n3 *pgtest.Node) {
	t.Helper()
	e = newEnv(t, envOptions{Nodes: 3})
	n1, n2, n3 = e.pg.Nodes[0], e.pg.Nodes[1], e.pg.Nodes[2]
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
	return e, n1, n2, n3
}

// waitFirstRound waits until e answers primary.db.local without an
// error: its probe has finished a first round (what names the pgdns in
// the failure).
func (e *env) waitFirstRound(t *testing.T, what string) {
	t.Helper()
	if !testkit.Poll(20*time.Second, 20*time.Millisecond, func() bool {
		return e.query(t, "udp", "primary.db.local.", dns.TypeA).Rcode == dns.RcodeSuccess
	}) {
		t.Fatal(what + " never finished its first round")
	}
}
