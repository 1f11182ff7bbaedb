package test

// POST /v1/admin/forget-fork: an operator's way out of one replica's fork
// proof (review 6, G7b), instead of pgdns -reset-state, which forgets
// everything of every cluster. A replica proven on another branch stays
// aside across its restarts; the operator who rebuilt it says so, and the
// proof goes for the run it has now, never while that is the run proven:
// a request made before the rebuild is refused, so that a plain restart
// after it (a crash, a reboot) cannot un-fork the unrebuilt replica
// (review 7, H11).

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/testkit"
)

func TestForgetForkOfARebuiltReplica(t *testing.T) {
	t.Parallel()
	// n1 restored in place from a base backup taken before a write that
	// n2 and n3 replayed: both are another branch of timeline 1.
	e := forkedWithAdminToken(t, "s3cret-admin-token")
	n1, n2 := e.pg.Nodes[0], e.pg.Nodes[1]
	ctx := context.Background()
	e.holds(t, "replica.db.local.", 500*time.Millisecond, exactly(), "n2 and n3 are another branch of timeline 1")

	forget := "/v1/admin/forget-fork?cluster=main&host=" + n2.Addr()
	for _, c := range []struct {
		what, path, token string
		code              int
		body              string
	}{
		{"no credential", forget, "", 401, "a valid bearer token is required"},
		{"a wrong credential", forget, "s3cret-admin-tokeX", 401, "a valid bearer token is required"},
		{"no host", "/v1/admin/forget-fork?cluster=main", "s3cret-admin-token", 400, "give host=HOST:PORT (as the config lists it)"},
		{"no cluster", "/v1/admin/forget-fork?host=" + n2.Addr(), "s3cret-admin-token", 400, "give cluster=NAME"},
		{"an unknown cluster", "/v1/admin/forget-fork?cluster=nope&host=" + n2.Addr(), "s3cret-admin-token", 404, "no such cluster: nope"},
		{"an unknown host", "/v1/admin/forget-fork?cluster=main&host=" + n2.IP, "s3cret-admin-token", 404, "no such host in cluster main: " + n2.IP},
		{"a host without a proof", "/v1/admin/forget-fork?cluster=main&host=" + n1.Addr(), "s3cret-admin-token", 409, "not proven on another branch"},
		{"n2 before its rebuild", forget, "s3cret-admin-token", 409, n2.Addr() + ": nothing forgotten: its server run started at "},
	} {
		if code, body := e.post(t, c.path, c.token); code != c.code || !strings.Contains(body, c.body) {
			t.Errorf("%s: %d %s, want %d with %q", c.what, code, body, c.code, c.body)
		}
	}
	e.holds(t, "replica.db.local.", 500*time.Millisecond, exactly(), "n2 and n3, whose proofs no refused request touched")

	// The request refused before the rebuild forgot nothing: a plain
	// restart of n2 (not rebuilt) keeps it aside.
	if err := n2.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	if err := n2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	e.holds(t, "replica.db.local.", 2*time.Second, exactly(), "n2, restarted but not rebuilt (its data is still the other branch's), and n3")

	// Rebuilt from the primary: still aside until the operator says so;
	// then answered, and n3, not forgotten, stays aside.
	if err := n2.Reclone(ctx, n1); err != nil {
		t.Fatal(err)
	}
	e.holds(t, "replica.db.local.", time.Second, exactly(), "n2, rebuilt, before the operator asks, and n3")
	var code int
	var body string
	testkit.Eventually(t, 10*time.Second, 100*time.Millisecond, "forget-fork to accept n2's rebuilt run (once probed)", func() (string, bool) {
		code, body = e.post(t, forget, "s3cret-admin-token")
		return fmt.Sprintf("%d %s", code, body), code == 200
	})
	if !strings.Contains(body, `"host":"`+n2.Addr()+`"`) || !strings.Contains(body, "another branch of timeline 1") ||
		!strings.Contains(body, n2.Addr()+" is judged without the proof from now on: its server run started at ") {
		t.Fatalf("forget-fork with the credential: %d %s, want 200 saying the proof and the runs", code, body)
	}
	if !strings.Contains(e.logs.String(), `msg="admin: fork proof forgotten by an operator" cluster=main host=`+n2.Addr()) {
		t.Errorf("no WARN line of the admin action:\n%s", e.logs)
	}
	e.waitFor(t, "replica.db.local.", []string{n2.IP})
	e.holds(t, "replica.db.local.", time.Second, exactly(n2.IP), "n2 rebuilt, and not n3 (still another branch)")
}
