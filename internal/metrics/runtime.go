package metrics

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// The Go runtime's families (go_*), as client_golang's Go collector wrote
// them (names, help, types and values), read at each scrape: the memory
// statistics from runtime.ReadMemStats, the collections' pauses from
// debug.ReadGCStats, three settings from runtime/metrics. Written here
// rather than by client_golang, whose registry, collectors and protobuf
// were about 3 MiB of pgdns's resident memory (issue 28).

// goMemStats are the go_memstats_* families: name, type, help, value.
var goMemStats = []struct {
	name, typ, help string
	value           func(*runtime.MemStats) float64
}{
	{"go_memstats_alloc_bytes", "gauge", "Number of bytes allocated in heap and currently in use. Equals to /memory/classes/heap/objects:bytes.", func(s *runtime.MemStats) float64 { return float64(s.Alloc) }},
	{"go_memstats_alloc_bytes_total", "counter", "Total number of bytes allocated in heap until now, even if released already. Equals to /gc/heap/allocs:bytes.", func(s *runtime.MemStats) float64 { return float64(s.TotalAlloc) }},
	{"go_memstats_buck_hash_sys_bytes", "gauge", "Number of bytes used by the profiling bucket hash table. Equals to /memory/classes/profiling/buckets:bytes.", func(s *runtime.MemStats) float64 { return float64(s.BuckHashSys) }},
	{"go_memstats_frees_total", "counter", "Total number of heap objects frees. Equals to /gc/heap/frees:objects + /gc/heap/tiny/allocs:objects.", func(s *runtime.MemStats) float64 { return float64(s.Frees) }},
	{"go_memstats_gc_sys_bytes", "gauge", "Number of bytes used for garbage collection system metadata. Equals to /memory/classes/metadata/other:bytes.", func(s *runtime.MemStats) float64 { return float64(s.GCSys) }},
	{"go_memstats_heap_alloc_bytes", "gauge", "Number of heap bytes allocated and currently in use, same as go_memstats_alloc_bytes. Equals to /memory/classes/heap/objects:bytes.", func(s *runtime.MemStats) float64 { return float64(s.HeapAlloc) }},
	{"go_memstats_heap_idle_bytes", "gauge", "Number of heap bytes waiting to be used. Equals to /memory/classes/heap/released:bytes + /memory/classes/heap/free:bytes.", func(s *runtime.MemStats) float64 { return float64(s.HeapIdle) }},
	{"go_memstats_heap_inuse_bytes", "gauge", "Number of heap bytes that are in use. Equals to /memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes", func(s *runtime.MemStats) float64 { return float64(s.HeapInuse) }},
	{"go_memstats_heap_objects", "gauge", "Number of currently allocated objects. Equals to /gc/heap/objects:objects.", func(s *runtime.MemStats) float64 { return float64(s.HeapObjects) }},
	{"go_memstats_heap_released_bytes", "gauge", "Number of heap bytes released to OS. Equals to /memory/classes/heap/released:bytes.", func(s *runtime.MemStats) float64 { return float64(s.HeapReleased) }},
	{"go_memstats_heap_sys_bytes", "gauge", "Number of heap bytes obtained from system. Equals to /memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes + /memory/classes/heap/released:bytes + /memory/classes/heap/free:bytes.", func(s *runtime.MemStats) float64 { return float64(s.HeapSys) }},
	{"go_memstats_mallocs_total", "counter", "Total number of heap objects allocated, both live and gc-ed. Semantically a counter version for go_memstats_heap_objects gauge. Equals to /gc/heap/allocs:objects + /gc/heap/tiny/allocs:objects.", func(s *runtime.MemStats) float64 { return float64(s.Mallocs) }},
	{"go_memstats_mcache_inuse_bytes", "gauge", "Number of bytes in use by mcache structures. Equals to /memory/classes/metadata/mcache/inuse:bytes.", func(s *runtime.MemStats) float64 { return float64(s.MCacheInuse) }},
	{"go_memstats_mcache_sys_bytes", "gauge", "Number of bytes used for mcache structures obtained from system. Equals to /memory/classes/metadata/mcache/inuse:bytes + /memory/classes/metadata/mcache/free:bytes.", func(s *runtime.MemStats) float64 { return float64(s.MCacheSys) }},
	{"go_memstats_mspan_inuse_bytes", "gauge", "Number of bytes in use by mspan structures. Equals to /memory/classes/metadata/mspan/inuse:bytes.", func(s *runtime.MemStats) float64 { return float64(s.MSpanInuse) }},
	{"go_memstats_mspan_sys_bytes", "gauge", "Number of bytes used for mspan structures obtained from system. Equals to /memory/classes/metadata/mspan/inuse:bytes + /memory/classes/metadata/mspan/free:bytes.", func(s *runtime.MemStats) float64 { return float64(s.MSpanSys) }},
	{"go_memstats_next_gc_bytes", "gauge", "Number of heap bytes when next garbage collection will take place. Equals to /gc/heap/goal:bytes.", func(s *runtime.MemStats) float64 { return float64(s.NextGC) }},
	{"go_memstats_other_sys_bytes", "gauge", "Number of bytes used for other system allocations. Equals to /memory/classes/other:bytes.", func(s *runtime.MemStats) float64 { return float64(s.OtherSys) }},
	{"go_memstats_stack_inuse_bytes", "gauge", "Number of bytes obtained from system for stack allocator in non-CGO environments. Equals to /memory/classes/heap/stacks:bytes.", func(s *runtime.MemStats) float64 { return float64(s.StackInuse) }},
	{"go_memstats_stack_sys_bytes", "gauge", "Number of bytes obtained from system for stack allocator. Equals to /memory/classes/heap/stacks:bytes + /memory/classes/os-stacks:bytes.", func(s *runtime.MemStats) float64 { return float64(s.StackSys) }},
	{"go_memstats_sys_bytes", "gauge", "Number of bytes obtained from system. Equals to /memory/classes/total:byte.", func(s *runtime.MemStats) float64 { return float64(s.Sys) }},
}

