package test

// Patroni's leader key decides who may be the primary (issue 22, case 7),
// against a real Patroni cluster (etcd, three nodes).

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/app/apptest"
	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// A replica promoted by hand while Patroni is paused is writable on a
// newer timeline than the leader, which Patroni keeps writable: two
// writable hosts, and the leader key names the old one. pgdns answered
// the promoted one (its timeline is newer). Then Patroni resumes and the
// rogue member is re-initialised from the leader: Patroni is healthy, its
// leader writable on the older timeline number, and pgdns answered no
// primary at all, for as long as anyone watched, because the abandoned
// timeline stayed the newest.
func TestPatroniLeaderKeyDecides(t *testing.T) {
	t.Parallel()
	b := pgtest.Addrs(t)
	pc, urls := newPatroni(t, b)
	ctx := context.Background()
	a, cfg, logs := apptest.Start(t, fmt.Sprintf(`
dns: {listen: "127.0.0.1:0"}
http: {listen: "127.0.0.1:0"}
probe: {interval: 250ms, timeout: 1s, max_fails: 3, dsn: "user=postgres dbname=postgres sslmode=disable"}
clusters:
  main:
    patroni: [%s]
`, strings.Join(urls, ", ")))
	e := &env{app: a, cfg: cfg, logs: logs}
	leader := pc.Leader(ctx)
	if leader == nil {
		t.Fatal("no leader")
	}
	e.waitFor(t, "primary.db.local.", []string{leader.IP})
	rest := others(pc.Nodes, leader)
	e.waitFor(t, "replica.db.local.", rest)
	var rogue, follower *pgtest.PatroniNode
	for _, n := range pc.Nodes {
		switch {
		case n == leader:
		case rogue == nil:
			rogue = n
		default:
			follower = n
		}
	}

	if err := pc.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pc.PromoteBehindPatroni(ctx, rogue); err != nil {
		t.Fatal(err)
	}
	e.waitHost(t, rogue.Addr(), "was seen on its new timeline", func(h hostState) bool { return h.Timeline != nil && *h.Timeline == 2 })
	e.holds(t, "primary.db.local.", 3*time.Second, exactly(leader.IP), "not the member holding Patroni's leader key")
	e.waitHost(t, rogue.Addr(), "was set aside as not the leader", func(h hostState) bool { return h.Aside == "not_leader" })
	e.holds(t, "any.db.local.", time.Second, without(rogue.IP), "the member promoted behind Patroni's back")

	if err := pc.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pc.Reinit(ctx, rogue); err != nil {
		t.Fatalf("%v\n%s", err, pc.Logs())
	}
	if err := pc.WaitHealthy(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if l := pc.Leader(ctx); l != leader {
		t.Fatalf("Patroni's leader moved to %v", l)
	}
	e.waitFor(t, "primary.db.local.", []string{leader.IP})
	e.waitFor(t, "replica.db.local.", []string{rogue.IP, follower.IP})
	e.holds(t, "primary.db.local.", 2*time.Second, exactly(leader.IP), "not Patroni's repaired leader")

	// The leader key moves with a switchover; the new leader is answered.
	if err := pc.Switchover(ctx, follower); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", []string{follower.IP})
	testkit.Eventually(t, 30*time.Second, 100*time.Millisecond, "the log to name the new leader key holder", func() (string, bool) {
		s := e.logs.String()
		return "", strings.Contains(s, `msg="Patroni leader key" cluster=main leader=`+follower.Addr())
	})
}
