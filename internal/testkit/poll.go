package testkit

import (
	"testing"
	"time"
)

// Poll calls cond every interval until it returns true or within has
// passed since the first call, and reports whether it did. cond is always
// called at least once, and once more after the deadline has passed, so
// a condition that became true during the last sleep is not missed. It is
// the one polling loop of the tests: use Eventually when a timeout fails
// the test.
func Poll(within, every time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(every)
	}
}

// Eventually polls observe every interval until it reports done, and
// returns the value it saw then. If within passes first, it fails t with
// what it waited for and the last value observe returned, so a timeout
// says what the test saw rather than only that it gave up.
func Eventually[T any](t testing.TB, within, every time.Duration, what string, observe func() (T, bool)) T {
	t.Helper()
	var last T
	if Poll(within, every, func() bool {
		var done bool
		last, done = observe()
		return done
	}) {
		return last
	}
	t.Fatalf("%s: not within %v; last observed: %+v", what, within, last)
	return last
}

// Holds is Poll's mirror, for what must stay true for a while rather than
// become true: it calls check every interval until d has passed, stops at
// the first check that fails, and returns how many passed and whether all
// did.
func Holds(d, every time.Duration, check func() bool) (passed int, ok bool) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !check() {
			return passed, false
		}
		passed++
		time.Sleep(every)
	}
	return passed, true
}
