package zone

import (
	"testing"
	"time"
)

func TestExplain(t *testing.T) {
	p := seen("10.0.0.1", false, 0x3000060)
	fresh := seen("10.0.0.2", true, 0x3000060)
	behind := seen("10.0.0.3", true, 0x3000000)
	behind.Lag, behind.LagBytes = 1200*time.Millisecond, 0x60
	down := seen("10.0.0.4", true, 0)
	down.Fails, down.LastError = 3, "connect: connection refused"
	s := cluster(p, fresh, behind, down)

	cases := map[string][]string{
		"lag-50ms.replica.db.local.":             {"primary: not a replica", "", "lag 1200ms > 50ms", "down: connect: connection refused"},
		"bytes-16b.replica.db.local.":            {"primary: not a replica", "", "lag 96 bytes > 16 bytes", "down: connect: connection refused"},
		"lsn-0-3000060.replica.db.local.":        {"primary: not a replica", "", "replay 0/3000000 < 0/3000060", "down: connect: connection refused"},
		"lsn-0-3000061.prefer-replica.db.local.": {"", "replay 0/3000060 < 0/3000061", "replay 0/3000000 < 0/3000061", "down: connect: connection refused"},
		"primary.db.local.":                      {"", "replica: not the primary", "replica: not the primary", "down: connect: connection refused"},
	}
	for name, want := range cases {
		expectVerdicts(t, s, name, want)
	}
}

// explainName is /v1/resolve's verdicts on every host of s for name, at
// t0; a name that does not parse or explain fails the test.
func explainName(t *testing.T, s *Snapshot, name string) []Verdict {
	t.Helper()
	q, err := Parse(name, origin)
	if err != nil {
		t.Fatal(err)
	}
	verdicts, err := View{Snap: s, Now: t0}.Explain(&q)
	if err != nil {
		t.Fatal(err)
	}
	return verdicts
}

// expectVerdicts checks explainName's verdicts for name, host by host:
// want[i] is why host i is left out, "" that it is selected.
func expectVerdicts(t *testing.T, s *Snapshot, name string, want []string) {
	t.Helper()
	for i, v := range explainName(t, s, name) {
		if v.Why != want[i] || v.Selected != (want[i] == "") {
			t.Errorf("%s host %d: selected %v why %q, want %q", name, i, v.Selected, v.Why, want[i])
		}
	}
}

// A lag or byte filter's reason for a replica without a bound says why
// (review 13a): after a failover a replica whose WAL receiver's timeline
// the probe role may not read is on a lower bound below the primary's
// timeline, which lasts until its next restartpoint; plain "lag unknown"
// read as a moment's wait. The primary's statistics are readable here
// (the replica's alone hidden: another role on it): with them hidden too
// no sender proves such a replica a follower, and it is set aside
// (TestHiddenTimeline).
func TestExplainLagUnknown(t *testing.T) {
	p := seen("10.0.0.1", false, 0x3000060)
	p.Timeline = 2
	p.Standbys = []Standby{{Slot: "n2"}, {Slot: "n3"}}
	hidden := seen("10.0.0.2", true, 0x3000060)
	hidden.TimelineExact, hidden.TimelineHidden, hidden.StatsHidden, hidden.SlotName = false, true, true, "n2"
	hidden.LagKnown, hidden.BytesKnown = false, false
	noBytes := seen("10.0.0.3", true, 0x3000060)
	noBytes.Timeline, noBytes.StatsHidden, noBytes.TimelineHidden, noBytes.SlotName, noBytes.BytesKnown = 2, true, false, "n3", false
	s := cluster(p, hidden, noBytes)
	cases := map[string][]string{
		"lag-1s.replica.db.local.": {"primary: not a replica",
			"lag unknown: its timeline is hidden from the probe role (grant pg_monitor), at least 1 by its control file, and the primary is on timeline 2: WAL positions of two timelines do not compare",
			""},
		"bytes-1mb.replica.db.local.": {"primary: not a replica",
			"lag unknown: its timeline is hidden from the probe role (grant pg_monitor), at least 1 by its control file, and the primary is on timeline 2: WAL positions of two timelines do not compare",
			"byte lag unknown: no probe of the primary has started since its last probe ended, and a byte bound holds only from one"},
	}
	for name, want := range cases {
		expectVerdicts(t, s, name, want)
	}
}
