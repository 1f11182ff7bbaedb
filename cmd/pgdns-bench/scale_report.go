package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// scaleHeading starts the scale section of BENCHMARKS.md.
const scaleHeading = "## Scale"

// scaleTarget is pgdns's bound at one size of the series; a zero field
// has none.
type scaleTarget struct {
	hosts    int
	interval time.Duration
	perProbe time.Duration // CPU time per probe
	share    float64       // percent of one core
	rssKiB   int64
}

// scaleTargets: 1,000 hosts probed every 250 ms, 10,000 every second.
var scaleTargets = []scaleTarget{
	{hosts: 1000, interval: 250 * time.Millisecond, perProbe: 37 * time.Microsecond, share: 15, rssKiB: 48 * 1024},
	{hosts: 10000, interval: time.Second, share: 50, rssKiB: 256 * 1024},
}

// idleRSSTarget bounds pgdns's resident set with the 3 real hosts at
// rest, in KiB; rateTolerance how far the interval's probes may be from
// the configured rate at a size with targets.
const (
	idleRSSTarget = 20 * 1024
	rateTolerance = 0.02
)

// targetFor is the target of a point, if it has one.
func targetFor(p scalePoint) (scaleTarget, bool) {
	for _, t := range scaleTargets {
		if t.hosts == p.hosts && t.interval == p.interval {
			return t, true
		}
	}
	return scaleTarget{}, false
}

// intervalRate is the probes per second done on the interval's clock:
// pgdns_probes_total's tick and round (docs/probe.md: together about
// hosts / probe.interval), or, from a pgdns without that metric, all
// probes done but flux's.
func (p scalePoint) intervalRate() float64 {
	if p.why != nil {
		return p.why["tick"] + p.why["round"]
	}
	return p.probesPerSec - p.fluxPerSec
}

// whyOrder is the order pgdns_probes_total's reasons are shown in: the
// interval's, then the others.
var whyOrder = []string{"tick", "round", "closing", "tick_driven", "flux", "refresh"}

// whyCell is a point's probes/s by why, "tick 10, round 3950, …", or
// flux's alone from a pgdns without pgdns_probes_total.
func (p scalePoint) whyCell() string {
	if p.metricsErr != "" {
		return "not read"
	}
	if p.why == nil {
		return fmt.Sprintf("flux %.0f", p.fluxPerSec)
	}
	var each []string
	for _, w := range whyOrder {
		each = append(each, fmt.Sprintf("%s %.0f", w, p.why[w]))
	}
	for w, v := range p.why {
		if !slices.Contains(whyOrder, w) {
			each = append(each, fmt.Sprintf("%s %.0f", w, v))
		}
	}
	slices.Sort(each[len(whyOrder):])
	return strings.Join(each, ", ")
}

func mib(kib int64) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }

func us(d time.Duration) string { return fmt.Sprintf("%.1f µs", float64(d.Nanoseconds())/1000) }

