package events

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/testkit"
)

func indexes(evs []Event) []uint64 {
	var out []uint64
	for _, e := range evs {
		out = append(out, e.Index)
	}
	return out
}

func TestAppendNumbersAndStamps(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	l := newLog(10, 0, func() time.Time { return at }, 0)
	given := at.Add(-time.Hour)
	if n := l.Append(Event{Reason: "host_down", Host: "a"}, Event{Reason: "host_up", Host: "a", Time: given}); n != 2 {
		t.Fatalf("Append returned %d, want 2", n)
	}
	evs, newest, missed := l.Since(0)
	if newest != 2 || missed != 0 || fmt.Sprint(indexes(evs)) != "[1 2]" {
		t.Fatalf("Since(0) = %v, %d, %d", indexes(evs), newest, missed)
	}
	if !evs[0].Time.Equal(at) || !evs[1].Time.Equal(given) {
		t.Errorf("times %v %v: want the Log's clock for a zero Time, the given one otherwise", evs[0].Time, evs[1].Time)
	}
	if l.Append() != 2 {
		t.Error("an empty Append changed the newest index")
	}
}

func TestRingKeepsTheLastCapacity(t *testing.T) {
	l := newLog(3, 0, time.Now, 0)
	for i := 0; i < 7; i++ {
		l.Append(Event{Reason: "x"})
	}
	cases := []struct {
		after  uint64
		want   string
		missed uint64
	}{
		{0, "[5 6 7]", 4},
		{3, "[5 6 7]", 1},
		{4, "[5 6 7]", 0},
		{5, "[6 7]", 0},
		{7, "[]", 0},
		{8, "[5 6 7]", 4}, // above the newest: the client starts over
		{1 << 60, "[5 6 7]", 4},
	}
	for _, c := range cases {
		evs, newest, missed := l.Since(c.after)
		if got := fmt.Sprint(indexes(evs)); got != c.want || newest != 7 || missed != c.missed {
			t.Errorf("Since(%d) = %s, newest %d, missed %d; want %s, 7, %d", c.after, got, newest, missed, c.want, c.missed)
		}
	}
	if len(New(0).ring) != 0 || cap(New(0).ring) != Capacity {
		t.Errorf("New holds %d events, want %d", cap(New(0).ring), Capacity)
	}
}