// goSettings are the runtime/metrics samples written as gauges.
var goSettings = []struct{ name, sample, help string }{
	{"go_gc_gogc_percent", "/gc/gogc:percent", "Heap size target percentage configured by the user, otherwise 100. This value is set by the GOGC environment variable, and the runtime/debug.SetGCPercent function. Sourced from /gc/gogc:percent."},
	{"go_gc_gomemlimit_bytes", "/gc/gomemlimit:bytes", "Go runtime memory limit configured by the user, otherwise math.MaxInt64. This value is set by the GOMEMLIMIT environment variable, and the runtime/debug.SetMemoryLimit function. Sourced from /gc/gomemlimit:bytes."},
	{"go_sched_gomaxprocs_threads", "/sched/gomaxprocs:threads", "The current runtime.GOMAXPROCS setting, or the number of operating system threads that can execute user-level Go code simultaneously. Sourced from /sched/gomaxprocs:threads."},
}

// gcQuantiles are go_gc_duration_seconds's quantile labels, in the order
// of debug.GCStats.PauseQuantiles of five.
var gcQuantiles = []string{"0", "0.25", "0.5", "0.75", "1"}

// writeGo writes the go_* families, sorted by name as client_golang did.
func writeGo(p *pageWriter) {
	stats := debug.GCStats{PauseQuantiles: make([]time.Duration, len(gcQuantiles))}
	debug.ReadGCStats(&stats)
	const gc = "go_gc_duration_seconds"
	p.family(gc, "summary", "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.")
	for i, q := range gcQuantiles {
		p.sample(gc, stats.PauseQuantiles[i].Seconds(), "quantile", q)
	}
	p.sample(gc+"_sum", stats.PauseTotal.Seconds())
	p.count(gc+"_count", uint64(stats.NumGC))

	samples := make([]metrics.Sample, len(goSettings))
	for i, s := range goSettings {
		samples[i].Name = s.sample
	}
	metrics.Read(samples)
	setting := func(i int) {
		p.family(goSettings[i].name, "gauge", goSettings[i].help)
		p.sample(goSettings[i].name, sampleValue(samples[i].Value))
	}
	setting(0) // go_gc_gogc_percent
	setting(1) // go_gc_gomemlimit_bytes

	p.family("go_goroutines", "gauge", "Number of goroutines that currently exist.")
	p.sample("go_goroutines", float64(runtime.NumGoroutine()))
	p.family("go_info", "gauge", "Information about the Go environment.")
	p.sample("go_info", 1, "version", runtime.Version())

	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	for _, f := range goMemStats {
		if f.name == "go_memstats_mallocs_total" { // the last GC's time sorts before it
			p.family("go_memstats_last_gc_time_seconds", "gauge", "Number of seconds since 1970 of last garbage collection.")
			p.sample("go_memstats_last_gc_time_seconds", float64(stats.LastGC.UnixNano())/1e9)
		}
		p.family(f.name, f.typ, f.help)
		p.sample(f.name, f.value(&ms))
	}

	setting(2) // go_sched_gomaxprocs_threads
	threads, _ := runtime.ThreadCreateProfile(nil)
	p.family("go_threads", "gauge", "Number of OS threads created.")
	p.sample("go_threads", float64(threads))
}

// sampleValue is a runtime/metrics scalar as a float.
func sampleValue(v metrics.Value) float64 {
	switch v.Kind() {
	case metrics.KindUint64:
		return float64(v.Uint64())
	case metrics.KindFloat64:
		return v.Float64()
	}
	return math.NaN()
}