// thousands writes n with a comma every three digits: 10000 → "10,000".
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func (s *scaleResult) markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("%s\n\n%s\n\n", scaleHeading, s.stamp)
	var sizes []string
	for _, p := range s.points {
		sizes = append(sizes, fmt.Sprintf("%s hosts every %v", thousands(p.hosts), p.interval))
	}
	w("pgdns probing fleets of each size (%s): the %d real servers as cluster `main` and, for the rest, a fleet of small fake clusters beside it (%s): each cluster a fake primary, answering the probe with the row the real primary gave (its own system identifier, start time, and `pg_stat_replication` rows naming its own two replicas), and two fake replicas answering with the row a real replica gave (that system identifier, their own start time and application name, their WAL receiver streaming from their fake primary's address and port, replayed up to its insert LSN: lag 0), a fake left over joining the last cluster as a replica; before measuring, `/v1/hosts` must show every fake cluster's primary and replicas live and answered, or the run stops. The fakes are processes of up to %s each (`pgdns-bench fakepg`; two descriptors a fake keep a process under 20,000 open files) serving just enough of the PostgreSQL wire protocol (`pgproto3`: startup, then the probe's statements, prepared or plain) on addresses of the run's block from the allocator (`pgtest.Block.Fleet`), each answering with the row description and the row a real server of the cluster gave it, rewritten as above, so the probe cannot tell them from a real cluster. Each size has a pgdns and fakes' processes of its own, started for it and stopped after it: pgdns is restarted per size, not reloaded, so that each size's memory is its own and not the largest before it. Once every host is live (`/v1/hosts`), and %v later (the first read of `/metrics` below, then time for its garbage and a flux episode of the start), %d windows of %v: pgdns's CPU time (time on a CPU, user and system, the sum of its threads' `/proc/PID/task/*/schedstat`, in ns), its heap allocations (the Go runtime's `Mallocs`, read from `/debug/pprof/allocs?debug=1` before and after, less what one read costs), and the probes it did, counted where they are answered: the probe statements the fakes' processes ran between the windows' edges, times hosts/fakes for the 3 real hosts, probed as often (pgdns's `/metrics` is read before and after the windows, outside them, for `pgdns_probes_total`, the probes by why they were made: `tick` and `round` are the interval's, about hosts / `probe.interval` together, `closing` the primary's probe closing each round, `tick_driven`, `flux` and `refresh` others beyond it; and as a cross-check). RSS from `/proc/PID/status`, Go heap in use (`HeapInuse`) and goroutines from `/debug/pprof/`, at the end. Nothing else asks that pgdns anything during the windows. CPU per probe is the figure to compare across runs: load from other processes slows probes and pgdns alike, while the share of a core follows how many probes got done.\n\n",
		strings.Join(sizes, ", "), s.realHosts, s.fleetShape(), thousands(fakesPerProc), scaleSettle, s.windows, s.window)
	w("| hosts | probes/s done (configured) | by why (`pgdns_probes_total`, per second) | CPU per probe | share of a core (windows) | RSS | Go heap in use | goroutines | allocations per probe | the fakes' processes: CPU, RSS | ready in | answers p50 / p99 |\n")
	w("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range s.points {
		var each []string
		for _, sh := range p.shares {
			each = append(each, fmt.Sprintf("%.1f", sh))
		}
		ready := p.readyIn.Round(100 * time.Millisecond).String()
		if p.notReady != "" {
			ready = "**not all**: " + p.notReady
		}
		if p.liveAfter < p.hosts {
			ready += fmt.Sprintf("; %s live after the windows", thousands(p.liveAfter))
		}
		procs := ""
		if p.fakeProcs > 1 {
			procs = fmt.Sprintf(" (%d processes)", p.fakeProcs)
		}
		w("| %s every %v | %.0f (%.0f) | %s | %s | %.1f%% (%s) | %s | %.1f MiB | %.0f | %.1f | %.1f%%, %s%s | %s | %s / %s |\n",
			thousands(p.hosts), p.interval, p.probesPerSec, p.configured(), p.whyCell(), us(p.perProbe()), p.share(), strings.Join(each, ", "),
			mib(p.rss), p.heapInuse/(1<<20), p.goroutines, p.allocsPerProbe(), p.fakeShare(), mib(p.fakeRSS), procs, ready, ms(p.p50), ms(p.p99))
	}
	var ticks []string
	for _, p := range s.points {
		if p.probes() > 0 {
			ticks = append(ticks, us(time.Duration(float64(p.cpuTicks)/p.probes())))
		}
	}
	w("\n`/proc/PID/stat`'s user and system clock ticks (10 ms each, threads that exited included) over the same windows give %s per probe. %s\n\n", strings.Join(ticks, ", "), s.metricsLine())
	if s.plot != "" {
		w("![pgdns's CPU time per probe and its resident set against the hosts it probes](%s)\n\n", s.plot)
	}
	w("%s\n", s.targetsTable())
	if d := s.dns; d != nil && len(d.small) > 0 && len(d.large) > 0 {
		w("**Answering while probing %s hosts.** dnsperf as in the DNS section (1 thread, 4 clients, 200 queries outstanding, %v a run) on its query mix (`primary`, `replica`, `lag-50ms.replica`, `bytes-1mb.replica`, `lsn-….replica`), against the pgdns of %s hosts (every %v) and the pgdns of the 3 real hosts (every 250ms), in turns, %s each, both running throughout (so both share the cores with the large one's probing). %s\n\n",
			thousands(d.hosts), d.duration, thousands(d.hosts), d.interval, count(len(d.small), "round"), d.answersLine())
		w("| pgdns | queries/s (rounds) |\n|---|---:|\n")
		w("| 3 hosts | %.0f (%s) |\n", median(d.small), joinFloats(d.small))
		w("| %s hosts | %.0f (%s) |\n\n", thousands(d.hosts), median(d.large), joinFloats(d.large))
		w("The %s hosts' pgdns did %.0f probes/s of the %.0f configured meanwhile; %s hosts answer %.2f× the queries/s of 3.\n\n", thousands(d.hosts), d.probesPerSec, d.configuredPer, thousands(d.hosts), median(d.large)/median(d.small))
	}
	if s.rss3 > 0 {
		w("After a burst of tens of thousands of queries a second the Go runtime keeps goroutine stacks and heap it grew for a while before returning them to the system: the 3 real hosts' pgdns was at %s right after the load steps above, %s at rest before them.\n\n", mib(s.rss3), mib(s.rss3Idle))
	}
	if s.cpuTop != "" {
		w("Profiles of this run at %s hosts (`PPROF=dir`: pgdns's `/debug/pprof/` on its loopback HTTP listener, 8 s of CPU, then the heap), top entries by flat share:\n\n```\n%s```\n\n```\n%s```\n\n", thousands(s.pprofHosts), trimTop(s.cpuTop), trimTop(s.heapTop))
	}
	return b.String()
}

