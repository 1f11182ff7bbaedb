package zone

import (
	"slices"
	"strings"
	"testing"
)

// afterFailover is a cluster on timeline 2: primary 10.0.0.2 (promoted
// at 0/8000, where timeline 1 ended) and replica 10.0.0.3 following it,
// both past 0/9000; fromFile says whether the history came from a
// history file (exact) or from a switch the probe watched (a lower bound).
func afterFailover(fromFile bool) *Snapshot {
	p := seen("10.0.0.2", false, 0x9000)
	p.InsertLSN = 0x9000
	r := seen("10.0.0.3", true, 0x9000)
	r.SenderHost, r.AppName = "10.0.0.2", "n3"
	p.Standbys = []Standby{{Addr: r.IP, AppName: "n3"}}
	for _, h := range []*Host{&p, &r} {
		h.Timeline, h.History, h.HistoryFromFile = 2, []TimelineEnd{{Timeline: 1, End: 0x8000}}, fromFile
	}
	return cluster(p, r)
}

// Review 6, G4: a -t1 token past where timeline 1 ended, by timeline 2's
// history file, names a write lost in the failover. No name answers it:
// not replica, and not prefer-replica's fallback nor any, which answered
// the new primary, which provably lacks the write. TXT and /v1/resolve say
// why. A token in the history, or one on timeline 2 not replayed yet,
// answers as before; so does the lost token when the history is only a
// watched lower bound (the write may be in it), and the reasons say so.
func TestLostWriteIsAnsweredByNoName(t *testing.T) {
	const lost = "lsn-0-8800-t1"
	s := afterFailover(true)
	for _, target := range []string{"replica", "prefer-replica", "any", "primary"} {
		if got := selectIPs(t, s, lost+"."+target+".db.local.", t0, 0); len(got) != 0 {
			t.Errorf("%s.%s answered %v, which lacks the write lost with timeline 1", lost, target, got)
		}
	}
	for name, want := range map[string][]string{
		"lsn-0-7000-t1.replica.db.local.":        {"10.0.0.3"},             // timeline 1 ended after it
		"lsn-0-7000-t1.any.db.local.":            {"10.0.0.2", "10.0.0.3"}, // the primary first
		"lsn-0-9100-t2.prefer-replica.db.local.": {"10.0.0.2"},             // not replayed yet: the primary has it
		"lsn-0-9100-t2.replica.db.local.":        {},
		"lsn-0-8800.prefer-replica.db.local.":    {"10.0.0.3"}, // no timeline: a position on timeline 2 (rule 9)
		"replica.db.local.":                      {"10.0.0.3"},
	} {
		if got := selectIPs(t, s, name, t0, 0); !slices.Equal(got, want) {
			t.Errorf("%s answered %v, want %v", name, got, want)
		}
	}

	const why = "0/8800 on timeline 1 lost in the failover to timeline 2 at 0/8000: " +
		"timeline 2's history file says timeline 1 ended there, before the token"
	for name, want := range map[string]string{
		lost + ".prefer-replica.db.local.":       why,
		lost + ".any.db.local.":                  why,
		"lsn-0-7000-t1.replica.db.local.":        "",
		"lsn-0-9100-t2.prefer-replica.db.local.": "",
		"lsn-0-8800.replica.db.local.":           "",
	} {
		q, _ := Parse(name, origin)
		if got := s.TokenUnprovable(&q); got != want {
			t.Errorf("TokenUnprovable(%s) = %q, want %q", name, got, want)
		}
	}
	v := View{Snap: s, Now: t0}
	c := s.Clusters[0]
	q, _ := Parse(lost+".prefer-replica.db.local.", origin)
	if v.Within(c, &c.Hosts[0], &q) || v.Within(c, &c.Hosts[1], &q) {
		t.Errorf("Within: a host passes %s, lost with timeline 1", lost)
	}
	explained(t, v, &q, "primary: "+why, "timeline 2: 0/8800 on timeline 1 is not in its history")

	// Watched only: timeline 1 ended at or after 0/8000, maybe past the
	// token. Neither lost nor kept is proven, and the new primary has
	// timeline 2's one history as its replica has: no name answers it
	// (review 9, R9-2: prefer-replica and any answered the primary, which
	// lacked the write), and the reasons say the proof is missing.
	w := afterFailover(false)
	for _, target := range []string{"replica", "prefer-replica", "any", "primary"} {
		if got := selectIPs(t, w, lost+"."+target+".db.local.", t0, 0); len(got) != 0 {
			t.Errorf("watched history: %s.%s answered %v, which may lack the write", lost, target, got)
		}
	}
	const unproven = "0/8800 on timeline 1 is not proven in timeline 2's history: where timeline 1 ended is not known past 0/8000 " +
		"(a switch pgdns watched; no history file read: grant EXECUTE on pg_read_file to the probe role)"
	if got := w.TokenUnprovable(&q); got != unproven {
		t.Errorf("watched history: TokenUnprovable = %q, want %q", got, unproven)
	}
	explained(t, View{Snap: w, Now: t0}, &q, "primary: "+unproven,
		"timeline 2: 0/8800 on timeline 1 is not proven in its history: timeline 1 ended at or after 0/8000 (a switch pgdns watched; no history file read)")
}

