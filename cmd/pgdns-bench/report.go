package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// report collects every step's figures and renders them.
type report struct {
	machine     string
	stamp       stamp // the whole run's (its Go benchmarks' too)
	dnsStamp    stamp
	httpStamp   stamp
	dns         []*perf
	dnsRounds   int
	dnsDuration time.Duration
	ryow        *ryowResult
	http        []httpResult
	failover    *failoverResult
	scale       *scaleResult
	dbCost      *dbCostResult
	hostile     *hostileResult
	goBench     string
}

// count is n with noun, plural when n is not 1: "3 rounds", "1 round".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

// dnsHeading starts the DNS section of BENCHMARKS.md.
const dnsHeading = "## DNS throughput and latency"

// dnsMarkdown is the DNS section: pgdns, CoreDNS, the miekg/dns floor
// and the UDP echo ceiling, with each round's figures so that the spread
// shows, and the ratios pgdns's answering targets are stated in.
func (r *report) dnsMarkdown() string {
	if len(r.dns) != 4 {
		return ""
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	pg, cd, fl, echo := r.dns[0], r.dns[1], r.dns[2], r.dns[3]
	w("%s\n\n%s\n\n", dnsHeading, r.dnsStamp)
	w("dnsperf (1 thread, 4 clients, 200 queries outstanding, %v per run) with the query mix `primary`, `replica`, `lag-50ms.replica`, `bytes-1mb.replica`, `lsn-….replica` under `db.local`; %s interleaved, medians shown, each round's queries/s in brackets. Latency is per query at a steady 5,000 queries/s (`dnsperf -v -Q 5000`). pgdns is probing a real primary and two streaming replicas every 250 ms while it answers. The ceiling is a plain UDP echo (one goroutine: read a datagram, set QR, write it back; no DNS work): what the socket and dnsperf allow on these cores.\n\n",
		r.dnsDuration, count(r.dnsRounds, "round"))
	w("| server | queries/s | rounds | p50 | p99 |\n|---|---:|---|---:|---:|\n")
	for _, p := range r.dns {
		var rounds []string
		for _, q := range p.qps {
			rounds = append(rounds, fmt.Sprintf("%.0f", q))
		}
		w("| %s | %.0f | %s | %s | %s |\n", p.name, median(p.qps), strings.Join(rounds, ", "), ms(median(p.p50)), ms(median(p.p99)))
	}
	ratio := func(a, b *perf) (med, lo, hi float64) {
		var rs []float64
		for i := range min(len(a.qps), len(b.qps)) {
			rs = append(rs, a.qps[i]/b.qps[i])
		}
		if len(rs) == 0 {
			return 0, 0, 0
		}
		return median(a.qps) / median(b.qps), slices.Min(rs), slices.Max(rs)
	}
	w("\n| ratio | medians | per round | target | |\n|---|---:|---:|---:|---|\n")
	re, reLo, reHi := ratio(pg, echo)
	rc, rcLo, rcHi := ratio(pg, cd)
	rf, rfLo, rfHi := ratio(pg, fl)
	w("| pgdns / ceiling (UDP echo) | %.2f× | %.2f–%.2f× | ≥ 0.85× | %s |\n", re, reLo, reHi, verdict(re >= 0.85))
	w("| pgdns / CoreDNS | %.2f× | %.2f–%.2f× | ≥ 1.6× | %s |\n", rc, rcLo, rcHi, verdict(rc >= 1.6))
	w("| pgdns / floor (miekg/dns) | %.2f× | %.2f–%.2f× | | |\n\n", rf, rfLo, rfHi)
	return b.String()
}

// intro opens BENCHMARKS.md: what it holds and how it is written.
const intro = "# pgdns benchmarks\n\n" +
	"What pgdns's tools measured, section by section. Each section says what was measured and how, the command that measures it again, the commit and the date, the machine and its load average then. `make bench` ([cmd/pgdns-bench](cmd/pgdns-bench/README.md)) writes the sections it measures and keeps the others as they are: the soak's ([cmd/pgdns-soak](cmd/pgdns-soak/README.md)) and the end-to-end tests', each naming the test that measured it. Every server and load generator of a run shares the machine's cores, so ratios within one run say more than absolute figures.\n\n"

// zeroAllocs names the Go benchmarks that allocated nothing in any of
// their cases, as a sentence; "" when none did.
func zeroAllocs(goBench string) string {
	var names []string
	zero := map[string]bool{}
	for _, l := range strings.Split(goBench, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name, _, _ := strings.Cut(f[0], "/")
		if i := strings.LastIndexByte(name, '-'); i > 0 && !strings.Contains(f[0], "/") {
			name = name[:i] // BenchmarkX-2: the GOMAXPROCS suffix
		}
		if _, seen := zero[name]; !seen {
			names = append(names, name)
			zero[name] = true
		}
		zero[name] = zero[name] && strings.HasSuffix(strings.TrimSpace(l), " 0 allocs/op")
	}
	var none []string
	for _, n := range names {
		if zero[n] {
			none = append(none, "`"+n+"`")
		}
	}
	if len(none) == 0 {
		return ""
	}
	return "0 allocations per operation in every case: " + strings.Join(none, ", ") + "."
}

func (r *report) markdown(plot string) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	b.WriteString(intro)

	b.WriteString(r.dnsMarkdown())

	if r.goBench != "" {
		w("## Go benchmarks\n\n%s\n\n`go test -run '^$' -bench . -benchmem -count 1 ./zone ./dnsserver`, run by `make bench` before the rest. %s\n\n```\n%s```\n\n", r.stamp, zeroAllocs(r.goBench), r.goBench)
	}

	if r.failover != nil {
		b.WriteString(r.failover.markdown(plot))
	}

	if y := r.ryow; y != nil {
		w("## Read-your-writes\n\n%s\n\n%d rounds of: insert on the primary, take `pg_current_wal_insert_lsn()`, look up `lsn-….prefer-replica` at once. Two pgdns on the same cluster, probing every 250 ms:\n\n", y.stamp, y.rounds)
		w("| `dns.lsn_wait` | answered by a replica | lookup p50 | lookup p99 |\n|---|---:|---:|---:|\n")
		w("| 0 (answer from the snapshot) | %d%% | %s | %s |\n", y.byReplicaNoWait*100/y.rounds, ms(y.noWaitP50), ms(y.noWaitP99))
		w("| 20ms (re-probe the replicas) | %d%% | %s | %s |\n\n", y.byReplicaWait*100/y.rounds, ms(y.waitP50), ms(y.waitP99))
		w("The wait adds %s at p50 and %s at p99.\n\n", ms(max(0, y.waitP50-y.noWaitP50)), ms(max(0, y.waitP99-y.noWaitP99)))
	}

	if r.scale != nil {
		b.WriteString(r.scale.markdown())
	}

	if r.dbCost != nil {
		b.WriteString(r.dbCost.markdown())
	}

	if r.hostile != nil {
		b.WriteString(r.hostile.markdown())
	}

	if len(r.http) > 0 {
		w("## HTTP (pg-status compatible endpoints)\n\n%s\n\n`wrk -t1 -c16 -d5s --latency` against the pgdns of the DNS section:\n\n| endpoint | requests/s | p99 |\n|---|---:|---:|\n", r.httpStamp)
		for _, h := range r.http {
			w("| `%s` | %.0f | %s |\n", h.path, h.rps, h.p99)
		}
		w("\n")
	}
	return b.String()
}
