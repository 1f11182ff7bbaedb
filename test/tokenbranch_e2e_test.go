package test

// Review 5, F12: a token of a write on the branch of a timeline that died,
// asked of a replica of the other branch of the same timeline number,
// against real PostgreSQL.

import (
	"context"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/state"
	"github.com/pgdns/pgdns/internal/testkit"
)

// n1 is the primary, n2, n3 and n4 its replicas. n1 hangs; n2 is promoted
// (timeline 2) and pgdns answers it as the primary; a client writes there
// and takes its token with the timeline. n2 dies; n3, which never saw n2's
// history file, is promoted and takes timeline 2 as well; n4 follows n3
// and replays past the token's position. n4 never had the client's write:
// no replica name may answer it for that token.
func TestTokenOfTheOtherBranch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{Nodes: 4})
	n2, n3, n4, onA := firstBranch(t, e, "on n2")
	if err := n2.Stop(context.Background(), "immediate"); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", nil)

	secondBranch(t, n3, n4, onA, func() {
		var tl int
		n3.Query(t, "SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int", &tl)
		if tl != 2 {
			t.Fatalf("n3 promoted to timeline %d, want 2 (the number n2 took)", tl)
		}
	})
	e.waitFor(t, "primary.db.local.", []string{n3.IP})
	e.waitFor(t, "replica.db.local.", []string{n4.IP})
	var has int
	n4.Query(t, "SELECT count(*) FROM t WHERE v = 'on n2'", &has)
	if has != 0 {
		t.Fatalf("n4 has the write made on n2 (%d rows): the branches did not fork", has)
	}

	for _, name := range []string{"lsn-" + onA + "-t2.replica.db.local.", "lsn-" + onA + "-t2.prefer-replica.db.local."} {
		e.holds(t, name, time.Second, without(n4.IP), "n4, on n3's branch of timeline 2, which lacks the write of the token (made on n2's)")
	}

	// No name answers the token at all: n3, the primary, may be on the
	// other branch as well (no prefer-replica fallback), and a token
	// without its timeline, while timeline 2 is the newest, may be of
	// either branch. TXT, /v1/resolve and the log say why.
	tokened := "lsn-" + onA + "-t2.replica.db.local."
	for _, name := range []string{"lsn-" + onA + "-t2.prefer-replica.db.local.", "lsn-" + onA + "-t2.any.db.local.",
		"lsn-" + onA + ".replica.db.local.", "lsn-" + onA + ".prefer-replica.db.local."} {
		e.holds(t, name, 300*time.Millisecond, exactly(), "no host proves a token of a forked timeline")
	}
	e.holds(t, "replica.db.local.", 300*time.Millisecond, exactly(n4.IP), "a name without a token is not affected")
	if txt := strings.Join(e.txt(t, tokened), " | "); !strings.Contains(txt, "unprovable=timeline 2 forked (") {
		t.Errorf("TXT %s does not say the timeline forked: %s", tokened, txt)
	}
	_, body := e.get(t, http.DefaultClient, "/v1/resolve?name="+url.QueryEscape(tokened), "")
	if !strings.Contains(body, "timeline 2 forked (") || !strings.Contains(body, "the token's branch is unknown") {
		t.Errorf("/v1/resolve?name=%s does not say the timeline forked: %s", tokened, body)
	}
	if !strings.Contains(e.logs.String(), `msg="timeline forked: two servers were writable on it`) {
		t.Errorf("the fork was not logged")
	}

	// A reload that changes nothing hands what pgdns knows to the new
	// prober: the fork too (review 5, F12b: it was forgotten; the check
	// is 88b5e25's).
	next := *e.cfg
	if err := e.app.Reload(&next); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{tokened, "lsn-" + onA + "-t2.prefer-replica.db.local.", "lsn-" + onA + ".replica.db.local."} {
		e.holds(t, name, time.Second, exactly(), "after a reload: the fork of timeline 2 must be remembered")
	}
}

