package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// perf is one server's figures: medians over the rounds.
type perf struct {
	name     string
	qps      []float64
	p50, p99 []time.Duration
}

func median[T int64 | float64 | time.Duration](v []T) T {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// dnsComparison runs the same query file against pgdns (live probing),
// CoreDNS (static zone), the floor and the echo, interleaved round by
// round so that drift of the machine hits all of them alike.
func (b *bench) dnsComparison(ctx context.Context, r *report) error {
	rounds, d := b.cfg.rounds, b.cfg.dnsTime
	r.dnsStamp = b.stampNow()
	if err := b.takeLSN(ctx); err != nil {
		return err
	}
	var hosts []string
	for _, n := range b.pg.Nodes {
		hosts = append(hosts, n.Addr())
	}
	if _, err := b.startPGDNS(hosts, "250ms"); err != nil {
		return err
	}
	if err := waitDNS(b.addr.pgdnsDNS, b.lsnName()+".db.local.", 2, 10*time.Second); err != nil {
		return err
	}
	time.Sleep(3 * time.Second) // settle, then the idle footprint
	var err error
	if b.rssIdle, err = rssKiB(b.pgdnsPID); err != nil {
		return err
	}
	if err := b.startCoreDNS(); err != nil {
		return err
	}
	if err := b.startFloor(); err != nil {
		return err
	}
	if err := b.startEcho(); err != nil {
		return err
	}

	queries := filepath.Join(b.dir, "queries.txt")
	var q strings.Builder
	for _, n := range b.queryNames() {
		q.WriteString(n + " A\n")
	}
	if err := os.WriteFile(queries, []byte(q.String()), 0o644); err != nil {
		return err
	}
	targets := []*perf{{name: "pgdns"}, {name: "CoreDNS (static zone file)"}, {name: "floor (miekg/dns, constant map)"}, {name: "ceiling (plain UDP echo)"}}
	addrs := []string{b.addr.pgdnsDNS, b.addr.corednsDNS, b.addr.floorDNS, b.addr.echoDNS}
	for round := range rounds {
		for i, t := range targets {
			fmt.Fprintf(os.Stderr, "bench: round %d/%d %s\n", round+1, rounds, t.name)
			qps, err := dnsperfThroughput(ctx, addrs[i], queries, d)
			if err != nil {
				return err
			}
			p50, p99, err := dnsperfLatency(ctx, addrs[i], queries)
			if err != nil {
				return err
			}
			t.qps, t.p50, t.p99 = append(t.qps, qps), append(t.p50, p50), append(t.p99, p99)
		}
	}
	r.dns = targets
	r.dnsRounds, r.dnsDuration = rounds, d
	return nil
}

// dnsperfThroughput returns the queries per second dnsperf reaches with
// 4 clients and 200 queries outstanding.
func dnsperfThroughput(ctx context.Context, addr, queries string, d time.Duration) (float64, error) {
	host, port, _ := net.SplitHostPort(addr)
	out, err := exec.CommandContext(ctx, "dnsperf", "-s", host, "-p", port, "-d", queries,
		"-l", strconv.Itoa(int(d.Seconds())), "-c", "4", "-q", "200", "-T", "1").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("dnsperf: %w\n%s", err, out)
	}
	// A few UDP queries may be dropped by full socket buffers at full
	// speed; throughput counts the answered ones, as dnsperf does.
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "Queries per second:"); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("no throughput in dnsperf output:\n%s", out)
}

// dnsperfLatency returns p50 and p99 of per-query latency at a steady
// 5000 queries per second (dnsperf -v prints each query's latency).
func dnsperfLatency(ctx context.Context, addr, queries string) (time.Duration, time.Duration, error) {
	host, port, _ := net.SplitHostPort(addr)
	out, err := exec.CommandContext(ctx, "dnsperf", "-s", host, "-p", port, "-d", queries,
		"-l", "3", "-Q", "5000", "-v").CombinedOutput()
	if err != nil {
		return 0, 0, fmt.Errorf("dnsperf: %w", err)
	}
	var lat []time.Duration
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) == 5 && f[0] == ">" {
			if s, err := strconv.ParseFloat(f[4], 64); err == nil {
				lat = append(lat, time.Duration(s*float64(time.Second)))
			}
		}
	}
	if len(lat) == 0 {
		return 0, 0, fmt.Errorf("no latencies in dnsperf output")
	}
	slices.Sort(lat)
	return lat[len(lat)/2], lat[len(lat)*99/100], nil
}