// Review 9, R9-2: the primary on a later timeline than a token's passes
// its lsn- filter only when its history proves the token's timeline ended
// at or after the token, as a replica does: an exact end from a history
// file, or a watched switch whose lower bound is at or past the token.
// Without it (a bound below the token, or no end known at all) no name
// answers, however far the primary's own position is past the token, and
// TXT, /v1/resolve and Within say so; with it, the primary is answered as
// before, and so is a token of the primary's own timeline.
func TestPrimaryProvesAnOlderTimelinesTokenByItsHistory(t *testing.T) {
	bare := func(history []TimelineEnd) *Snapshot {
		p := seen("10.0.0.2", false, 0x9000)
		p.InsertLSN, p.Timeline, p.History = 0x9000, 2, history
		return cluster(p)
	}
	cases := []struct {
		what    string
		s       *Snapshot
		name    string
		want    []string
		because string // TokenUnprovable's reason, when none is answered
	}{
		{"watched bound past the token", afterFailover(false), "lsn-0-7000-t1.prefer-replica.db.local.", []string{"10.0.0.3"}, ""},
		{"watched bound at the token", bare([]TimelineEnd{{1, 0x8000}}), "lsn-0-8000-t1.any.db.local.", []string{"10.0.0.2"}, ""},
		{"a token of its own timeline", bare(nil), "lsn-0-7000-t2.any.db.local.", []string{"10.0.0.2"}, ""},
		{"watched bound below the token", bare([]TimelineEnd{{1, 0x8000}}), "lsn-0-8001-t1.any.db.local.", nil,
			"0/8001 on timeline 1 is not proven in timeline 2's history: where timeline 1 ended is not known past 0/8000 " +
				"(a switch pgdns watched; no history file read: grant EXECUTE on pg_read_file to the probe role)"},
		{"no end known", bare(nil), "lsn-0-10-t1.prefer-replica.db.local.", nil,
			"0/10 on timeline 1 is not proven in timeline 2's history: where timeline 1 ended is not known " +
				"(no switch watched; no history file read: grant EXECUTE on pg_read_file to the probe role)"},
		{"no end known, primary", bare(nil), "lsn-0-10-t1.primary.db.local.", nil,
			"0/10 on timeline 1 is not proven in timeline 2's history: where timeline 1 ended is not known " +
				"(no switch watched; no history file read: grant EXECUTE on pg_read_file to the probe role)"},
		{"an older timeline's end only", bare([]TimelineEnd{{2, 0x8000}}), "lsn-0-10-t1.any.db.local.", nil,
			"0/10 on timeline 1 is not proven in timeline 2's history: where timeline 1 ended is not known " +
				"(no switch watched; no history file read: grant EXECUTE on pg_read_file to the probe role)"},
	}
	for _, tc := range cases {
		if got := selectIPs(t, tc.s, tc.name, t0, 0); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %s answered %v, want %v", tc.what, tc.name, got, tc.want)
		}
		q, _ := Parse(tc.name, origin)
		if got := tc.s.TokenUnprovable(&q); got != tc.because {
			t.Errorf("%s: TokenUnprovable(%s) = %q, want %q", tc.what, tc.name, got, tc.because)
		}
		v := View{Snap: tc.s, Now: t0}
		c := tc.s.Clusters[0]
		if within := v.Within(c, c.PrimaryHost(), &q); within != (tc.because == "") {
			t.Errorf("%s: Within(the primary, %s) = %v", tc.what, tc.name, within)
		}
		verdicts, _ := v.Explain(&q)
		if why := verdicts[0].Why; tc.because != "" && why != "primary: "+tc.because {
			t.Errorf("%s: the primary's verdict %q, want %q", tc.what, why, "primary: "+tc.because)
		}
	}
}

