package app

// Tests of what pgdns keeps on disk (state.path, issue 23) against real
// PostgreSQL: a restart answers as the pgdns that stopped would have.

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/state"
	"github.com/pgdns/pgdns/internal/testkit"
)

// waitState polls the state file at path until ok accepts what it holds.
func waitState(t *testing.T, path, what string, ok func(newest uint32) bool) {
	t.Helper()
	testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "the state file to hold "+what, func() (string, bool) {
		m, _, err := state.Load(path)
		if err != nil {
			return err.Error(), false
		}
		r, found := m["main"]
		return string(state.Encode(m)), found && r.Identity != 0 && ok(r.NewestTimeline)
	})
}

// firstAnswer waits until pgdns answers name at all (it answers SERVFAIL
// until its first probe round is in) and returns that first answer.
func (e *env) firstAnswer(t *testing.T, name string) []string {
	t.Helper()
	return testkit.Eventually(t, 20*time.Second, 5*time.Millisecond, "a first answer to "+name, func() ([]string, bool) {
		m := e.query(t, "udp", name, dns.TypeA)
		if m.Rcode == dns.RcodeServerFailure {
			return nil, false
		}
		return answerIPs(t, m), true
	})
}

// The reproduction of issue 23: a replica is promoted while the old
// primary keeps running (unfenced, as after a network split), with one
// replica still following it; then the new primary stops. A running pgdns
// rightly answers no primary. A pgdns restarted without its state sees
// only the old primary, writable on timeline 1 with a replica following
// it, and answers it (measured before state.path existed: every restart
// did). Restarted with its state, it answers no primary from its first
// answer on, and agrees with an instance that kept running.
func TestRestartWithStateKeepsTheSupersededPrimaryOut(t *testing.T) {
	t.Parallel()
	ips := pgtest.Addrs(t).IPs(3)
	pg := pgtest.New(t, pgtest.Options{IPs: ips})
	old, promoted := pg.Nodes[0], pg.Nodes[1]
	dir := t.TempDir()
	restartedPath, runningPath := filepath.Join(dir, "restarted.json"), filepath.Join(dir, "running.json")
	restarted := attach(t, pg, envOptions{State: restartedPath})
	running := attach(t, pg, envOptions{State: runningPath})
	waitState(t, restartedPath, "the cluster's identity on timeline 1", func(tl uint32) bool { return tl == 1 })
	ctx := context.Background()

	if err := promoted.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	restarted.waitFor(t, "primary.db.local.", []string{promoted.IP})
	running.waitFor(t, "primary.db.local.", []string{promoted.IP})
	waitState(t, restartedPath, "timeline 2", func(tl uint32) bool { return tl == 2 })
	if err := promoted.Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	restarted.waitFor(t, "primary.db.local.", nil)
	running.waitFor(t, "primary.db.local.", nil)

	// Restarted with its state: no primary from the first answer on.
	if err := restarted.app.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	again := launch(t, pg, envOptions{State: restartedPath})
	if got := again.firstAnswer(t, "primary.db.local."); len(got) != 0 {
		t.Fatalf("restarted with its state, the first answer of primary.db.local was %v: the superseded primary", got)
	}
	if got := running.ips(t, "primary.db.local."); len(got) != 0 {
		t.Fatalf("the instance that kept running answers %v", got)
	}
	again.holds(t, "primary.db.local.", 2*time.Second, exactly(), "the superseded primary after a restart with state")
	running.holds(t, "primary.db.local.", 200*time.Millisecond, exactly(), "the superseded primary")
	_, hosts := again.get(t, http.DefaultClient, "/v1/hosts", "")
	if !strings.Contains(hosts, "writable on timeline 1, superseded by timeline 2") {
		t.Errorf("/v1/hosts of the restarted pgdns does not say why the old primary is out: %s", hosts)
	}
	if !strings.Contains(again.logs.String(), "state file read") {
		t.Errorf("the start did not log reading the state file:\n%s", again.logs)
	}

	// Without its state, a restart answers the old primary: the case the
	// state file exists for.
	forgetful := launch(t, pg, envOptions{})
	forgetful.waitFor(t, "primary.db.local.", []string{old.IP})
}
