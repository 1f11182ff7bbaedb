package zone

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

const stale = 1750 * time.Millisecond

// seen returns a host that was probed successfully at t0. A replica's WAL
// receiver streams from 10.0.0.1:5432, the tests' usual primary.
func seen(ip string, inRecovery bool, replay LSN) Host {
	h := Host{
		Cluster: "main", Addr: ip + ":5432", IP: netip.MustParseAddr(ip), Port: 5432,
		Seen: true, ProbedAt: t0, InRecovery: inRecovery, Timeline: 1, TimelineExact: true, SystemID: 7,
		ReplayLSN: replay, LagKnown: inRecovery, BytesKnown: inRecovery,
	}
	if inRecovery {
		h.Receiver, h.SenderHost, h.SenderPort = "streaming", "10.0.0.1", 5432
	}
	return h
}

// timelineTwo returns the tests' pair after a failover: the primary
// 10.0.0.1 and its standby n2, 10.0.0.2, both on timeline 2 at 0/9000,
// the primary listing n2; the replica knows timeline 1 ended at end (none
// when end is 0).
func timelineTwo(end LSN) (p, r Host) {
	p = seen("10.0.0.1", false, 0x9000)
	p.Timeline = 2
	r = seen("10.0.0.2", true, 0x9000)
	r.Timeline, r.AppName = 2, "n2"
	if end != 0 {
		r.History = []TimelineEnd{{Timeline: 1, End: end}}
	}
	p.Standbys = []Standby{{Addr: r.IP, AppName: "n2"}}
	return p, r
}

// cluster builds a decided, ready snapshot of one cluster.
func cluster(hosts ...Host) *Snapshot {
	c := &Cluster{Name: "main", Hosts: hosts}
	c.Decide(t0, stale, 3)
	return &Snapshot{Ready: true, Clusters: []*Cluster{c}, Default: "main", StaleAfter: stale}
}

func selectIPs(t *testing.T, s *Snapshot, name string, now time.Time, turn uint64) []string {
	t.Helper()
	q, err := Parse(name, origin)
	if err != nil {
		t.Fatalf("Parse(%q): %v", name, err)
	}
	hosts, err := View{Snap: s, Now: now, Turn: turn}.Select(&q, nil)
	if err != nil {
		t.Fatalf("Select(%q): %v", name, err)
	}
	ips := []string{}
	for _, h := range hosts {
		ips = append(ips, h.IP.String())
	}
	return ips
}