// The same double promotion with pgdns restarted in between, with its
// state file: the first server writable on timeline 2 (n2) is remembered,
// so n3 writable on timeline 2 after the restart forks it, and the fork is
// written to the file.
func TestForkSeenAcrossARestart(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.json")
	e := newEnv(t, envOptions{Nodes: 4, State: path})
	ctx := context.Background()
	n2, n3, n4, onA := firstBranch(t, e, "on n2")
	testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "the state file to name n2 timeline 2's writer", func() (string, bool) {
		m, _, err := state.Load(path)
		if err != nil {
			return err.Error(), false
		}
		return string(state.Encode(m)), m["main"].Branches[2].Writer == n2.Addr()
	})
	if err := e.app.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	if err := n2.Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	secondBranch(t, n3, n4, onA, nil)

	again := launch(t, e.pg, envOptions{State: path})
	again.waitFor(t, "primary.db.local.", []string{n3.IP})
	again.waitFor(t, "replica.db.local.", []string{n4.IP})
	for _, name := range []string{"lsn-" + onA + "-t2.replica.db.local.", "lsn-" + onA + "-t2.prefer-replica.db.local.", "lsn-" + onA + ".replica.db.local."} {
		again.holds(t, name, 300*time.Millisecond, exactly(), "a token of timeline 2, forked across the restart")
	}
	testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "the state file to hold the fork", func() (string, bool) {
		m, _, err := state.Load(path)
		if err != nil {
			return err.Error(), false
		}
		return string(state.Encode(m)), strings.Contains(m["main"].Branches[2].Forked, "then "+n3.Addr())
	})
}

// firstBranch is the first half of the double promotion both tests make:
// e's n1 is the primary and n2, n3 and n4 its replicas, all streaming a
// common write; n1 hangs (SIGSTOP, until the test ends) and pgdns answers
// no primary; n2 is promoted (timeline 2) and answered as the primary; a
// client writes row v there and takes its token: onA.
func firstBranch(t *testing.T, e *env, v string) (n2, n3, n4 *pgtest.Node, onA string) {
	t.Helper()
	n1, n2, n3, n4 := e.pg.Nodes[0], e.pg.Nodes[1], e.pg.Nodes[2], e.pg.Nodes[3]
	e.waitFor(t, "replica.db.local.", []string{n2.IP, n3.IP, n4.IP})
	common := e.insertAndTakeLSN(t, n1)
	for _, n := range []*pgtest.Node{n2, n3, n4} {
		waitStreaming(t, n, 1, common)
	}
	if err := n1.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n1.Signal(syscall.SIGCONT) })
	e.waitFor(t, "primary.db.local.", nil)
	if err := n2.Promote(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", []string{n2.IP})
	onA = writeAndTakeLSN(t, n2.Conn(t), "INSERT INTO t (v) VALUES ($1)", v) // the client's write, on n2's branch
	return n2, n3, n4, onA
}

// secondBranch is its second half, n2 gone: n3, which never saw n2's
// history file, is promoted and takes timeline 2 as well (promoted, when
// not nil, checks it then); n4 follows n3 and replays n3's branch past
// the token onA.
func secondBranch(t *testing.T, n3, n4 *pgtest.Node, onA string, promoted func()) {
	t.Helper()
	if err := n3.Promote(context.Background()); err != nil {
		t.Fatal(err)
	}
	if promoted != nil {
		promoted()
	}
	n4.Follow(t, n3)
	onB := writeAndTakeLSN(t, n3.Conn(t), "CREATE TABLE b AS SELECT repeat('y', 100) AS v FROM generate_series(1, 1000)")
	waitStreaming(t, n4, 2, onB)
	if parseLSN(t, onB) <= parseLSN(t, onA) {
		t.Fatalf("n3's branch %s is not past the token %s", onB, onA)
	}
}
