package probe

import (
	"testing"
	"time"

	"github.com/pgdns/pgdns/zone"
)

// A replica proven on another branch keeps the proof across a restart of
// its server (a new run, the same data directory: review 6, G7b) and
// across failed probes; only a promotion ends it.
func TestForkOutlivesTheReplicasRestart(t *testing.T) {
	p := &Prober{replays: map[*zone.Host]replayWatch{}}
	run := time.Unix(1000, 0)
	h := &zone.Host{Addr: "r:1", Seen: true, InRecovery: true, SystemID: 42, StartedAt: run,
		DivergedFrom: "p:1", DivergedRun: run.Add(-time.Hour), DivergedNote: "another branch of timeline 1: ..."}
	s := Sample{InRecovery: true, SystemID: 42, StartedAt: run.Add(time.Minute), Timeline: 1, ReplayLSN: 0x100}
	p.watchReplay(h, false, s, 1, true)
	if h.DivergedFrom != "p:1" || h.DivergedNote == "" || !h.DivergedRun.Equal(run.Add(-time.Hour)) {
		t.Errorf("after a new run of the replica: proof %q %v %q, want kept", h.DivergedFrom, h.DivergedRun, h.DivergedNote)
	}
	s.InRecovery = false
	p.watchReplay(h, false, s, 2, true)
	if h.DivergedFrom != "" || h.DivergedNote != "" || !h.DivergedRun.IsZero() {
		t.Errorf("after a promotion: proof %q %v %q, want none", h.DivergedFrom, h.DivergedRun, h.DivergedNote)
	}
}
