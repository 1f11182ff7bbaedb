package zone

import (
	"strings"
	"testing"
)

// Rule 13: a token on a timeline at or below the window of a restart of
// its writer is proven by no host, the primary included; one above it by
// position as ever; a token without a timeline is judged against the
// newest timeline's window; a token on another timeline is not affected.
func TestRestartWindow(t *testing.T) {
	p, r := timelineTwo(0x1000)
	s := cluster(p, r)
	s.Clusters[0].RestartedTimelines = []TimelineRestart{{Timeline: 2, Upto: 0x5000, Note: "10.0.0.1:5432's server restarted at 2026-12-01T19:40:00Z"}}
	for name, want := range map[string]int{
		"lsn-0-5000-t2.replica.db.local.": 0, "lsn-0-4000.prefer-replica.db.local.": 0, "lsn-0-10-t2.any.db.local.": 0,
		"lsn-0-5001-t2.replica.db.local.": 1, "lsn-0-8000.any.db.local.": 2, "lsn-0-800-t1.replica.db.local.": 1,
		"replica.db.local.": 1,
	} {
		if got := selectIPs(t, s, name, t0, 0); len(got) != want {
			t.Errorf("%s answered %v, want %d hosts", name, got, want)
		}
	}
	q, _ := Parse("lsn-0-4000-t2.prefer-replica.db.local.", origin)
	if why := s.TokenUnprovable(&q); !strings.Contains(why, "written before 10.0.0.1:5432's server restarted at") ||
		!strings.HasSuffix(why, "a restart cannot be told from a restore or a rebuild") {
		t.Errorf("TokenUnprovable = %q, want the restart's reason", why)
	}
	verdicts, err := View{Snap: s, Now: t0}.Explain(&q)
	if err != nil {
		t.Fatal(err)
	}
	for _, vd := range verdicts {
		if vd.Selected || !strings.Contains(vd.Why, "a restart cannot be told from a restore or a rebuild") {
			t.Errorf("/v1/resolve for %s: %+v, want left out with the restart's reason", vd.Host.Addr, vd)
		}
	}
}