// answersLine says what the large pgdns answered each name of the mix,
// as askMix read it: the names are those of the default cluster, `main`
// (the 3 real servers), whichever the fleet's size.
func (d *scaleDNS) answersLine() string {
	if len(d.answers) == 0 {
		return ""
	}
	var each []string
	truncated := 0
	for _, a := range d.answers {
		name := strings.TrimSuffix(a.name, ".db.local")
		if strings.HasPrefix(name, "lsn-") {
			name = "lsn-….replica"
		}
		cell := fmt.Sprintf("`%s` %s", name, count(a.records, "record"))
		if a.rcode != "NOERROR" {
			cell += " (" + a.rcode + ")"
		}
		if a.truncated {
			cell += " (truncated, TC)"
			truncated++
		}
		each = append(each, cell)
	}
	tc := "none truncated"
	switch {
	case truncated == len(d.answers):
		tc = "all truncated (TC)"
	case truncated > 0:
		tc = fmt.Sprintf("%d of %d truncated (TC)", truncated, len(d.answers))
	}
	return fmt.Sprintf("The names are the default cluster's, `main` (the 3 real servers), whatever the fleet's size; the large one answered them, asked once each over UDP before the rounds: %s; %s.", strings.Join(each, ", "), tc)
}

// metricsLine is what /metrics said at each size, and what its page
// cost to read.
func (s *scaleResult) metricsLine() string {
	var each []string
	for _, p := range s.points {
		if p.metricsErr != "" {
			each = append(each, fmt.Sprintf("%s hosts: not read (%s; the last try got %.1f MiB in %.1f s)", thousands(p.hosts), p.metricsErr, float64(p.page)/(1<<20), p.pageTook.Seconds()))
			continue
		}
		each = append(each, fmt.Sprintf("%s hosts: %.0f probes/s, a page of %.1f MiB read in %.2f s", thousands(p.hosts), p.metricsPerSec, float64(p.page)/(1<<20), p.pageTook.Seconds()))
	}
	return "pgdns's `/metrics` (`pgdns_probe_duration_seconds_count`, between the middles of its reads around the windows): " + strings.Join(each, "; ") + "."
}

// targetsTable is each target of the series against its figure.
func (s *scaleResult) targetsTable() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("| hosts | figure | measured | target | |\n|---|---|---:|---:|---|\n")
	w("| 3 (real), serving and probing, at rest before any load | RSS | %.2f MiB | ≤ %s | %s |\n", float64(s.rss3Idle)/1024, mib(idleRSSTarget), verdict(s.rss3Idle <= idleRSSTarget))
	for _, p := range s.points {
		t, ok := targetFor(p)
		if !ok {
			continue
		}
		h := fmt.Sprintf("%s every %v", thousands(p.hosts), p.interval)
		if t.perProbe > 0 {
			w("| %s | CPU per probe | %s | ≤ %s | %s |\n", h, us(p.perProbe()), us(t.perProbe), verdict(p.perProbe() <= t.perProbe))
		}
		if t.share > 0 {
			w("| %s | share of a core | %.1f%% | ≤ %.0f%% | %s |\n", h, p.share(), t.share, verdict(p.share() <= t.share))
		}
		if t.rssKiB > 0 {
			w("| %s | RSS | %.2f MiB | ≤ %s | %s |\n", h, float64(p.rss)/1024, mib(t.rssKiB), verdict(p.rss <= t.rssKiB))
		}
		kept := p.intervalRate() / p.configured()
		what := "probes/s on the interval (tick + round)"
		switch {
		case p.metricsErr != "":
			what = "probes/s done (/metrics not read)"
		case p.why == nil:
			what = "probes/s on the interval (done less flux)"
		}
		w("| %s | %s | %.0f (%.1f%% of %.0f) | within %.0f%% | %s |\n", h, what, p.intervalRate(), kept*100, p.configured(), rateTolerance*100, verdict(math.Abs(kept-1) <= rateTolerance+1e-9)) // 98.0% is within 2%
	}
	return b.String()
}

func joinFloats(v []float64) string {
	var s []string
	for _, f := range v {
		s = append(s, fmt.Sprintf("%.0f", f))
	}
	return strings.Join(s, ", ")
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

// fleetShape is the fake clusters of each size: "100 hosts: 32 clusters
// of 3 and one of 4, ...".
func (s *scaleResult) fleetShape() string {
	var each []string
	for _, p := range s.points {
		cs := fakeClusters(p.fakes)
		if len(cs) == 0 {
			continue
		}
		var sizes []int
		for _, c := range cs {
			sizes = append(sizes, len(c))
		}
		shape := fmt.Sprintf("%s of %d", count(len(cs), "cluster"), fakeClusterSize)
		if last := sizes[len(sizes)-1]; last != fakeClusterSize {
			shape = fmt.Sprintf("%s of %d and one of %d", count(len(cs)-1, "cluster"), fakeClusterSize, last)
		}
		each = append(each, fmt.Sprintf("%s hosts: %s", thousands(p.hosts), shape))
	}
	return strings.Join(each, "; ")
}