// A later timeline that does not descend from the token's (timeline 3
// branched off timeline 1, timeline 2 died elsewhere) proves the token's
// write lost whatever its position; a fork of the newest timeline leaves
// the branch, and so the history, unknown: the fork is the reason then.
func TestLostWriteOfATimelineNotInTheHistory(t *testing.T) {
	p := seen("10.0.0.2", false, 0x9000)
	p.Timeline, p.History, p.HistoryFromFile = 3, []TimelineEnd{{Timeline: 1, End: 0x3000}}, true
	s := cluster(p)
	const name = "lsn-0-2000-t2.prefer-replica.db.local."
	if got := selectIPs(t, s, name, t0, 0); len(got) != 0 {
		t.Errorf("%s answered %v: timeline 3 does not descend from timeline 2", name, got)
	}
	q, _ := Parse(name, origin)
	if got, want := s.TokenUnprovable(&q), "0/2000 on timeline 2 lost in a failover: timeline 3's history file does not descend from timeline 2"; got != want {
		t.Errorf("TokenUnprovable = %q, want %q", got, want)
	}
	if got := selectIPs(t, s, "lsn-0-2000-t1.prefer-replica.db.local.", t0, 0); !slices.Equal(got, []string{"10.0.0.2"}) {
		t.Errorf("a token of timeline 1 before its end answered %v, want the primary", got)
	}

	f := forkedCluster([]uint32{2}, afterFailover(true).Clusters[0].Hosts...)
	const forked = "lsn-0-8800-t1.prefer-replica.db.local."
	q, _ = Parse(forked, origin)
	if got := f.TokenUnprovable(&q); got != "" {
		t.Errorf("forked newest timeline: TokenUnprovable = %q, want none: the hosts' fork is the reason", got)
	}
	if got := selectIPs(t, f, forked, t0, 0); len(got) != 0 {
		t.Errorf("forked newest timeline: %s answered %v", forked, got)
	}
	verdicts, _ := View{Snap: f, Now: t0}.Explain(&q)
	if why := verdicts[0].Why; strings.Contains(why, "lost") || !strings.Contains(why, "forked") {
		t.Errorf("forked newest timeline: the primary's verdict %q, want the fork", why)
	}
}

// explained checks /v1/resolve's verdicts for q on a cluster of a primary
// and a replica: neither selected, and the reasons given ("" leaves the
// primary's unchecked).
func explained(t *testing.T, v View, q *Query, primary, replica string) {
	t.Helper()
	verdicts, err := v.Explain(q)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{primary, replica} {
		if i == 0 && want == "" {
			continue
		}
		if verdicts[i].Selected || verdicts[i].Why != want {
			t.Errorf("%s: %s verdict %+v, want why %q", q.String(), verdicts[i].Host.Addr, verdicts[i], want)
		}
	}
}

