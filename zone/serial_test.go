package zone

import (
	"math"
	"testing"
	"time"
)

// built returns a ready snapshot of hosts (decided at t0) built at time at.
func built(at time.Time, hosts ...Host) *Snapshot {
	s := cluster(hosts...)
	s.Built = at
	return s
}

// The serial of a cluster moves when a role answer changes and stays put
// on everything else; it only grows, also across several changes in one
// second.
func TestStampSerials(t *testing.T) {
	p := seen("10.0.0.1", false, 0x5000)
	r1 := seen("10.0.0.2", true, 0x5000)
	r2 := seen("10.0.0.3", true, 0x4000)
	unix := uint32(t0.Unix())

	notReady := built(t0.Add(-2*time.Second), p, r1, r2)
	notReady.Ready = false
	notReady.StampSerials(nil)
	if got := notReady.Clusters[0].Serial; got != unix-2 {
		t.Fatalf("first snapshot: serial %d, want the clock %d", got, unix-2)
	}
	still := built(t0.Add(-time.Second), p, r1, r2)
	still.Ready = false
	still.StampSerials(notReady)
	if got := still.Clusters[0].Serial; got != unix-2 {
		t.Fatalf("not ready yet: serial %d, want it carried over (%d)", got, unix-2)
	}
	ready := built(t0, p, r1, r2)
	ready.StampSerials(still)
	if got := ready.Clusters[0].Serial; got != unix {
		t.Fatalf("first ready snapshot: serial %d, want %d", got, unix)
	}

	lagged := r2
	lagged.Lag, lagged.LagBytes, lagged.ReplayLSN = 5*time.Second, 1<<20, 0x10
	down := r2
	down.Fails = 3
	promoted := r1
	promoted.InRecovery, promoted.Timeline = false, 2
	oldPrimaryDown := p
	oldPrimaryDown.Fails = 3
	moved := r2
	moved.IP = seen("10.0.0.9", true, 0).IP

	steps := []struct {
		name    string
		hosts   []Host
		changed bool
	}{
		{"at rest", []Host{p, r1, r2}, false},
		{"lag moves", []Host{p, r1, lagged}, false},
		{"a replica goes down", []Host{p, r1, down}, true},
		{"several changes in one second: comes back", []Host{p, r1, r2}, true},
		{"and down again", []Host{p, r1, down}, true},
		{"and back", []Host{p, r1, r2}, true},
		{"the primary moves", []Host{oldPrimaryDown, promoted, r2}, true},
		{"at rest after the failover", []Host{oldPrimaryDown, promoted, r2}, false},
		{"a replica's address changes", []Host{oldPrimaryDown, promoted, moved}, true},
		{"the host list is reordered", []Host{moved, oldPrimaryDown, promoted}, false},
		{"a host leaves the list", []Host{moved, promoted}, true},
	}
	prev := ready
	for i, st := range steps {
		next := built(t0.Add(time.Duration(i/4)*time.Second), st.hosts...)
		next.StampSerials(prev)
		was, got := prev.Clusters[0].Serial, next.Clusters[0].Serial
		if st.changed && !SerialLess(was, got) {
			t.Errorf("%s: serial %d after %d, want it to grow", st.name, got, was)
		}
		if !st.changed && got != was {
			t.Errorf("%s: serial %d after %d, want it unchanged", st.name, got, was)
		}
		if clock := uint32(next.Built.Unix()); SerialLess(got, clock) && got != was {
			t.Errorf("%s: serial %d is behind the clock %d", st.name, got, clock)
		}
		prev = next
	}
}

// A restart starts from the clock: not behind the serial before it, unless
// that one had run ahead of the clock by more changes than seconds.
func TestNextSerial(t *testing.T) {
	unix := uint32(t0.Unix())
	for _, tc := range []struct {
		prev, want uint32
		now        time.Time
	}{
		{0, unix, t0},            // first
		{unix - 100, unix, t0},   // an old serial: the clock
		{unix, unix + 1, t0},     // a second change in the same second
		{unix + 5, unix + 6, t0}, // ahead of the clock, or the clock stepped back
		{math.MaxUint32, 0, time.Unix(math.MaxUint32-5, 0)}, // RFC 1982: wraps past 2^32-1
	} {
		if got := NextSerial(tc.prev, tc.now); got != tc.want {
			t.Errorf("NextSerial(%d, %v) = %d, want %d", tc.prev, tc.now, got, tc.want)
		}
	}
	if !SerialLess(math.MaxUint32, 1) || SerialLess(1, math.MaxUint32) || SerialLess(5, 5) {
		t.Error("SerialLess does not wrap as RFC 1982 says")
	}
}

// The apex serial is the highest of the clusters'.
func TestSnapshotSerial(t *testing.T) {
	s := &Snapshot{Clusters: []*Cluster{{Name: "a", Serial: 10}, {Name: "b", Serial: 30}, {Name: "c", Serial: 20}}}
	if got := s.Serial(); got != 30 {
		t.Fatalf("Serial() = %d, want 30", got)
	}
	if got := (&Snapshot{}).Serial(); got != 0 {
		t.Fatalf("no cluster: Serial() = %d", got)
	}
}

// A snapshot built on another says which of its clusters are new
// (ChangedSince), and only when the other is the one it was built on, with
// as many clusters: otherwise the two are compared cluster by cluster.
func TestChangedSince(t *testing.T) {
	a, b := &Cluster{Name: "a"}, &Cluster{Name: "b"}
	prev := &Snapshot{Seq: 7, Clusters: []*Cluster{a, b}}
	next := &Snapshot{Seq: 8, BaseSeq: 7, Changed: []int{1}, Clusters: []*Cluster{a, {Name: "b"}}}
	if got, ok := next.ChangedSince(prev); !ok || len(got) != 1 || got[0] != 1 {
		t.Errorf("built on prev: %v, %v", got, ok)
	}
	for _, other := range []*Snapshot{nil, {Seq: 6, Clusters: prev.Clusters}, {Seq: 7, Clusters: []*Cluster{a}}} {
		if _, ok := next.ChangedSince(other); ok {
			t.Errorf("built on prev, compared with %+v: said built on it", other)
		}
	}
	if _, ok := (&Snapshot{Seq: 9, Clusters: prev.Clusters}).ChangedSince(prev); ok {
		t.Error("a snapshot built on none said it was built on prev")
	}
	// Changes and StampSerials look at the changed clusters alone.
	next.Ready, prev.Ready = true, true
	next.Clusters[1].Hosts = []Host{{Addr: "10.0.0.1:5432", Role: RolePrimary}}
	next.Clusters[1].Primary = 0
	if ch := Changes(prev, next); len(ch) == 0 {
		t.Error("no change seen in the changed cluster")
	}
}
