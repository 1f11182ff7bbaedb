package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// scaleHeading starts the scale section of BENCHMARKS.md.
const scaleHeading = "## Scale"

// cpuTarget is pgdns's bound for 1,000 hosts probed every 250 ms, in
// percent of one core, and rssTarget its bound on their resident set, in
// KiB.
const (
	cpuTarget = 25.0
	rssTarget = 64 * 1024
)

func (s *scaleResult) markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	hosts := s.realHosts + s.fakes
	w("%s\n\n%s\n\n", scaleHeading, s.stamp)
	w("| hosts | RSS | target |\n|---|---:|---|\n")
	w("| 3 (real), serving and probing, before any load | %.1f MiB | ≤ 20 MiB: %s |\n", float64(s.rss3Idle)/1024, verdict(s.rss3Idle <= 20*1024))
	if s.rss3 > 0 {
		w("| 3 (real), right after the load steps above | %.1f MiB | |\n", float64(s.rss3)/1024)
	}
	w("| %d (%d real + %d fake), probing | %.1f MiB | ≤ 64 MiB: %s |\n\n", hosts, s.realHosts, s.fakes, float64(s.rss1000)/1024, verdict(s.rss1000 <= rssTarget))
	if s.rss3 > 0 {
		w("After a burst of tens of thousands of queries a second the Go runtime keeps goroutine stacks and heap it grew for a while before returning them to the system; the resting footprint is the first line.\n\n")
	}
	w("The %d fakes are one process serving just enough of the PostgreSQL wire protocol (`pgproto3`: startup, then the probe's statement, prepared or plain) on addresses of the run's block, each answering with the row description and the row a real replica of the cluster gave it (its own start time and application name), so the probe cannot tell them from that replica. It was ready (every host probed, %d replicas answered) %v after start. Answer latency at that size, at 5,000 queries/s over UDP (`primary` and `lag-50ms.replica`, the latter truncated with TC): p50 %s, p99 %s.\n\n",
		s.fakes, s.realHosts-1+s.fakes, s.readyIn.Round(time.Millisecond), ms(s.p50), ms(s.p99))

	per := slices.Clone(s.cpuPerProbe)
	slices.Sort(per)
	var each []string
	for _, d := range s.cpuPerProbe {
		each = append(each, fmt.Sprintf("%.1f", float64(d.Nanoseconds())/1000))
	}
	w("**CPU.** %d hosts probed every %s: %.0f probes/s done. pgdns's own CPU time (user + system, from `/proc/PID/stat`; the fakes run in another process) over the probes it finished, in %d windows of %v: **%.1f µs per probe** (median; windows: %s µs), %.1f%% of one core — target ≤ %.0f%%: %s. CPU per probe is the figure to compare across runs: load from other processes on the machine slows probes and pgdns alike, while the share of a core follows how many probes got done. Go heap in use %.1f MiB, %.0f goroutines.\n\n",
		hosts, s.interval, s.probesPerSec, s.windows, s.window, float64(per[len(per)/2].Nanoseconds())/1000, strings.Join(each, ", "),
		s.cpuTotal, cpuTarget, verdict(s.cpuTotal <= cpuTarget), s.heapInuse/(1<<20), s.goroutines)
	if s.fakeCPU > 0 {
		w("The fakes' own process used %.1f%% of one core over those windows (not counted above).\n\n", s.fakeCPU)
	}
	if s.cpuTop != "" {
		w("Profiles of this run (`PPROF=dir`: pgdns's `/debug/pprof/` on its loopback HTTP listener, 8 s of CPU, then the heap), top entries by flat share:\n\n```\n%s```\n\n```\n%s```\n\n", trimTop(s.cpuTop), trimTop(s.heapTop))
	}
	return b.String()
}

// trimTop keeps pprof -top's totals line and its table, without the
// header lines that name the binary and the file.
func trimTop(top string) string {
	var keep []string
	for _, l := range strings.Split(top, "\n") {
		if strings.HasPrefix(l, "File:") || strings.HasPrefix(l, "Build ID:") || strings.HasPrefix(l, "Type:") ||
			strings.HasPrefix(l, "Time:") || strings.HasPrefix(l, "Duration:") || strings.HasPrefix(l, "Showing top") {
			continue
		}
		if strings.TrimSpace(l) != "" {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n") + "\n"
}
