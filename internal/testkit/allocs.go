package testkit

import "testing"

// AllocTrials is how many times FewestAllocs measures.
const AllocTrials = 5

// FewestAllocs is testing.AllocsPerRun(runs, f) measured up to AllocTrials
// times, the fewest seen; it stops early at a trial of at most stop.
// AllocsPerRun counts every goroutine's mallocs, not f's alone: whatever
// else runs in the test process (another test's cluster log readers,
// timers, a prober winding down) adds to a trial, never takes away, and
// on a loaded machine it added tens per run to a figure of 4 (seen at load
// 13). The fewest of several trials is still at least f's own count, so a
// bound on it holds f to the bound: f allocating more fails every trial.
func FewestAllocs(runs int, stop float64, f func()) float64 {
	fewest := -1.0
	for range AllocTrials {
		n := testing.AllocsPerRun(runs, f)
		if fewest < 0 || n < fewest {
			fewest = n
		}
		if fewest <= stop {
			break
		}
	}
	return fewest
}
