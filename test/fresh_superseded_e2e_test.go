package test

// Review 6, G1: a pgdns that starts without knowledge (no state.path, its
// file lost, or a second instance started during the incident) meets an
// unfenced old primary still writable on timeline 1, the promoted primary
// of timeline 2 down, and a replica that followed the promotion (its
// restartpoint on timeline 2). pgdns itself said the replica is "on
// timeline 2, above the cluster's newest proven timeline 1" and still
// answered the old primary as primary.db.local: every write sent there is
// on a branch that a rewind throws away. The replica's lower bound proves
// that a promotion created timeline 2 (decisions.md, rule 1).

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestFreshPgdnsDoesNotAnswerASupersededPrimary(t *testing.T) {
	t.Parallel()
	e, n1, _, n3 := supersededScene(t)
	ctx := context.Background()

	fresh := launch(t, e.pg, envOptions{}) // no state.path: the default
	fresh.waitFirstRound(t, "the fresh pgdns")
	fresh.holds(t, "primary.db.local.", 2*time.Second, without(n1.IP),
		"n1 is writable on timeline 1, and n3 (live, in recovery, its restartpoint on timeline 2) proves a promotion superseded it")
	_, body := fresh.get(t, http.DefaultClient, "/v1/resolve?name=primary.db.local", "")
	want := `{"addr":"` + n1.Addr() + `","reason":"unknown: writable on timeline 1, superseded by timeline 2: ` + n3.Addr() +
		` (in recovery) has replayed timeline 2`
	if !strings.Contains(body, want) {
		t.Errorf("/v1/resolve?name=primary does not say why n1 is out (want %q): %s", want, body)
	}

	// The witness stopped: the promotion it showed is still a fact
	// (review 6, G1c), and the running pgdns keeps n1 out.
	if err := n3.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	fresh.waitFor(t, "replica.db.local.", nil)
	fresh.holds(t, "primary.db.local.", time.Second, without(n1.IP), "n1, superseded by timeline 2, while n3 (which showed it) is down")
}
