package main

import (
	"testing"

	"github.com/pgdns/pgdns/internal/events"
)

// TestEventsAfterAFailure: how `pgdns events -follow` tells, from pgdns's
// answer to ?index=N, whether it comes from the run N came from (review 2,
// R3: indexes of a later run are above every index of an earlier one).
func TestEventsAfterAFailure(t *testing.T) {
	run := func(base uint64, n int) []events.Event {
		var evs []events.Event
		for i := 1; i <= n; i++ {
			evs = append(evs, events.Event{Index: base + uint64(i), Reason: "host_up"})
		}
		return evs
	}
	const old, later = 1_796_000_000_000_000, 1_796_000_060_000_000
	run1, run2 := run(old, 3), run(later, 3)
	for _, c := range []struct {
		name  string
		page  eventsPage
		index uint64
		want  bool
	}{
		{"the same run, one event newer", eventsPage{Index: old + 3, Events: run1[2:]}, old + 2, false},
		{"the same run, nothing newer", eventsPage{Index: old + 3}, old + 3, false},
		{"the same run, ours no longer held", eventsPage{Index: old + 3, Events: run1[2:], Missed: 1}, old + 1, false},
		{"restarted: the new run's events from its first", eventsPage{Index: later + 3, Events: run2}, old + 3, true},
		{"restarted, the new run dropped some", eventsPage{Index: later + 3, Events: run2[1:], Missed: 1}, old + 3, true},
		{"restarted, no event yet", eventsPage{Index: later}, old + 3, true},
		{"a clock set back", eventsPage{Index: old - 5}, old + 3, true},
		{"nothing seen before", eventsPage{Index: old + 3, Events: run1}, 0, false},
	} {
		if got := anotherRun(c.page, c.index); got != c.want {
			t.Errorf("%s: another run %v, want %v", c.name, got, c.want)
		}
	}
}
