package state

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/probe"
)

// A timeline a replica's lower bound showed above the newest (review 6,
// G1d) is kept in the file with its witness and that witness's run, and
// decodes to the same; a file written before the field (none) still loads,
// with nothing witnessed; a witnessed entry without its timeline or witness
// is refused in one line.
func TestWitnessedTimelineRoundTrip(t *testing.T) {
	run := time.Date(2026, 12, 1, 9, 15, 0, 250000, time.UTC)
	m := map[string]probe.Remembered{"main": {Identity: 7713995393360043562, NewestTimeline: 1,
		Timelines: map[uint32]probe.TimelineHistory{}, Witnessed: 2, WitnessedBy: "10.0.0.3:5432", WitnessedRun: run}}
	data := Encode(m)
	for _, want := range []string{`"witnessed": {`, `"timeline": 2`, `"by": "10.0.0.3:5432"`, `"server_started": "2026-12-01T09:15:00.00025Z"`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("encoded state lacks %s:\n%s", want, data)
		}
	}
	got, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Errorf("decoded\n%+v\nwant\n%+v", got, m)
	}
	if string(Encode(got)) != string(data) {
		t.Error("what was read back encodes differently")
	}

	older := `{"version": 2, "clusters": {"main": {"system_identifier": "7713995393360043562", "newest_timeline": 1, "serial": 5}}}`
	got, err = Decode([]byte(older))
	if err != nil {
		t.Fatalf("a file without witnessed: %v", err)
	}
	if r := got["main"]; r.Witnessed != 0 || r.WitnessedBy != "" || !r.WitnessedRun.IsZero() || r.NewestTimeline != 1 {
		t.Errorf("a file without witnessed read as %+v", r)
	}
	if strings.Contains(string(Encode(got)), "witnessed") {
		t.Errorf("nothing witnessed, and the file says witnessed:\n%s", Encode(got))
	}

	for _, bad := range []string{`{"timeline": 0, "by": "10.0.0.3:5432"}`, `{"timeline": 2}`} {
		_, err := Decode([]byte(`{"version": 2, "clusters": {"main": {"system_identifier": "1", "newest_timeline": 1, "witnessed": ` + bad + `}}}`))
		if err == nil || !strings.Contains(err.Error(), "clusters.main.witnessed needs a timeline") {
			t.Errorf("witnessed %s: %v", bad, err)
		}
	}
}
