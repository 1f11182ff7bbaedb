package probe

import (
	"errors"
	"testing"
	"time"

	"github.com/pgdns/pgdns/zone"
)

// ForgetFork refuses while the replica runs the server run it was proven
// in (review 7, H11: a plain restart after the request would have dropped
// the proof of an unrebuilt replica), and drops the proof at once for
// another run; it names what it cannot find.
func TestForgetForkOnlyForAnotherRunThanTheOneProven(t *testing.T) {
	run1, run2 := time.Unix(1000, 0), time.Unix(2000, 0)
	c := &zone.Cluster{Name: "main", Identity: 7, Hosts: []zone.Host{
		{Addr: "a:5432", Seen: true, StartedAt: run1},
		{Addr: "b:5432", Seen: true, StartedAt: run1, DivergedFrom: "a:5432", DivergedNote: "another branch of timeline 1: …"},
		{Addr: "c:5432", Seen: true, StartedAt: run2}}}
	p := &Prober{state: []*zone.Cluster{c}, rebuild: make([]bool, 1),
		pending: []map[string]fork{{"c:5432": {run: run1, from: "a:5432", note: "remembered"}}}}
	p.proven(0, &c.Hosts[1], run1)
	for _, bad := range []struct {
		cluster, host string
		want          error
	}{{"nope", "b:5432", ErrUnknownCluster}, {"main", "d:5432", ErrUnknownHost}, {"main", "a:5432", ErrNoForkProof},
		{"main", "b:5432", ErrForkProofRunning}} {
		if _, err := p.forgetFork(forgetForkRequest{cluster: bad.cluster, host: bad.host}); !errors.Is(err, bad.want) {
			t.Errorf("%s %s: %v, want %v", bad.cluster, bad.host, err, bad.want)
		}
	}
	b := &c.Hosts[1]
	if b.DivergedFrom == "" {
		t.Fatal("the proof dropped while b runs the run proven (still the other branch's data)")
	}
	b.StartedAt = run2 // restarted (rebuilt, says the operator)
	done, err := p.forgetFork(forgetForkRequest{cluster: "main", host: "b:5432"})
	if err != nil || !done.Run.Equal(run2) || !done.Proven.Equal(run1) || done.Proof != "another branch of timeline 1: …" {
		t.Fatalf("forget b in a new run: %+v %v", done, err)
	}
	if b.DivergedFrom != "" || b.DivergedNote != "" || !p.rebuild[0] {
		t.Fatalf("the proof kept: %+v", b)
	}
	// A remembered proof not applied yet, of another run than c's now.
	if done, err := p.forgetFork(forgetForkRequest{cluster: "main", host: "c:5432"}); err != nil || done.Proof != "remembered" {
		t.Fatalf("forget c: %+v %v", done, err)
	}
	if _, ok := p.pending[0]["c:5432"]; ok {
		t.Fatal("the remembered proof of c kept")
	}
}
