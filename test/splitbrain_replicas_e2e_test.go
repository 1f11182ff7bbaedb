package test

// Review 7, H10: during a split brain on the newest timeline the replicas
// of both branches were answered by replica, prefer-replica, any and lag-
// names, against real PostgreSQL.

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// n1 is the primary, n2 to n5 its replicas. n1 hangs; n2 is promoted
// (timeline 2, branch A) and takes a client's write, n5 follows it; n3,
// which never saw n2's history file, is promoted too (timeline 2 again,
// branch B), n4 follows it. Both n2 and n3 are writable: pgdns answers no
// primary, and no replica either (n4 lacks n2's write, n5 lacks n3's, and
// one of the two branches will be thrown away), saying why in TXT and
// /v1/resolve; lsn- names stay empty. Then the operator keeps n3 (n2
// stops): n3 is the primary, n4 comes back, n5 (branch A) stays out, and
// the token of n2's write is answered by no name (rule 12).
func TestReplicasDuringASplitBrain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{Nodes: 5})
	ctx := context.Background()
	n1, n2, n3, n4, n5 := e.pg.Nodes[0], e.pg.Nodes[1], e.pg.Nodes[2], e.pg.Nodes[3], e.pg.Nodes[4]
	e.waitFor(t, "replica.db.local.", []string{n2.IP, n3.IP, n4.IP, n5.IP})
	common := e.insertAndTakeLSN(t, n1)
	for _, n := range []*pgtest.Node{n2, n3, n4, n5} {
		waitStreaming(t, n, 1, common)
	}
	if err := n1.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n1.Signal(syscall.SIGCONT) })
	e.waitFor(t, "primary.db.local.", nil)

	// Branch A: n2 and n5.
	if err := n2.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", []string{n2.IP})
	n5.Follow(t, n2)
	onA := writeAndTakeLSN(t, n2.Conn(t), "INSERT INTO t (v) VALUES ('on n2')")
	waitStreaming(t, n5, 2, onA)

	// Branch B: n3 and n4; n2 keeps running, writable.
	secondBranch(t, n3, n4, onA, nil)
	e.waitFor(t, "primary.db.local.", nil)
	testkit.Eventually(t, 10*time.Second, 20*time.Millisecond, "the split brain logged", func() (string, bool) {
		logs := e.logs.String()
		return logs, strings.Contains(logs, "split brain: writable hosts on the same timeline")
	})
	var has int
	n4.Query(t, "SELECT count(*) FROM t WHERE v = 'on n2'", &has)
	if has != 0 {
		t.Fatalf("n4 has n2's write: no fork")
	}
	n2.Exec(t, "INSERT INTO t (v) VALUES ('more on n2')")

	names := []string{"replica.db.local.", "prefer-replica.db.local.", "any.db.local.", "lag-10s.replica.db.local.",
		"lsn-" + onA + "-t2.replica.db.local.", "lsn-" + onA + ".prefer-replica.db.local.", "lsn-" + common + "-t1.replica.db.local."}
	for _, name := range names {
		e.holds(t, name, 500*time.Millisecond, exactly(),
			"during the split brain on timeline 2 no replica of either branch may be answered (n4 lacks n2's writes, n5 n3's)")
	}
	const why = "split brain on timeline 2: its branch may be lost"
	for _, name := range []string{"replica.db.local.", "any.db.local.", "lsn-" + onA + "-t2.replica.db.local."} {
		if txt := strings.Join(e.txt(t, name), " | "); !strings.Contains(txt, "split_brain="+why) ||
			!strings.Contains(txt, n2.Addr()) || !strings.Contains(txt, n3.Addr()) {
			t.Errorf("TXT %s does not say why nothing is answered: %s", name, txt)
		}
	}
	_, body := e.get(t, http.DefaultClient, "/v1/resolve?name="+url.QueryEscape("replica.db.local."), "")
	if strings.Count(body, why) != 2 {
		t.Errorf("/v1/resolve?name=replica.db.local. does not say why n4 and n5 are out: %s", body)
	}
	_, hosts := e.get(t, http.DefaultClient, "/v1/hosts", "")
	if strings.Count(hosts, `"aside":"split_brain"`) != 4 {
		t.Errorf("/v1/hosts does not set aside the two writers and their two replicas as split_brain: %s", hosts)
	}
	if logs := e.logs.String(); !strings.Contains(logs, "hosts="+n2.Addr()+","+n3.Addr()) &&
		!strings.Contains(logs, "hosts="+n3.Addr()+","+n2.Addr()) {
		t.Errorf("the split brain's log line does not name exactly the two writers:\n%s", logs)
	}

	// The operator keeps branch B: n2 stops. n4 is answered again, n5 is
	// not (rule 1: it streams from n2, last seen writable on timeline 2,
	// then has no WAL receiver and no WAL sender of n3 is its own), nor is
	// the token of n2's write (rule 12).
	if err := n2.Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", []string{n3.IP})
	e.waitFor(t, "replica.db.local.", []string{n4.IP})
	e.holds(t, "any.db.local.", 500*time.Millisecond, exactly(n3.IP, n4.IP), "n5 is on branch A, which the operator threw away")
	for _, name := range []string{"lsn-" + onA + "-t2.replica.db.local.", "lsn-" + onA + "-t2.prefer-replica.db.local.",
		"lsn-" + onA + ".any.db.local."} {
		e.holds(t, name, 300*time.Millisecond, exactly(), "a token of timeline 2, forked")
	}
	_, hosts = e.get(t, http.DefaultClient, "/v1/hosts", "")
	var listed struct {
		Hosts []struct{ Addr, Aside, Note string }
	}
	if err := json.Unmarshal([]byte(hosts), &listed); err != nil {
		t.Fatal(err)
	}
	for _, h := range listed.Hosts {
		if h.Addr == n5.Addr() {
			// Its WAL receiver is gone with n2: its timeline is a lower
			// bound (2, or 1 before a restartpoint on 2), and n3 has no
			// WAL sender of its own.
			if h.Aside != "branch_unproven" && h.Aside != "superseded" && h.Aside != "forked" {
				t.Errorf("n5 after the split brain: aside %q (%s), want rule 1 or 12's reason", h.Aside, h.Note)
			}
			t.Logf("n5 after the split brain: %s: %s", h.Aside, h.Note)
		}
	}
	// Not for one snapshot either: the first one after n2 went down had
	// n5's sample still streaming from n2, with a history of timeline 2
	// equal to n3's (both promoted at the same point of timeline 1).
	logs := e.logs.String()
	if i := strings.Index(logs, "split brain: writable hosts"); strings.Contains(logs[i:], "host="+n5.Addr()+" from=unknown to=replica") {
		t.Errorf("n5 was answered as a replica after the split brain began:\n%s", logs[i:])
	}
	if txt := strings.Join(e.txt(t, "replica.db.local."), " | "); strings.Contains(txt, "split_brain") {
		t.Errorf("TXT replica.db.local. still gives the split brain as a reason after it ended: %s", txt)
	}
}
