package main

import (
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/events"
)

// TestEventsAfterAFailure: what `pgdns events -follow` prints once pgdns
// answers again, from all it holds and the newest event printed before.
func TestEventsAfterAFailure(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC)
	ev := func(i uint64, at time.Time) events.Event { return events.Event{Index: i, Time: at, Reason: "host_up"} }
	run1 := []events.Event{ev(1, t0), ev(2, t0), ev(3, t0.Add(time.Second))}
	run2 := []events.Event{ev(1, t0.Add(time.Minute)), ev(2, t0.Add(time.Minute)), ev(3, t0.Add(2*time.Minute))}
	for _, c := range []struct {
		name      string
		page      eventsPage
		index     uint64
		last      events.Event
		want      uint64 // index of the first event printed, 0 none
		n         int
		restarted bool
	}{
		{"the same run, one event newer", eventsPage{Index: 3, Events: run1}, 2, run1[1], 3, 1, false},
		{"the same run, nothing newer", eventsPage{Index: 3, Events: run1}, 3, run1[2], 0, 0, false},
		{"restarted, same index, another event", eventsPage{Index: 3, Events: run2}, 3, run1[2], 1, 3, true},
		{"restarted, index below ours", eventsPage{Index: 2, Events: run2[:2]}, 3, run1[2], 1, 2, true},
		{"ours no longer held", eventsPage{Index: 3, Events: run1[2:]}, 1, run1[0], 3, 1, false},
		{"nothing seen before", eventsPage{Index: 3, Events: run1}, 0, events.Event{}, 1, 3, false},
	} {
		got, restarted := after(c.page, c.index, c.last)
		first := uint64(0)
		if len(got) > 0 {
			first = got[0].Index
		}
		if len(got) != c.n || first != c.want || restarted != c.restarted {
			t.Errorf("%s: %d events from #%d, restarted %v; want %d from #%d, restarted %v", c.name, len(got), first, restarted, c.n, c.want, c.restarted)
		}
	}
}