func TestWaitAnswersAtOnceWhenNewerIsHeld(t *testing.T) {
	l := newLog(Capacity, 0, time.Now, 0)
	l.Append(Event{Reason: "a"}, Event{Reason: "b"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // must not matter: there is something to answer
	evs, newest, _, err := l.Wait(ctx, 1)
	if err != nil || newest != 2 || fmt.Sprint(indexes(evs)) != "[2]" {
		t.Fatalf("Wait(1) = %v, %d, %v", indexes(evs), newest, err)
	}
}

func TestWaitWakesOnAppend(t *testing.T) {
	l := newLog(Capacity, 0, time.Now, 0)
	l.Append(Event{Reason: "a"})
	got := make(chan []Event, 1)
	go func() {
		evs, _, _, err := l.Wait(context.Background(), 1)
		if err != nil {
			t.Errorf("Wait: %v", err)
		}
		got <- evs
	}()
	testkit.Eventually(t, 5*time.Second, time.Millisecond, "the waiter blocked", func() (int, bool) { return l.Waiters(), l.Waiters() == 1 })
	l.Append(Event{Reason: "b"})
	select {
	case evs := <-got:
		if fmt.Sprint(indexes(evs)) != "[2]" {
			t.Fatalf("woken with %v, want [2]", indexes(evs))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Append did not wake the waiter")
	}
	if l.Waiters() != 0 {
		t.Errorf("%d waiters left", l.Waiters())
	}
}

func TestWaitEndsWithItsContext(t *testing.T) {
	l := newLog(Capacity, 0, time.Now, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	evs, newest, _, err := l.Wait(ctx, 0)
	if !errors.Is(err, context.DeadlineExceeded) || len(evs) != 0 || newest != 0 {
		t.Fatalf("Wait = %v, %d, %v; want nothing and the deadline", evs, newest, err)
	}
	if l.Waiters() != 0 {
		t.Errorf("%d waiters left", l.Waiters())
	}
}

// TestWaitersAreCappedAndCloseEndsThem: past maxWaiters, Wait refuses at
// once; Close ends every wait, and no goroutine is left behind.
func TestWaitersAreCappedAndCloseEndsThem(t *testing.T) {
	before := runtime.NumGoroutine()
	const max = 50
	l := newLog(10, max, time.Now, 0)
	var wg sync.WaitGroup
	errs := make(chan error, 2000)
	for i := 0; i < 2000; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, _, err := l.Wait(context.Background(), 0)
			errs <- err
		}()
	}
	// Every call past the cap returns at once; the cap's worth blocks.
	refused := 0
	for refused < 2000-max {
		select {
		case err := <-errs:
			if !errors.Is(err, ErrTooManyWaiters) {
				t.Fatalf("a call returned %v before Close, want ErrTooManyWaiters", err)
			}
			refused++
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d calls refused, want %d", refused, 2000-max)
		}
	}
	if n := l.Waiters(); n != max {
		t.Fatalf("%d waiters, want %d", n, max)
	}
	l.Close()
	wg.Wait()
	for i := 0; i < max; i++ {
		if err := <-errs; !errors.Is(err, ErrClosed) {
			t.Fatalf("a waiter ended with %v, want ErrClosed", err)
		}
	}
	if _, _, _, err := l.Wait(context.Background(), 0); !errors.Is(err, ErrClosed) {
		t.Errorf("Wait after Close = %v, want ErrClosed at once", err)
	}
	l.Close() // twice: nothing
	if n := l.Append(Event{Reason: "late"}); n != 1 {
		t.Errorf("Append after Close = %d, want 1", n)
	}
	testkit.Eventually(t, 5*time.Second, 10*time.Millisecond, "goroutines back to where they were", func() (int, bool) {
		n := runtime.NumGoroutine()
		return n, n <= before
	})
}

// A client resuming across a pgdns restart (review 2, R3): the old run's
// index is below every index of the new run, so it gets every event the
// new run holds, and missed counts those it no longer holds. Before, both
// runs numbered from 1, and an old index 2 skipped the new run's first two
// events once it had logged more than two.
func TestIndexesGrowAcrossRestarts(t *testing.T) {
	first := New(0)
	first.Append(Event{Reason: "identity_settled"}, Event{Reason: "host_up"})
	_, old, _ := first.Since(0)
	if old <= uint64(time.Now().Add(-time.Hour).UnixMicro()) {
		t.Fatalf("the first run's newest index %d is not past its start time in microseconds", old)
	}
	time.Sleep(time.Millisecond) // the restart
	second := New(0)
	if _, newest, _ := second.Since(old); newest <= old {
		t.Fatalf("a later run starts at %d, not above the earlier run's %d", newest, old)
	}
	second.Append(Event{Reason: "identity_settled"}, Event{Reason: "host_down"}, Event{Reason: "primary_appeared"}, Event{Reason: "host_up"})
	evs, newest, missed := second.Since(old)
	if len(evs) != 4 || evs[0].Reason != "identity_settled" || evs[2].Reason != "primary_appeared" || missed != 0 || newest <= old {
		t.Fatalf("Since(the old run's %d) = %v, newest %d, missed %d; want the new run's 4 events", old, evs, newest, missed)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if evs, _, _, err := second.Wait(ctx, old); err != nil || len(evs) != 4 {
		t.Fatalf("Wait(the old run's %d) = %v, %v; want the new run's 4 events at once", old, evs, err)
	}
	// A run that dropped its oldest events says how many of its own.
	small := newLog(2, 0, time.Now, 1000)
	small.Append(Event{Reason: "a"}, Event{Reason: "b"}, Event{Reason: "c"})
	if evs, newest, missed := small.Since(5); len(evs) != 2 || evs[0].Index != 1002 || newest != 1003 || missed != 1 {
		t.Fatalf("Since(an earlier run's 5) = %v, newest %d, missed %d; want 1002 1003, missed 1", indexes(evs), newest, missed)
	}
	// An empty run waits rather than answering an old index at once.
	empty := New(0)
	wctx, wcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer wcancel()
	if evs, newest, _, err := empty.Wait(wctx, old); !errors.Is(err, context.DeadlineExceeded) || len(evs) != 0 || newest <= old {
		t.Fatalf("Wait on an empty run = %v, %d, %v; want nothing, the deadline, and the run's base", evs, newest, err)
	}
}
