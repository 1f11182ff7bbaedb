package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// srvHeading starts the SRV section of BENCHMARKS.md.
const srvHeading = "## SRV answers do not slow A answers"

// srvResult is the SRV section's figures: per query file, the rounds'
// queries/s and the A queries' latency at a steady rate.
type srvResult struct {
	stamp  stamp
	rounds int
	d      time.Duration
	files  []srvFile
}

type srvFile struct {
	name       string
	qps        []float64
	aP50, aP99 []time.Duration // A queries only
	sP50, sP99 []time.Duration // SRV queries only (none in the A mix)
}

// srvComparison measures pgdns alone on two query files, round by round:
// the DNS section's mix of A names, and the same mix with each name's
// _postgresql._tcp. SRV query beside its A query (half the queries SRV,
// answered by the slow path with their targets' addresses).
func (b *bench) srvComparison(ctx context.Context) (*srvResult, error) {
	res := &srvResult{stamp: b.stampNow(), rounds: b.cfg.rounds, d: b.cfg.dnsTime}
	conn, err := pgxConnect(ctx, b.pg.Nodes[0].DSN())
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, "SELECT lower(replace(pg_current_wal_insert_lsn()::text, '/', '-'))").Scan(&b.lsn); err != nil {
		return nil, err
	}
	var hosts []string
	for _, n := range b.pg.Nodes {
		hosts = append(hosts, n.Addr())
	}
	if _, err := b.startPGDNS(hosts, "250ms"); err != nil {
		return nil, err
	}
	if err := waitDNS(b.addr.pgdnsDNS, b.lsnName()+".db.local.", 2, 10*time.Second); err != nil {
		return nil, err
	}
	var aOnly, mixed strings.Builder
	for _, n := range b.queryNames() {
		aOnly.WriteString(n + " A\n")
		mixed.WriteString(n + " A\n_postgresql._tcp." + n + " SRV\n")
	}
	res.files = []srvFile{{name: "A mix (the DNS section's)"}, {name: "the same mix with each name's SRV query (half SRV)"}}
	paths := []string{filepath.Join(b.dir, "a.txt"), filepath.Join(b.dir, "a-srv.txt")}
	for i, text := range []string{aOnly.String(), mixed.String()} {
		if err := os.WriteFile(paths[i], []byte(text), 0o644); err != nil {
			return nil, err
		}
	}
	for round := range res.rounds {
		for i := range res.files {
			f := &res.files[i]
			fmt.Fprintf(os.Stderr, "bench: SRV round %d/%d %s\n", round+1, res.rounds, f.name)
			qps, err := dnsperfThroughput(ctx, b.addr.pgdnsDNS, paths[i], res.d)
			if err != nil {
				return nil, err
			}
			lat, err := dnsperfLatencyByType(ctx, b.addr.pgdnsDNS, paths[i])
			if err != nil {
				return nil, err
			}
			f.qps = append(f.qps, qps)
			f.aP50, f.aP99 = append(f.aP50, quantile(lat["A"], 50)), append(f.aP99, quantile(lat["A"], 99))
			if len(lat["SRV"]) > 0 {
				f.sP50, f.sP99 = append(f.sP50, quantile(lat["SRV"], 50)), append(f.sP99, quantile(lat["SRV"], 99))
			}
		}
	}
	res.stamp.took = time.Since(res.stamp.began)
	return res, nil
}

// dnsperfLatencyByType is dnsperfLatency's run, its per-query latencies
// kept by query type (dnsperf -v: "> NOERROR name type seconds").
func dnsperfLatencyByType(ctx context.Context, addr, queries string) (map[string][]time.Duration, error) {
	host, port, _ := net.SplitHostPort(addr)
	out, err := exec.CommandContext(ctx, "dnsperf", "-s", host, "-p", port, "-d", queries,
		"-l", "3", "-Q", "5000", "-v").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("dnsperf: %w", err)
	}
	lat := map[string][]time.Duration{}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) == 5 && f[0] == ">" {
			if s, err := strconv.ParseFloat(f[4], 64); err == nil {
				lat[f[3]] = append(lat[f[3]], time.Duration(s*float64(time.Second)))
			}
		}
	}
	if len(lat["A"]) == 0 {
		return nil, fmt.Errorf("no A latencies in dnsperf output")
	}
	return lat, nil
}

// quantile is the p-th percentile of v, 0 when v is empty.
func quantile(v []time.Duration, p float64) time.Duration {
	if len(v) == 0 {
		return 0
	}
	return pct(v, p/100)
}

func (r *srvResult) markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("%s\n\n%s\n\n", srvHeading, r.stamp)
	w("pgdns alone (probing a real primary and two streaming replicas every 250 ms), dnsperf as in the DNS section (1 thread, 4 clients, 200 outstanding, %v per run), %s interleaved, medians shown and each round's queries/s in brackets; latency at a steady 5,000 queries/s, A and SRV queries apart. The second file holds each name of the first twice: as A and as `_postgresql._tcp.<name>` SRV, whose answers carry every target's address in the additional section.\n\n",
		r.d, count(r.rounds, "round"))
	w("| query file | queries/s | rounds | A p50 | A p99 | SRV p50 | SRV p99 |\n|---|---:|---|---:|---:|---:|---:|\n")
	for _, f := range r.files {
		var rounds []string
		for _, q := range f.qps {
			rounds = append(rounds, fmt.Sprintf("%.0f", q))
		}
		sp50, sp99 := "—", "—"
		if len(f.sP50) > 0 {
			sp50, sp99 = ms(median(f.sP50)), ms(median(f.sP99))
		}
		w("| %s | %.0f | %s | %s | %s | %s | %s |\n", f.name, median(f.qps), strings.Join(rounds, ", "),
			ms(median(f.aP50)), ms(median(f.aP99)), sp50, sp99)
	}
	if len(r.files) == 2 && median(r.files[0].qps) > 0 {
		w("\nWith half the queries SRV, pgdns answers %.2f× the queries/s of the A mix: an SRV answer is built by miekg/dns on the slow path "+
			"(`BenchmarkSRV`: several µs, about ten A answers), while an A answer costs what it did before SRV existed (the fast path, 0 allocations: `BenchmarkFastPath`). "+
			"The A queries' p50 is %s beside %s without SRV: a UDP reader sends the fast path's replies of a batch before it answers the rest, so an A query never waits for an SRV answer read with it.\n\n",
			median(r.files[1].qps)/median(r.files[0].qps), ms(median(r.files[1].aP50)), ms(median(r.files[0].aP50)))
	}
	return b.String()
}

// srvOnly is `-only srv`: the SRV section alone.
func srvOnly(ctx context.Context, b *bench) (string, error) {
	fmt.Fprintln(os.Stderr, "bench: SRV answers ...")
	res, err := b.srvComparison(ctx)
	if err != nil {
		return "", fmt.Errorf("SRV answers: %w", err)
	}
	return res.markdown(), nil
}
