package zone

import "testing"

// forkedCluster is cluster(hosts...) with timelines forked as the probe
// would give them.
func forkedCluster(forked []uint32, hosts ...Host) *Snapshot {
	s := cluster(hosts...)
	for _, tl := range forked {
		s.Clusters[0].ForkedTimelines = append(s.Clusters[0].ForkedTimelines,
			TimelineFork{Timeline: tl, Note: "10.0.0.9:5432 writable on it at 0/5000100, then 10.0.0.1:5432 at 0/5000200"})
	}
	return s
}

// Review 5, F12: while timeline 2, the newest, is forked, no host proves
// a token on it or without a timeline, the primary included (no
// prefer-replica fallback: it may be on the other branch); a token on the
// timeline before it is not proven by a host on the forked one either;
// names without a token answer as before.
func TestForkedNewestTimeline(t *testing.T) {
	p, r := timelineTwo(0x8000)
	before := cluster(p, r)
	s := forkedCluster([]uint32{2}, p, r)
	for _, target := range []string{"replica", "prefer-replica", "any", "primary"} {
		for _, token := range []string{"lsn-0-10-t2", "lsn-0-10", "lsn-0-7000-t1"} {
			name := token + "." + target + ".db.local."
			if got := selectIPs(t, s, name, t0, 0); len(got) != 0 {
				t.Errorf("%s answered %v on forked timeline 2, want no address", name, got)
			}
			if target != "primary" && len(selectIPs(t, before, name, t0, 0)) == 0 {
				t.Errorf("%s answers nothing without the fork either: the test proves nothing", name)
			}
		}
	}
	for name, want := range map[string]int{"replica.db.local.": 1, "prefer-replica.db.local.": 1, "any.db.local.": 2, "primary.db.local.": 1} {
		if got := selectIPs(t, s, name, t0, 0); len(got) != want {
			t.Errorf("%s answered %v, want %d hosts: a name without a token is not affected", name, got, want)
		}
	}

	const why = "timeline 2 forked (10.0.0.9:5432 writable on it at 0/5000100, then 10.0.0.1:5432 at 0/5000200): the token's branch is unknown"
	for name, want := range map[string]string{"lsn-0-10-t2.replica.db.local.": why, "lsn-0-10.any.db.local.": why,
		"lsn-0-7000-t1.replica.db.local.": "", "replica.db.local.": ""} {
		q, _ := Parse(name, origin)
		if got := s.TokenUnprovable(&q); got != want {
			t.Errorf("TokenUnprovable(%s) = %q, want %q", name, got, want)
		}
	}
	v := View{Snap: s, Now: t0}
	c := s.Clusters[0]
	for name, want := range map[string][2]string{
		"lsn-0-10-t2.prefer-replica.db.local.":   {"primary: " + why, why},
		"lsn-0-7000-t1.prefer-replica.db.local.": {"primary: " + why, why},
	} {
		q, _ := Parse(name, origin)
		if v.Within(c, &c.Hosts[0], &q) || v.Within(c, &c.Hosts[1], &q) {
			t.Errorf("Within: a host passes %s on forked timeline 2", name)
		}
		verdicts, err := v.Explain(&q)
		if err != nil {
			t.Fatal(err)
		}
		for i, w := range want {
			if verdicts[i].Selected || verdicts[i].Why != w {
				t.Errorf("%s: %s verdict %+v, want why %q", name, c.Hosts[i].Addr, verdicts[i], w)
			}
		}
	}
}

// A fork of an older timeline leaves tokens on the later one provable as
// before (the later timeline descends from one branch, whose history the
// host has), and a token without a timeline too, which is taken to be on
// the newest; a token on the forked timeline stays unprovable.
func TestForkedOlderTimeline(t *testing.T) {
	p := seen("10.0.0.1", false, 0x9000)
	p.Timeline = 3
	r := seen("10.0.0.2", true, 0x9000)
	r.Timeline, r.AppName = 3, "n2"
	r.History = []TimelineEnd{{Timeline: 1, End: 0x3000}, {Timeline: 2, End: 0x8000}}
	p.Standbys = []Standby{{Addr: r.IP, AppName: "n2"}}
	s := forkedCluster([]uint32{2}, p, r)
	for name, want := range map[string]int{
		"lsn-0-8800-t3.replica.db.local.":        1,
		"lsn-0-8800.replica.db.local.":           1,
		"lsn-0-2000-t1.replica.db.local.":        1, // timeline 3's history says where timeline 1 ended
		"lsn-0-7000-t2.replica.db.local.":        0, // forked: which branch of 2 was it written on?
		"lsn-0-7000-t2.prefer-replica.db.local.": 0, // nor the primary
		"lsn-0-7000-t2.any.db.local.":            0,
		"lsn-0-8800-t3.prefer-replica.db.local.": 1,
	} {
		if got := selectIPs(t, s, name, t0, 0); len(got) != want {
			t.Errorf("%s answered %v, want %d hosts", name, got, want)
		}
	}
}

// During the split brain itself (review 5, F12 variant 1b) no primary is
// answered, and rule 6 would let lsn- names answer a replica by its own
// replay; a replica on a forked timeline proves nothing of a token on it.
// Since review 7, H10, no replica on the split timeline is answered at
// all, forked or not (splitbrain_test.go): lsn- names stay empty either
// way, and so does replica.
func TestForkedDuringSplitBrain(t *testing.T) {
	a, b := seen("10.0.0.1", false, 0x9000), seen("10.0.0.3", false, 0x9100)
	r := seen("10.0.0.2", true, 0x9000)
	before := cluster(a, b, r)
	if !before.Clusters[0].SplitBrain {
		t.Fatal("no split brain")
	}
	s := forkedCluster([]uint32{1}, a, b, r)
	for _, name := range []string{"lsn-0-10-t1.replica.db.local.", "lsn-0-10.replica.db.local.", "lsn-0-10-t1.prefer-replica.db.local.",
		"lsn-0-10.any.db.local.", "replica.db.local."} {
		if got := selectIPs(t, before, name, t0, 0); len(got) != 0 {
			t.Errorf("%s answered %v during the split brain, want no address", name, got)
		}
		if got := selectIPs(t, s, name, t0, 0); len(got) != 0 {
			t.Errorf("%s answered %v during the split brain on forked timeline 1, want no address", name, got)
		}
	}
}
