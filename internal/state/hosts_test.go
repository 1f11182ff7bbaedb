package state

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/probe"
)

// "hosts" (the addresses seen with the identity) round-trips, and a file
// without it says "not known" (nil), which the probe reads as every host
// listed at the start, unlike an empty list: none (review 7, H6, H13).
func TestHostsSeenWithTheIdentity(t *testing.T) {
	in := map[string]probe.Remembered{
		"live": {Identity: 7, NewestTimeline: 2, Members: []string{"10.0.0.1:5432", "10.0.0.2:5432"}},
		"next": {Identity: 8, NewestTimeline: 1, Members: []string{}},
		"old":  {Identity: 9, NewestTimeline: 1},
	}
	out, err := Decode(Encode(in))
	if err != nil {
		t.Fatal(err)
	}
	if got := out["live"].Members; !slices.Equal(got, in["live"].Members) {
		t.Errorf("live's hosts: %q", got)
	}
	if got := out["next"].Members; got == nil || len(got) != 0 {
		t.Errorf("next's hosts, none: %#v", got)
	}
	if got := out["old"].Members; got != nil {
		t.Errorf("old's hosts, not known: %#v", got)
	}
	v1, err := Decode([]byte(`{"version": 1, "clusters": {"main": {"system_identifier": "5", "newest_timeline": 1}}}`))
	if err != nil || v1["main"].Members != nil {
		t.Errorf("a version 1 file: %#v, %v", v1["main"].Members, err)
	}
	if _, err := Decode([]byte(`{"version": 2, "clusters": {"main": {"system_identifier": "5", "hosts": [""]}}}`)); err == nil {
		t.Error("an empty address in hosts was accepted")
	}
}

// "hosts_started" (the server runs of the hosts seen with the identity,
// by address) round-trips, in UTC whatever zone a run was read in, and a
// file without it, written before it, reads as none known (nil): such a
// host is known by its address only, as before.
func TestHostsStartedRoundTrip(t *testing.T) {
	run := time.Date(2026, 12, 1, 9, 0, 0, 123456000, time.UTC)
	in := map[string]probe.Remembered{
		"main": {Identity: 7, NewestTimeline: 2, Members: []string{"10.0.0.1:5432", "10.0.0.3:5432"},
			Runs: map[string]time.Time{"10.0.0.1:5432": run, "10.0.0.3:5432": run.Add(time.Minute).In(time.FixedZone("CET", 3600))}},
		"old": {Identity: 9, NewestTimeline: 1, Members: []string{}},
	}
	data := Encode(in)
	if !strings.Contains(string(data), `"10.0.0.3:5432": "2026-12-01T09:01:00.123456Z"`) {
		t.Errorf("encoded state lacks hosts_started in UTC:\n%s", data)
	}
	out, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	got := out["main"].Runs
	if len(got) != 2 || !got["10.0.0.1:5432"].Equal(run) || !got["10.0.0.3:5432"].Equal(run.Add(time.Minute)) {
		t.Errorf("main's runs: %v", got)
	}
	if out["old"].Runs != nil {
		t.Errorf("old's runs, none: %#v", out["old"].Runs)
	}
	if string(Encode(out)) != string(data) {
		t.Error("what was read back encodes otherwise")
	}
	before, err := Decode([]byte(`{"version": 2, "clusters": {"main": {"system_identifier": "5", "newest_timeline": 2, "hosts": ["10.0.0.1:5432"]}}}`))
	if err != nil || before["main"].Runs != nil || len(before["main"].Members) != 1 {
		t.Errorf("a file written before hosts_started: %#v, %v", before["main"], err)
	}
	for _, bad := range []string{`{"": "2026-12-01T09:00:00Z"}`, `{"10.0.0.1:5432": "0001-01-01T00:00:00Z"}`, `{"10.0.0.1:5432": "soon"}`} {
		if _, err := Decode([]byte(`{"version": 2, "clusters": {"main": {"system_identifier": "5", "hosts_started": ` + bad + `}}}`)); err == nil {
			t.Errorf("hosts_started %s was accepted", bad)
		}
	}
}
