package httpapi

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/zone"
	"github.com/pgdns/pgdns/zone/zonetest"
)

// lagSnapshot is a primary and one replica lag behind, probed at now.
func lagSnapshot(now time.Time, lag time.Duration, extra ...zone.Host) *zone.Snapshot {
	p := zonetest.Host("127.0.0.11", false, 0x3000060, now)
	r := zonetest.Host("127.0.0.12", true, 0x3000000, now)
	r.Lag = lag
	return zonetest.Ready(now, 2*time.Second, zonetest.Cluster("main", append([]zone.Host{p, r}, extra...)...))
}

func TestLagHistoryRecordsVouchedLags(t *testing.T) {
	l := NewLagHistory()
	for i, lag := range []time.Duration{3 * time.Millisecond, 40 * time.Millisecond, 7 * time.Millisecond} {
		now := t0.Add(time.Duration(i) * LagStep)
		l.Record(zone.View{Snap: lagSnapshot(now, lag), Now: now})
	}
	// A sample whose probe data is too old: the lag cannot be vouched for.
	late := t0.Add(3 * LagStep)
	l.Record(zone.View{Snap: lagSnapshot(t0, time.Millisecond), Now: late.Add(time.Hour)})
	got, ok := l.series("main", "127.0.0.12:5432", t0.Add(-time.Minute))
	if !ok {
		t.Fatal("replica not recorded")
	}
	var ms []int32
	for _, p := range got {
		ms = append(ms, p.ms)
	}
	if want := []int32{3, 40, 7, lagUnknown}; fmt.Sprint(ms) != fmt.Sprint(want) {
		t.Errorf("samples %v, want %v", ms, want)
	}
	// The primary has no lag: every sample unknown, drawn as no line.
	prim, _ := l.series("main", "127.0.0.11:5432", t0.Add(-time.Minute))
	if s := drawSparkline(prim, late, LagSamples*LagStep); s.Line != "" || s.Peak != -1 {
		t.Errorf("primary sparkline %+v, want no line", s)
	}
}

// The ring keeps LagSamples samples however long it runs, and forgets
// hosts that left the snapshot: an hour (or a day) costs what 5 minutes do.
func TestLagHistoryIsBounded(t *testing.T) {
	l := NewLagHistory()
	for i := range 10 * LagSamples {
		now := t0.Add(time.Duration(i) * LagStep)
		// A host that comes and goes under a new name each round, as a
		// churning Patroni member list would.
		churn := zonetest.Host(fmt.Sprintf("127.0.%d.%d", i/250%250, i%250+1), true, 0, now)
		churn.Addr = fmt.Sprintf("churn-%d:5432", i)
		l.Record(zone.View{Snap: lagSnapshot(now, time.Duration(i%50)*time.Millisecond, churn), Now: now})
	}
	if n := len(l.hosts); n != 3 {
		t.Errorf("%d hosts kept, want the 3 of the last snapshot", n)
	}
	end := t0.Add(time.Duration(10*LagSamples-1) * LagStep)
	got, _ := l.series("main", "127.0.0.12:5432", time.Time{})
	if len(got) != LagSamples || !got[len(got)-1].at.Equal(end) {
		t.Errorf("%d samples ending %v, want %d ending %v", len(got), got[len(got)-1].at, LagSamples, end)
	}

	// Past LagHosts hosts, the rest are not recorded (and say so).
	var many []zone.Host
	for i := range LagHosts + 10 {
		h := zonetest.Host("127.0.0.20", true, 0, t0)
		h.Addr = fmt.Sprintf("h%d:5432", i)
		many = append(many, h)
	}
	l = NewLagHistory()
	l.Record(zone.View{Snap: zonetest.Ready(t0, time.Second, zonetest.Cluster("big", many...)), Now: t0})
	if len(l.hosts) != LagHosts {
		t.Errorf("%d hosts recorded, want the cap %d", len(l.hosts), LagHosts)
	}
}

func TestSparkline(t *testing.T) {
	now := t0
	window := 100 * time.Second
	pts := []lagPoint{
		{now.Add(-100 * time.Second), 0},
		{now.Add(-75 * time.Second), 20},
		{now.Add(-50 * time.Second), lagUnknown},
		{now.Add(-25 * time.Second), 10},
		{now, 5},
	}
	s := drawSparkline(pts, now, window)
	// x: 2 + f×146; y: 26 − ms/20×24 (the peak, 20 ms, at the top).
	if want := "M2 26L38 2M111 14L148 20"; s.Line != want {
		t.Errorf("line %q, want %q", s.Line, want)
	}
	if want := "M75 27L75 27"; s.Unknown != want {
		t.Errorf("unknown stretches %q, want %q", s.Unknown, want)
	}
	if s.Peak != 20 || s.Max != 20 || s.Samples != 5 {
		t.Errorf("peak %d max %d samples %d", s.Peak, s.Max, s.Samples)
	}
	// A steady lag is drawn with its ends only, a stretch of unknown
	// samples as one underline.
	var steady []lagPoint
	for i := range 100 {
		ms := int32(7)
		if i >= 60 && i < 80 {
			ms = lagUnknown
		}
		steady = append(steady, lagPoint{now.Add(time.Duration(i-99) * time.Second), ms})
	}
	s = drawSparkline(steady, now, window)
	if want := "M3 10L89 10M120 10L148 10"; s.Line != want {
		t.Errorf("steady line %q, want %q", s.Line, want)
	}
	if want := "M91 27L118 27"; s.Unknown != want {
		t.Errorf("steady unknown %q, want %q", s.Unknown, want)
	}
	// Small lags do not fill the box: the top stays at sparkMinMax.
	if s := drawSparkline([]lagPoint{{now, 1}}, now, window); s.Max != sparkMinMax || !strings.HasPrefix(s.Line, "M148 24") {
		t.Errorf("1 ms: %+v", s)
	}
}