// Review 7, H4: a token without a timeline past where timeline 1 ended
// (0/8000) and at or below where the probe saw timeline 1's writer insert
// (0/8800) may be a write lost in the failover: on timeline 2 the position
// holds other WAL, which every host on it has replayed. No name answers
// it, and TXT and /v1/resolve say why. Below the end both timelines hold
// the same WAL, above the reach only timeline 2 wrote, a -t2 token is
// judged by timeline: each answers as before. After a clean switchover
// (the writer seen no further than the end) the window is empty; with
// only a watched lower bound of the end, the window starts at the bound.
func TestTimelinelessTokenInAFailoverWindow(t *testing.T) {
	withReach := func(fromFile bool, insert LSN) *Snapshot {
		s := afterFailover(fromFile)
		c := s.Clusters[0]
		c.Reached = []TimelineReach{{Timeline: 1, Insert: insert}}
		for i := range c.Hosts {
			c.Hosts[i].WALBlockSize, c.Hosts[i].WALSegmentSize = 8192, 16<<20
		}
		return s
	}
	s := withReach(true, 0x8800)
	for _, tok := range []string{"lsn-0-8400", "lsn-0-8800"} {
		for _, target := range []string{"replica", "prefer-replica", "any", "primary"} {
			if got := selectIPs(t, s, tok+"."+target+".db.local.", t0, 0); len(got) != 0 {
				t.Errorf("%s.%s answered %v: the token may be a write of timeline 1 lost in the failover", tok, target, got)
			}
		}
	}
	for name, want := range map[string][]string{
		"lsn-0-7000.replica.db.local.":        {"10.0.0.3"}, // before the end: on both timelines
		"lsn-0-8000.replica.db.local.":        {"10.0.0.3"}, // at the end
		"lsn-0-8018.replica.db.local.":        {"10.0.0.3"}, // past a page header at the end: the same position (8 kB pages)
		"lsn-0-8801.replica.db.local.":        {"10.0.0.3"}, // above what timeline 1's writer was seen to write
		"lsn-0-8400-t2.replica.db.local.":     {"10.0.0.3"}, // a write of timeline 2, by its timeline
		"lsn-0-8400-t1.replica.db.local.":     {},           // lost, by the history file (tokenLost)
		"lsn-0-9100.prefer-replica.db.local.": {"10.0.0.2"},
	} {
		if got := selectIPs(t, s, name, t0, 0); !slices.Equal(got, want) {
			t.Errorf("%s answered %v, want %v", name, got, want)
		}
	}
	const why = "0/8400 may be a write of timeline 1 lost in the failover to 2 at 0/8000: timeline 2's history file says timeline 1 " +
		"ended there, and pgdns saw its writer insert up to 0/8800 (a token with its timeline, -tN, would tell)"
	q, _ := Parse("lsn-0-8400.prefer-replica.db.local.", origin)
	if got := s.TokenUnprovable(&q); got != why {
		t.Errorf("TokenUnprovable = %q, want %q", got, why)
	}
	explained(t, View{Snap: s, Now: t0}, &q, "primary: "+why, why)
	// Seen by a replica's replay past what the writer was seen to insert
	// (review 12a, R12a-1): the same window, and the reason says whose.
	byReplica := withReach(true, 0x8800)
	byReplica.Clusters[0].Reached[0].Replica = "10.0.0.4:5432"
	const whyReplica = "0/8400 may be a write of timeline 1 lost in the failover to 2 at 0/8000: timeline 2's history file says timeline 1 " +
		"ended there, and pgdns saw 10.0.0.4:5432 (in recovery) hold its WAL up to 0/8800 (a token with its timeline, -tN, would tell)"
	if got := byReplica.TokenUnprovable(&q); got != whyReplica {
		t.Errorf("TokenUnprovable = %q, want %q", got, whyReplica)
	}
	// A position a replica without a WAL receiver held, its timeline
	// known only to be at least 1: past the end it may be timeline 1's
	// WAL, so the window reaches it, and the reason says it may; below
	// the writer's reach the writer's reason stands.
	possible := withReach(true, 0x8800)
	possible.Clusters[0].Reached[0].Possible, possible.Clusters[0].Reached[0].PossibleBy, possible.Clusters[0].Reached[0].PossibleFloor = 0x9800, "10.0.0.5:5432", 1
	for name, want := range map[string][]string{
		"lsn-0-9000.prefer-replica.db.local.": {},
		"lsn-0-9800.any.db.local.":            {},
		"lsn-0-9801.any.db.local.":            {"10.0.0.2"},
		"lsn-0-9000-t2.replica.db.local.":     {"10.0.0.3"},
	} {
		if got := selectIPs(t, possible, name, t0, 0); !slices.Equal(got, want) {
			t.Errorf("a receiver-less replica's position: %s answered %v, want %v", name, got, want)
		}
	}
	const whyPossible = "0/9000 may be a write of timeline 1 lost in the failover to 2 at 0/8000: timeline 2's history file says timeline 1 " +
		"ended there, and pgdns saw 10.0.0.5:5432 (in recovery, its timeline not known: at least 1) hold WAL up to 0/9800 (a token with its timeline, -tN, would tell)"
	if qp, _ := Parse("lsn-0-9000.any.db.local.", origin); possible.TokenUnprovable(&qp) != whyPossible {
		t.Errorf("TokenUnprovable = %q, want %q", possible.TokenUnprovable(&qp), whyPossible)
	}
	if got := possible.TokenUnprovable(&q); got != why {
		t.Errorf("below the writer's reach: TokenUnprovable = %q, want %q", got, why)
	}
	v := View{Snap: s, Now: t0}
	if c := s.Clusters[0]; v.Within(c, &c.Hosts[0], &q) || v.Within(c, &c.Hosts[1], &q) {
		t.Errorf("Within: a host passes %s", q.String())
	}

	clean := withReach(true, 0x7f00) // a switchover: everything sent before the end
	for name, want := range map[string][]string{
		"lsn-0-8400.replica.db.local.": {"10.0.0.3"},
		"lsn-0-7f00.replica.db.local.": {"10.0.0.3"},
	} {
		if got := selectIPs(t, clean, name, t0, 0); !slices.Equal(got, want) {
			t.Errorf("clean switchover: %s answered %v, want %v", name, got, want)
		}
	}

	w := withReach(false, 0x8800) // timeline 1 ended at or after 0/8000
	if got := selectIPs(t, w, "lsn-0-8400.prefer-replica.db.local.", t0, 0); len(got) != 0 {
		t.Errorf("watched history: lsn-0-8400.prefer-replica answered %v", got)
	}
	const watched = "0/8400 may be a write of timeline 1 lost in the failover to 2 at 0/8000 or later: timeline 1 ended at or after it " +
		"(a switch pgdns watched; no history file read), and pgdns saw its writer insert up to 0/8800 (a token with its timeline, -tN, would tell)"
	if got := w.TokenUnprovable(&q); got != watched {
		t.Errorf("watched history: TokenUnprovable = %q, want %q", got, watched)
	}
}

