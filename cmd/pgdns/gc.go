package main

import "runtime/debug"

// defaultGOGC is the collector's GOGC when the environment sets none.
// At the Go runtime's 100 the heap grows to twice what is live (and the
// goroutines' stacks) before each collection, and that room was the
// largest part of pgdns's memory probing a fleet: at 50 it is half as
// large, for collections twice as often. Measured by the scale bench
// (BENCHMARKS.md, "Memory at fleet size"): about 8 MiB less at 1,000
// hosts, for a collector's share of pgdns's CPU up from about 6% to 8–12%.
const defaultGOGC = 50

// tuneGC sets the collector's target to defaultGOGC unless GOGC is set
// in the environment: then the Go runtime has read it already, and the
// operator's value (off included) stands. GOMEMLIMIT works as always.
func tuneGC(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGOGC)
	}
}
