package probe

import (
	"net/netip"
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

// forkScene is a cluster of a writable host w:1 on timeline 1 and a
// replica r:1 of the same system identifier, for the fork proofs.
func forkScene() (*Prober, *zone.Cluster) {
	c := &zone.Cluster{Name: "main", Identity: 42, NewestTimeline: 1, Hosts: []zone.Host{
		{Addr: "w:1", Seen: true, SystemID: 42, Timeline: 1, TimelineExact: true, StartedAt: time.Unix(1000, 0)},
		{Addr: "r:1", Seen: true, InRecovery: true, SystemID: 42, Timeline: 1},
	}}
	return &Prober{replays: map[*zone.Host]replayWatch{}, state: []*zone.Cluster{c}}, c
}

// A replica without a WAL receiver (its timeline a lower bound, the
// writable host's) read past the writable host's position before a probe
// of it started is on another branch: its upstream gone, or its receiver
// refused by a primary restored in place (review 7, H2). So is one whose
// receiver had received past it, whatever it replayed. One read after the
// probe started proves nothing (the primary may have written since), nor
// does one whose lower bound is w's timeline while a later one is known
// (it may follow the promotion that superseded w).
func TestForkProvenWithoutAStreamingReceiver(t *testing.T) {
	for _, tc := range []struct {
		name            string
		replay, receive zone.LSN
		newest          uint32
		readAfter       bool
		want            string // the note, "" for no proof
	}{
		{name: "replayed past, no receiver", replay: 0x200, newest: 1,
			want: "another branch of timeline 1: replayed to 0/200, past 0/100 where w:1 was read after it"},
		{name: "received past, replayed behind", replay: 0x80, receive: 0x200, newest: 1,
			want: "another branch of timeline 1: received to 0/200, past 0/100 where w:1 was read after it"},
		{name: "behind", replay: 0x80, receive: 0x100, newest: 1},
		{name: "read after the probe started", replay: 0x200, newest: 1, readAfter: true},
		{name: "a later timeline is known", replay: 0x200, newest: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, c := forkScene()
			c.NewestTimeline = tc.newest
			w, r := &c.Hosts[0], &c.Hosts[1]
			p.watchReplay(r, true, Sample{InRecovery: true, SystemID: 42, CheckpointTimeline: 1,
				ReplayLSN: tc.replay, ReceiveLSN: tc.receive}, 1, false)
			started := p.replays[r].read.Add(time.Millisecond) // w's probe started after the reading
			if tc.readAfter {
				started = p.replays[r].read.Add(-time.Millisecond)
			}
			p.checkForks(0, w, started, 0x100)
			if r.DivergedNote != tc.want || (tc.want != "") != (r.DivergedFrom == "w:1") {
				t.Errorf("proof %q %q, want %q", r.DivergedFrom, r.DivergedNote, tc.want)
			}
			if tc.want != "" && !r.DivergedRun.Equal(w.StartedAt) {
				t.Errorf("proof of run %v, want w's %v", r.DivergedRun, w.StartedAt)
			}
		})
	}
}

// A replica whose WAL receiver streams from a replica proven on another
// branch is on that branch (review 7, H3), down a chain of cascades; one
// whose receiver does not stream, or streams from another host, is not.
func TestCascadeInheritsItsUpstreamsFork(t *testing.T) {
	p, c := forkScene()
	u := &c.Hosts[1]
	u.IP = netip.MustParseAddr("10.0.0.2")
	u.DivergedFrom, u.DivergedRun = "w:1", time.Unix(1000, 0)
	u.DivergedNote = "another branch of timeline 1: replayed to 0/200, past 0/100 where w:1 was read after it"
	c.Hosts = append(c.Hosts,
		zone.Host{Addr: "x:1", Seen: true, InRecovery: true, SystemID: 42, Timeline: 1, Receiver: "streaming", SenderHost: "10.0.0.2", SenderPort: 1},
		zone.Host{Addr: "y:1", Seen: true, InRecovery: true, SystemID: 42, Timeline: 1, Receiver: "streaming", SenderHost: "x", SenderPort: 1},
		zone.Host{Addr: "z:1", Seen: true, InRecovery: true, SystemID: 42, Timeline: 1, Receiver: "waiting", SenderHost: "10.0.0.2", SenderPort: 1},
		zone.Host{Addr: "v:1", Seen: true, InRecovery: true, SystemID: 42, Timeline: 1, Receiver: "streaming", SenderHost: "10.0.0.2", SenderPort: 2})
	x, y, z, v := &c.Hosts[2], &c.Hosts[3], &c.Hosts[4], &c.Hosts[5]
	for _, h := range []*zone.Host{x, y, z, v} {
		p.inheritFork(0, h)
	}
	if want := "streams from r:1, which is on " + u.DivergedNote; x.DivergedFrom != "w:1" || !x.DivergedRun.Equal(u.DivergedRun) || x.DivergedNote != want {
		t.Errorf("x, streaming from r's IP: %q %v %q, want %q", x.DivergedFrom, x.DivergedRun, x.DivergedNote, want)
	}
	if want := "streams from x:1, which streams from r:1, which is on " + u.DivergedNote; y.DivergedFrom != "w:1" || y.DivergedNote != want {
		t.Errorf("y, streaming from x by its name: %q %q, want %q", y.DivergedFrom, y.DivergedNote, want)
	}
	if z.DivergedFrom != "" || v.DivergedFrom != "" {
		t.Errorf("z (receiver waiting) %q, v (another port) %q: want no proof", z.DivergedNote, v.DivergedNote)
	}
}
