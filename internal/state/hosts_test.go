package state

import (
	"slices"
	"testing"

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