func TestSelect(t *testing.T) {
	p := seen("10.0.0.1", false, 0x5000)
	p.InsertLSN = 0x5000
	fresh := seen("10.0.0.2", true, 0x5000)
	behind := seen("10.0.0.3", true, 0x4000)
	behind.Lag, behind.LagBytes = 800*time.Millisecond, 0x1000
	unknownLag := seen("10.0.0.4", true, 0x5000)
	unknownLag.LagKnown, unknownLag.BytesKnown = false, false
	down := seen("10.0.0.5", true, 0x5000)
	down.Fails = 3
	s := cluster(p, fresh, behind, unknownLag, down)

	cases := []struct {
		name string
		want []string
	}{
		{"primary.db.local.", []string{"10.0.0.1"}},
		{"master.db.local.", []string{"10.0.0.1"}},
		{"replica.db.local.", []string{"10.0.0.2", "10.0.0.3", "10.0.0.4"}},
		{"any.db.local.", []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"}},
		{"lag-500ms.replica.db.local.", []string{"10.0.0.2"}},
		{"lag-1s.replica.db.local.", []string{"10.0.0.2", "10.0.0.3"}},
		{"bytes-4kb.replica.db.local.", []string{"10.0.0.2", "10.0.0.3"}},
		{"bytes-4095b.replica.db.local.", []string{"10.0.0.2"}},
		{"lag-1s.bytes-1kb.replica.db.local.", []string{"10.0.0.2"}},
		{"lsn-0-5000.replica.db.local.", []string{"10.0.0.2", "10.0.0.4"}},
		{"lsn-0-5001.replica.db.local.", []string{}},
		{"lsn-0-5001.prefer-replica.db.local.", []string{"10.0.0.1"}},
		{"lsn-0-5001.any.db.local.", []string{"10.0.0.1"}},
		{"lsn-0-5001.primary.db.local.", []string{"10.0.0.1"}},
		{"lag-0ms.any.db.local.", []string{"10.0.0.1", "10.0.0.2"}},
		{"lsn-0-4000-t1.replica.db.local.", []string{"10.0.0.2", "10.0.0.3", "10.0.0.4"}},
		{"lsn-0-4000-t2.replica.db.local.", []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := selectIPs(t, s, tc.name, t0, 0)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSelectRotatesReplicas(t *testing.T) {
	s := cluster(seen("10.0.0.1", false, 9), seen("10.0.0.2", true, 9), seen("10.0.0.3", true, 9), seen("10.0.0.4", true, 9))
	firsts := map[string]bool{}
	for turn := uint64(0); turn < 3; turn++ {
		got := selectIPs(t, s, "replica.db.local.", t0, turn)
		if len(got) != 3 {
			t.Fatalf("turn %d: %v", turn, got)
		}
		firsts[got[0]] = true
	}
	if len(firsts) != 3 {
		t.Fatalf("rotation put only %v first", firsts)
	}
}

func TestSelectFailsClosedWithoutPrimary(t *testing.T) {
	r := seen("10.0.0.2", true, 0x5000)
	s := cluster(r)
	if got := selectIPs(t, s, "lag-10s.replica.db.local.", t0, 0); len(got) != 0 {
		t.Fatalf("lag filter without a primary answered %v", got)
	}
	if got := selectIPs(t, s, "lsn-0-5000.replica.db.local.", t0, 0); len(got) != 1 {
		t.Fatalf("lsn filter without a primary answered %v", got)
	}
	if got := selectIPs(t, s, "primary.db.local.", t0, 0); len(got) != 0 {
		t.Fatalf("primary answered %v", got)
	}
}

func TestSelectDropsStaleHosts(t *testing.T) {
	s := cluster(seen("10.0.0.1", false, 9), seen("10.0.0.2", true, 9))
	later := t0.Add(stale + time.Millisecond)
	for _, name := range []string{"primary.db.local.", "replica.db.local.", "any.db.local."} {
		if got := selectIPs(t, s, name, later, 0); len(got) != 0 {
			t.Fatalf("%s with a stale snapshot answered %v", name, got)
		}
	}
}

func TestSelectErrors(t *testing.T) {
	s := cluster(seen("10.0.0.1", false, 9))
	q, _ := Parse("primary.nope.db.local.", origin)
	if _, err := (View{Snap: s, Now: t0}).Select(&q, nil); !errors.Is(err, ErrUnknownCluster) {
		t.Fatalf("unknown cluster: %v", err)
	}
	notReady := &Snapshot{}
	q, _ = Parse("primary.db.local.", origin)
	if _, err := (View{Snap: notReady, Now: t0}).Select(&q, nil); !errors.Is(err, ErrNotReady) {
		t.Fatalf("not ready: %v", err)
	}
}

func TestSelectAsyncOnly(t *testing.T) {
	p := seen("10.0.0.1", false, 9)
	p.SyncNamesSet, p.Standbys = true, []Standby{{AppName: "node2", Sync: true}, {AppName: "node3"}}
	syncR, asyncR := seen("10.0.0.2", true, 9), seen("10.0.0.3", true, 9)
	syncR.AppName, asyncR.AppName = "node2", "node3"
	s := cluster(p, syncR, asyncR)
	if !s.Clusters[0].Hosts[1].Sync || s.Clusters[0].Hosts[2].Sync {
		t.Fatal("Decide did not mark the synchronous standby from the primary's list")
	}
	if got := selectIPs(t, s, "replica.db.local.", t0, 0); len(got) != 2 {
		t.Fatalf("replicas: all answered %v", got)
	}
	s.Clusters[0].AsyncOnly = true
	if got := selectIPs(t, s, "replica.db.local.", t0, 0); !slices.Equal(got, []string{"10.0.0.3"}) {
		t.Fatalf("replicas: async answered %v", got)
	}
}

func TestSelectTimelineHistory(t *testing.T) {
	r := seen("10.0.0.2", true, 0x9000)
	r.Timeline = 3
	r.History = []TimelineEnd{{Timeline: 1, End: 0x3000}, {Timeline: 2, End: 0x8000}}
	s := cluster(seen("10.0.0.1", false, 0x9000), r)
	for name, want := range map[string]int{
		"lsn-0-2000-t1.replica.db.local.": 1, // before timeline 1 ended: still history
		"lsn-0-3500-t1.replica.db.local.": 0, // written on timeline 1 after the switch: lost
		"lsn-0-7000-t2.replica.db.local.": 1,
		"lsn-0-8800-t3.replica.db.local.": 1,
		"lsn-0-9001-t3.replica.db.local.": 0, // not replayed yet
		"lsn-0-1000-t4.replica.db.local.": 0, // a timeline the host has not reached
	} {
		if got := selectIPs(t, s, name, t0, 0); len(got) != want {
			t.Errorf("%s answered %v, want %d hosts", name, got, want)
		}
	}
}

func TestSelectAllocations(t *testing.T) {
	s := cluster(seen("10.0.0.1", false, 9), seen("10.0.0.2", true, 9), seen("10.0.0.3", true, 9))
	q, _ := Parse("lag-50ms.replica.db.local.", origin)
	buf := make([]*Host, 0, 8)
	allocs := testing.AllocsPerRun(100, func() {
		buf, _ = View{Snap: s, Now: t0, Turn: 1}.Select(&q, buf[:0])
	})
	if allocs != 0 {
		t.Fatalf("Select allocates %v times per call", allocs)
	}
}

// Issue 22, case 8: a position on a timeline above every one the cluster
// has proven is in no host's WAL, the primary's included: every target
// answers no address (the primary too, which otherwise passes every
// filter of data), and /v1/resolve says why.
func TestSelectTimelineNobodyHas(t *testing.T) {
	p, r := timelineTwo(0)
	// The primary knows timeline 1 ended at 0/8000 (the replica knows no
	// end): lsn-0-10-t1 is in its history (without one the primary proves
	// no token of timeline 1: TestPrimaryProvesAnOlderTimelinesTokenByItsHistory).
	p.History = []TimelineEnd{{Timeline: 1, End: 0x8000}}
	s := cluster(p, r)
	if tl := s.Clusters[0].NewestTimeline; tl != 2 {
		t.Fatalf("newest timeline %d, want 2", tl)
	}
	for _, target := range []string{"replica", "prefer-replica", "any", "primary"} {
		for _, token := range []string{"lsn-0-10-t3", "lsn-0-10-t9", "lsn-ffffffff-ffffffff-t4294967295"} {
			name := token + "." + target + ".db.local."
			if got := selectIPs(t, s, name, t0, 0); len(got) != 0 {
				t.Errorf("%s answered %v, want no address", name, got)
			}
		}
		// The proven timeline and the one before it are answered as
		// before: the primary passes, prefer-replica falls back to it.
		for token, want := range map[string]int{"lsn-0-10-t2": 1, "lsn-0-10-t1": 0} {
			name := token + "." + target + ".db.local."
			got := selectIPs(t, s, name, t0, 0)
			n := want // the replica, on replica names
			switch target {
			case "primary":
				n = 1
			case "any":
				n = 1 + want
			case "prefer-replica":
				n = max(want, 1)
			}
			if len(got) != n {
				t.Errorf("%s answered %v, want %d hosts", name, got, n)
			}
		}
	}
	q, _ := Parse("lsn-0-10-t9.any.db.local.", origin)
	v := View{Snap: s, Now: t0}
	c := s.Clusters[0]
	if v.Within(c, &c.Hosts[0], &q) {
		t.Error("Within: the primary passes an LSN on a timeline it does not have")
	}
	verdicts, err := v.Explain(&q)
	if err != nil {
		t.Fatal(err)
	}
	if why := verdicts[0].Why; verdicts[0].Selected || why != "primary: timeline 2: 0/10 on timeline 9 is above every timeline of the cluster" {
		t.Errorf("primary verdict %+v", verdicts[0])
	}
}

// Issue 29, item 6: an LSN beyond any position the primary can have
// reached by the lookup's arrival is unreachable: no refresh can find a
// replica that has it. A token just ahead of the newest primary probe is
// not (the client may have written since), unless that probe started
// after the lookup arrived.
func TestLSNUnreachable(t *testing.T) {
	p := seen("10.0.0.1", false, 0x5000)
	p.InsertLSN, p.Timeline = 0x5000, 2
	p.ProbeStart, p.ProbedAt = t0.Add(-time.Millisecond), t0
	r := seen("10.0.0.2", true, 0x5000)
	r.Timeline = 2
	s := cluster(p, r)
	v := View{Snap: s, Now: t0}
	for _, tc := range []struct {
		name  string
		asked time.Time
		want  bool
	}{
		{"lsn-ffffffff-ffffffff.replica.db.local.", t0, true},
		{"lsn-ffffffff-0.prefer-replica.db.local.", t0, true},
		{"lsn-ffffffff-ffffffff-t2.any.db.local.", t0, true},
		{"lsn-ffffffff-ffffffff-t1.replica.db.local.", t0, true}, // a write a failover lost
		{"lsn-0-5000.replica.db.local.", t0, false},              // the replica has it
		// 1 ms since the probe started: at most 16 MB more.
		{"lsn-0-f00000.replica.db.local.", t0, false},
		{"lsn-0-1005000.replica.db.local.", t0, true},
		// A second later, up to 16 GB more: a client may have written.
		{"lsn-1-0.replica.db.local.", t0.Add(time.Second), false},
		// The probe started after the lookup arrived: at most where it read.
		{"lsn-0-5001.replica.db.local.", t0.Add(-2 * time.Millisecond), true},
		{"lsn-0-5000.replica.db.local.", t0.Add(-2 * time.Millisecond), false},
		// A timeline above the primary's: a refresh may find its failover.
		{"lsn-ffffffff-0-t3.replica.db.local.", t0, false},
		// Not an lsn- lookup.
		{"replica.db.local.", t0, false},
		// A cluster that does not exist.
		{"lsn-ffffffff-0.replica.nope.db.local.", t0, false},
	} {
		q, err := Parse(tc.name, origin)
		if err != nil {
			t.Fatal(err)
		}
		if got := v.LSNUnreachable(&q, tc.asked); got != tc.want {
			t.Errorf("%s asked at %v: unreachable %v, want %v", tc.name, tc.asked.Sub(t0), got, tc.want)
		}
	}
	// Without a live primary nothing bounds the position.
	down := p
	down.Fails = 3
	q, _ := Parse("lsn-ffffffff-ffffffff.replica.db.local.", origin)
	if (View{Snap: cluster(down, r), Now: t0}).LSNUnreachable(&q, t0) {
		t.Error("unreachable without a live primary")
	}
	if (View{Snap: s, Now: t0.Add(time.Hour)}).LSNUnreachable(&q, t0.Add(time.Hour)) {
		t.Error("unreachable by a primary probe too old to be answered")
	}
}

// A token beyond the primary's reach is one the primary provably lacks
// (review 7, H9): prefer-replica, any and primary leave it out, and
// TokenUnprovable says why; one within reach still falls back to it.
// Asked bounds the reach as of the lookup's arrival, not the answer's.
func TestPrimaryBeyondReachIsLeftOut(t *testing.T) {
	p := seen("10.0.0.1", false, 0x5000)
	p.InsertLSN, p.Timeline = 0x5000, 2
	p.ProbeStart, p.ProbedAt = t0.Add(-time.Millisecond), t0
	r := seen("10.0.0.2", true, 0x5000)
	r.Timeline = 2
	v := View{Snap: cluster(p, r), Now: t0}
	for _, tc := range []struct {
		name  string
		asked time.Time // zero: the view's moment
		want  string
	}{
		{"lsn-0-1005000.prefer-replica.db.local.", time.Time{}, ""},
		{"lsn-0-1005000.any.db.local.", time.Time{}, ""},
		{"lsn-0-1005000.primary.db.local.", time.Time{}, ""},
		{"lsn-0-f00000.prefer-replica.db.local.", time.Time{}, "10.0.0.1"}, // within 1 ms of 16 GB/s
		// Asked before the probe started: the reach is where it read.
		{"lsn-0-5001.prefer-replica.db.local.", t0.Add(-2 * time.Millisecond), ""},
		{"lsn-0-5001.any.db.local.", t0.Add(-2 * time.Millisecond), ""},
		{"lsn-0-5000.primary.db.local.", t0.Add(-2 * time.Millisecond), "10.0.0.1"},
	} {
		q, err := Parse(tc.name, origin)
		if err != nil {
			t.Fatal(err)
		}
		q.Asked = tc.asked
		hosts, err := v.Select(&q, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, h := range hosts {
			got = append(got, h.IP.String())
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%s asked at %v: %v, want [%s]", tc.name, tc.asked, got, tc.want)
		}
		why := v.TokenUnprovable(&q)
		if (tc.want == "") != strings.Contains(why, "beyond any position the primary 10.0.0.1") {
			t.Errorf("%s: TokenUnprovable %q", tc.name, why)
		}
	}
}