// Review 9, R9-2: with no end of timeline 1 known at all (a probe role
// without pg_monitor watches no switch and reads no history file) a token
// without a timeline at or below where pgdns saw timeline 1's writer
// insert may be a write lost in the failover, wherever timeline 1 ended:
// no name answers it, the new primary included, and the reason says what
// is missing. Above that reach only timeline 2 wrote: answered as before.
func TestTimelinelessTokenWithNoEndKnown(t *testing.T) {
	s := afterFailover(false)
	c := s.Clusters[0]
	// A receiver-less replica's position counts for nothing with no end
	// known: it may be all timeline 2's WAL.
	c.Reached = []TimelineReach{{Timeline: 1, Insert: 0x8800, Possible: 0x9800, PossibleBy: "10.0.0.5:5432", PossibleFloor: 1}}
	for i := range c.Hosts {
		c.Hosts[i].History = nil
	}
	for _, tok := range []string{"lsn-0-7000", "lsn-0-8800"} {
		for _, target := range []string{"replica", "prefer-replica", "any", "primary"} {
			if got := selectIPs(t, s, tok+"."+target+".db.local.", t0, 0); len(got) != 0 {
				t.Errorf("%s.%s answered %v: where timeline 1 ended is not known", tok, target, got)
			}
		}
	}
	if got := selectIPs(t, s, "lsn-0-8801.replica.db.local.", t0, 0); !slices.Equal(got, []string{"10.0.0.3"}) {
		t.Errorf("lsn-0-8801.replica answered %v, want the replica (above timeline 1's reach)", got)
	}
	q, _ := Parse("lsn-0-7000.any.db.local.", origin)
	const why = "0/7000 may be a write of timeline 1 lost in a failover to 2: where timeline 1 ended is not known (no switch watched; " +
		"no history file read: grant EXECUTE on pg_read_file to the probe role), and pgdns saw its writer insert up to 0/8800"
	if got := s.TokenUnprovable(&q); got != why {
		t.Errorf("TokenUnprovable = %q, want %q", got, why)
	}
	explained(t, View{Snap: s, Now: t0}, &q, "primary: "+why, why)
}
