package probe

import (
	"errors"
	"testing"
	"time"

	"github.com/pgdns/pgdns/zone"
)

// ForgetFork keeps the proof for the replica's run it was asked in and
// drops it at the next run; it names what it cannot find.
func TestForgetForkDropsTheProofAtTheNextRun(t *testing.T) {
	run1, run2 := time.Unix(1000, 0), time.Unix(2000, 0)
	c := &zone.Cluster{Name: "main", Identity: 7, Hosts: []zone.Host{
		{Addr: "a:5432"},
		{Addr: "b:5432", StartedAt: run1, DivergedFrom: "a:5432", DivergedNote: "another branch of timeline 1: …"},
		{Addr: "c:5432"}}}
	p := &Prober{state: []*zone.Cluster{c}, pending: []map[string]fork{{"c:5432": {run: run1, from: "a:5432", note: "remembered"}}}}
	for _, bad := range []struct {
		cluster, host string
		want          error
	}{{"nope", "b:5432", ErrUnknownCluster}, {"main", "d:5432", ErrUnknownHost}, {"main", "a:5432", ErrNoForkProof}} {
		if _, err := p.forgetFork(forgetForkRequest{cluster: bad.cluster, host: bad.host}); !errors.Is(err, bad.want) {
			t.Errorf("%s %s: %v, want %v", bad.cluster, bad.host, err, bad.want)
		}
	}
	done, err := p.forgetFork(forgetForkRequest{cluster: "main", host: "b:5432"})
	if err != nil || !done.Run.Equal(run1) || done.Proof != "another branch of timeline 1: …" {
		t.Fatalf("forget b: %+v %v", done, err)
	}
	b := &c.Hosts[1]
	p.dropForgottenFork(0, b, run1)
	if b.DivergedFrom == "" {
		t.Fatal("the proof dropped for the run it was asked in (still the other branch's data)")
	}
	p.dropForgottenFork(0, b, run2)
	if b.DivergedFrom != "" || b.DivergedNote != "" {
		t.Fatalf("the proof kept at the next run: %+v", b)
	}
	// A remembered proof not applied yet goes at a run other than the one
	// it was remembered with.
	if done, err := p.forgetFork(forgetForkRequest{cluster: "main", host: "c:5432"}); err != nil || done.Proof != "remembered" {
		t.Fatalf("forget c: %+v %v", done, err)
	}
	p.dropForgottenFork(0, &c.Hosts[2], run2)
	if _, ok := p.pending[0]["c:5432"]; ok {
		t.Fatal("the remembered proof of c kept at its next run")
	}
}
