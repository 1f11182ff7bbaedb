package main

import (
	"flag"
	"strings"
	"testing"
	"time"
)

// Every section says what was measured, how and when from the figures it
// is given: its stamp (command, commit, date, machine, load) and no
// story of the work — no issue numbers, no before/after labels that a
// reader cannot rerun.
func TestSectionsStampedFromTheirData(t *testing.T) {
	st := stamp{command: "make bench", commit: "abc1234", began: time.Date(2026, 12, 1, 4, 20, 0, 0, time.UTC), load: "1.17", machine: "2 cores (test CPU), go1.26, linux/amd64"}
	ds := []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond}
	r := &report{stamp: st, dnsStamp: st, httpStamp: st, dnsRounds: 3, dnsDuration: 8 * time.Second,
		goBench: "BenchmarkParse/primary.db.local.-2 \t 1 \t 13.9 ns/op \t 0 B/op \t 0 allocs/op\nBenchmarkHandler/primary.db.local.-2 \t 1 \t 552 ns/op \t 396 B/op \t 8 allocs/op\n"}
	for _, name := range []string{"pgdns", "CoreDNS", "floor", "echo"} {
		r.dns = append(r.dns, &perf{name: name, qps: []float64{1000, 1100, 1200}, p50: ds, p99: ds})
	}
	r.ryow = &ryowResult{stamp: st, rounds: 300, waitP50: time.Millisecond}
	r.http = []httpResult{{path: "/master", rps: 38000, p99: "4.77ms"}}
	stop := []stopRep{{lastAnswered: -time.Millisecond, loggedOK: true}}
	r.failover = &failoverResult{stamp: st, crash: stop, fast: stop, switchover: []switchRep{{firstAnswered: time.Millisecond}}, label: "pgdns at abc1234",
		before:  &failoverResult{stamp: st, crash: stop, fast: stop, switchover: []switchRep{{firstAnswered: 2 * time.Millisecond}}, label: "pgdns built from c1fc5c0"},
		patroni: &patroniResult{reps: []patroniRep{{api: 2 * time.Second, dns: 2100 * time.Millisecond, writable: 2090 * time.Millisecond}}}}
	r.scale = &scaleResult{stamp: st, realHosts: 3, windows: 1, window: 10 * time.Second, rss3Idle: 19 * 1024,
		points: []scalePoint{{hosts: 1000, fakes: 997, interval: 250 * time.Millisecond, probesPerSec: 4000, span: 10 * time.Second, cpu: 1500 * time.Millisecond, shares: []float64{15}}},
		dns:    &scaleDNS{hosts: 1000, interval: 250 * time.Millisecond, duration: 8 * time.Second, small: []float64{50000}, large: []float64{45000}}}
	r.dbCost = &dbCostResult{stamp: st, execs: 1000, window: 10 * time.Second, simple: [2]time.Duration{time.Millisecond, time.Millisecond}, prepared: [2]time.Duration{100 * time.Microsecond, 90 * time.Microsecond}}
	rest := hostileRow{attack: "none (at rest)", udpQPS: 2000, tcpQPS: 50, rssKiB: 20 * 1024}
	r.hostile = &hostileResult{stamp: st, runs: []hostileRun{{label: "pgdns at abc1234", load: "1", done: "2", rows: []hostileRow{rest, {attack: "lsn- flood", udpQPS: 2000, tcpQPS: 50, rssKiB: 30 * 1024}}}}}
	ha := &haResult{stamp: st, gap: ds, later: ds, interval: 250 * time.Millisecond,
		glibc:   []glibcRun{{conf: "", state: haUp, lookup: ds, psql: ds}},
		coredns: []corednsRun{{settings: "`max_fails 0`", state: haFrozen, took: ds}}}

	md := r.markdown("failover.png")
	sections := strings.Split(md, "\n## ")[1:]
	if len(sections) != 8 {
		t.Fatalf("%d sections, want 8:\n%s", len(sections), md)
	}
	sections = append(sections, ha.markdown())
	for _, s := range sections {
		heading, _, _ := strings.Cut(s, "\n")
		if !strings.Contains(s, st.String()) {
			t.Errorf("section %q does not open with its stamp %q", heading, st)
		}
		for _, story := range []string{"issue", "Issue", "before (", "after (", "this tree"} {
			if strings.Contains(s, story) {
				t.Errorf("section %q says %q", heading, story)
			}
		}
	}
	if want := "Measured with `make bench` at abc1234 on 2026-12-01 04:20 UTC; 2 cores (test CPU), go1.26, linux/amd64; load average 1.17 when it began."; st.String() != want {
		t.Errorf("stamp = %q, want %q", st, want)
	}
	if got, want := zeroAllocs(r.goBench), "0 allocations per operation in every case: `BenchmarkParse`."; got != want {
		t.Errorf("zeroAllocs = %q, want %q", got, want)
	}
}

// The command in a stamp is the one that measures the section again.
func TestStampCommand(t *testing.T) {
	for _, tc := range []struct {
		cfg  config
		want string
	}{
		{config{}, "make bench"},
		{config{only: "dns"}, "make bench BENCH_ONLY=dns"},
		{config{only: "scale", pprofDir: "/tmp/p"}, "make bench BENCH_ONLY=scale PPROF=dir"},
		{config{only: "ha", pprofDir: "/tmp/p"}, "make bench BENCH_ONLY=ha"},
		{parseFlags(flag.NewFlagSet("bench", flag.ContinueOnError), []string{"-only", "dns", "-out", "/tmp/b.md", "-rounds", "1", "-duration", "3s", "-commit", "x"}),
			"bin/pgdns-bench -only dns -duration 3s -rounds 1"},
		{parseFlags(flag.NewFlagSet("bench", flag.ContinueOnError), []string{"-only", "scale", "-pprof", "/tmp/p", "-commit", "x"}),
			"make bench BENCH_ONLY=scale PPROF=dir"},
	} {
		if got := tc.cfg.command(); got != tc.want {
			t.Errorf("%+v: command %q, want %q", tc.cfg, got, tc.want)
		}
	}
}
