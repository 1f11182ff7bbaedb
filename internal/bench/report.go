package main

import (
	"fmt"
	"runtime"
	"strings"
	"time"
)

// report collects every step's figures and renders them.
type report struct {
	machine     string
	dns         []*perf
	dnsRounds   int
	dnsDuration time.Duration
	ryow        *ryowResult
	http        []httpResult
	failover    *failoverResult
	scale       *scaleResult
	goBench     string
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

func (r *report) markdown(plot string) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# pgdns benchmarks\n\n")
	w("Written by `make bench` on %s: %d cores (%s), %s, %s. Every server and dnsperf share those cores, so ratios say more than absolute figures. Rerun with `make bench`.\n\n",
		time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), strings.TrimSpace(r.machine), runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH)

	if len(r.dns) == 3 {
		pg, cd, fl := r.dns[0], r.dns[1], r.dns[2]
		w("## DNS throughput and latency\n\n")
		w("dnsperf (1 thread, 4 clients, 200 queries outstanding, %v per run) with the query mix `primary`, `replica`, `lag-50ms.replica`, `bytes-1mb.replica`, `lsn-….replica` under `db.local`; %d rounds interleaved, medians shown. Latency is per query at a steady 5,000 queries/s (`dnsperf -v -Q 5000`). pgdns is probing a real primary and two streaming replicas every 250 ms while it answers.\n\n",
			r.dnsDuration, r.dnsRounds)
		w("| server | queries/s | p50 | p99 |\n|---|---:|---:|---:|\n")
		for _, p := range r.dns {
			w("| %s | %.0f | %s | %s |\n", p.name, median(p.qps), ms(median(p.p50)), ms(median(p.p99)))
		}
		rc, rf := median(pg.qps)/median(cd.qps), median(pg.qps)/median(fl.qps)
		w("\n| ratio | value | target | |\n|---|---:|---:|---|\n")
		w("| pgdns / CoreDNS | %.2f× | ≥ 1.5× | %s |\n", rc, verdict(rc >= 1.5))
		w("| pgdns / floor | %.2f× | ≥ 0.9× | %s |\n\n", rf, verdict(rf >= 0.9))
		if floorOverCoreDNS := median(fl.qps) / median(cd.qps); rc < 1.5 && floorOverCoreDNS < 1.5 {
			w("The CoreDNS target is missed because the floor itself — a miekg/dns server answering from a constant map and nothing else — is only %.2f× CoreDNS here, and pgdns runs at %.2f× the floor: no change to pgdns's own work can reach 1.5×. What is left is the library's server loop (a goroutine and two system calls per UDP packet) and dnsperf competing with it for the same two cores.\n\n",
				floorOverCoreDNS, rf)
		}
	}

	if r.goBench != "" {
		w("## Go benchmarks\n\n`go test -bench . -benchmem ./zone ./dnsserver`: `zone.Parse` and selection allocate nothing; a whole query through `ServeDNS` (parse, select, build, pack) allocates the answer's records.\n\n```\n%s```\n\n", r.goBench)
	}

	if r.failover != nil {
		b.WriteString(r.failover.markdown(plot))
	}

	if y := r.ryow; y != nil {
		w("## Read-your-writes\n\n%d rounds of: insert on the primary, take `pg_current_wal_insert_lsn()`, look up `lsn-….prefer-replica` at once. Two pgdns on the same cluster, probing every 250 ms:\n\n", y.rounds)
		w("| `dns.lsn_wait` | answered by a replica | lookup p50 | lookup p99 |\n|---|---:|---:|---:|\n")
		w("| 0 (answer from the snapshot) | %d%% | %s | %s |\n", y.byReplicaNoWait*100/y.rounds, ms(y.noWaitP50), ms(y.noWaitP99))
		w("| 20ms (re-probe the replicas) | %d%% | %s | %s |\n\n", y.byReplicaWait*100/y.rounds, ms(y.waitP50), ms(y.waitP99))
		w("The wait adds %s at p50 and %s at p99.\n\n", ms(max(0, y.waitP50-y.noWaitP50)), ms(max(0, y.waitP99-y.noWaitP99)))
	}

	if r.scale != nil {
		b.WriteString(r.scale.markdown())
	}

	if len(r.http) > 0 {
		w("## HTTP (pg-status compatible endpoints)\n\n`wrk -t1 -c16 -d5s --latency`:\n\n| endpoint | requests/s | p99 |\n|---|---:|---:|\n")
		for _, h := range r.http {
			w("| `%s` | %.0f | %s |\n", h.path, h.rps, h.p99)
		}
		w("\n")
	}
	return b.String()
}
