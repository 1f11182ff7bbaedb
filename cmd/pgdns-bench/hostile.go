package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// The hostile-clients step: what a well-behaved client is served while an
// attacker does each thing below, beside the same figure at rest, and what
// pgdns holds meanwhile. It runs the binary under test and, when
// -hostile-before names a commit, that commit's pgdns built aside first,
// on the same cluster one after the other, to compare two builds in one
// run.

// hostileHeading starts the section in BENCHMARKS.md.
const hostileHeading = "## Hostile clients"

// The well-behaved clients' paced rates, the attackers' sizes, and how
// long each measurement lasts. Every loop below is bounded by a window.
const (
	wellUDPRate  = 2000 // queries/s, one source, well under dns.rate_limit
	wellTCPRate  = 50   // connections/s, one query each (a resolver retrying after TC)
	probeEvery   = 250 * time.Millisecond
	hostileWin   = 5 * time.Second // the well-behaved clients' window, with the attack running
	attackRampUp = 1500 * time.Millisecond

	churnRate   = 25_000  // queries/s, each from a fresh source address: what these cores serve beside the attacker
	churnMax    = 120_000 // queries/s asked for in the second churn run: past what these cores serve
	hogConns    = 600     // TCP connections from one source (pgdns's cap is 512)
	hogEvery    = 4 * time.Second
	hogSources  = 20   // the second hog's sources: 30 connections each, under the per-source cap of 32
	httpIdle    = 6000 // idle keep-alive HTTP connections
	lsnRate     = 5000 // queries/s of an lsn- name no replica can satisfy
	hostileRate = 5000 // pgdns's dns.rate_limit in this step
	hostileWait = "3s" // pgdns's dns.lsn_wait in this step
)

// hostileRow is one attack's figures (the first row: no attack).
type hostileRow struct {
	attack     string
	attacker   string  // what the attacker achieved, in words
	udpQPS     float64 // answered to the well-behaved UDP client (the mean of udpEach)
	udpEach    []float64
	tcpEach    []float64
	tcpQPS     float64 // answered to the well-behaved TCP client
	probesOK   int     // /readyz answered 200, of probesTried
	probeTries int
	rssKiB     int64   // pgdns's peak resident set during the window
	goroutines float64 // pgdns's peak go_goroutines during the window (-1: not scraped)
}

// hostileRun is one binary's rows.
type hostileRun struct {
	label      string
	rows       []hostileRow
	load, done string // the machine's load average at the start and at the end
}

// hostileResult is the step's figures.
type hostileResult struct {
	stamp stamp
	runs  []hostileRun // the -hostile-before build (when asked), then the binary under test
}

// hostileOnly is the step run alone (make bench BENCH_ONLY=hostile).
func hostileOnly(ctx context.Context, b *bench) (string, error) {
	res, err := b.hostile(ctx)
	if err != nil {
		return "", fmt.Errorf("hostile clients: %w", err)
	}
	return res.markdown(), nil
}

// hostile measures the "before" commit (when set), then the binary under
// test.
func (b *bench) hostile(ctx context.Context) (*hostileResult, error) {
	res := &hostileResult{stamp: b.stampNow()}
	if b.cfg.hostileBefore != "" {
		bin, err := b.buildCommit(ctx, b.cfg.hostileBefore)
		if err != nil {
			return nil, err
		}
		run, err := b.hostileWith(ctx, bin, "pgdns built from "+b.cfg.hostileBefore)
		if err != nil {
			return nil, err
		}
		res.runs = append(res.runs, run)
	}
	run, err := b.hostileWith(ctx, b.pgdns, "pgdns at "+b.cfg.commit)
	if err != nil {
		return nil, err
	}
	res.runs = append(res.runs, run)
	return res, nil
}

// buildCommit builds pgdns as it was at commit, from git archive, into
// the bench's scratch directory.
func (b *bench) buildCommit(ctx context.Context, commit string) (string, error) {
	src := filepath.Join(b.dir, "src-"+commit)
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	archive := exec.CommandContext(ctx, "sh", "-c", "git archive --format=tar "+commit+" | tar -x -C "+src)
	if out, err := archive.CombinedOutput(); err != nil {
		return "", fmt.Errorf("git archive %s: %w\n%s", commit, err, out)
	}
	bin := filepath.Join(b.dir, "pgdns-"+commit)
	gobin := "go"
	if g := os.Getenv("GO"); g != "" {
		gobin = g
	}
	// -trimpath, as make build: the scratch directory's name stays out
	// of the build, so Go's build cache serves a commit built before.
	build := exec.CommandContext(ctx, gobin, "build", "-trimpath", "-o", bin, "./cmd/pgdns")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %w\n%s", commit, err, out)
	}
	return bin, nil
}

// hostileWith runs bin with the step's configuration, measures at rest
// and under each attack, and stops it.
func (b *bench) hostileWith(ctx context.Context, bin, label string) (hostileRun, error) {
	run := hostileRun{label: label, load: loadAverage()}
	var hosts []string
	for _, n := range b.pg.Nodes {
		hosts = append(hosts, n.Addr())
	}
	conf := filepath.Join(b.dir, "pgdns-hostile.yaml")
	text := fmt.Sprintf(`dns: {listen: %q, zone: db.local, ttl: 1, lsn_wait: %s, rate_limit: %d}
http: {listen: %q}
probe: {interval: 250ms, timeout: 1s, max_fails: 3, dsn: "user=postgres dbname=postgres sslmode=disable"}
clusters:
  main:
    hosts: [%s]
`, b.addr.hostileDNS, hostileWait, hostileRate, b.addr.hostileHTTP, strings.Join(hosts, ", "))
	if err := writeFile(conf, text); err != nil {
		return run, err
	}
	cmd, err := b.start(bin, []string{"-config", conf})
	if err != nil {
		return run, err
	}
	defer b.stopProc(cmd)
	if err := waitDNS(b.addr.hostileDNS, "replica.db.local.", 2, 30*time.Second); err != nil {
		return run, err
	}
	time.Sleep(2 * time.Second)
	for i, a := range b.attacks() {
		if i > 0 && !slices.ContainsFunc(strings.Split(b.cfg.hostileAttack, ","), func(w string) bool { return strings.Contains(a.name, w) }) {
			continue
		}
		fmt.Fprintf(os.Stderr, "bench: hostile clients, %s: %s ...\n", label, a.name)
		row, err := b.underAttack(ctx, cmd.Process.Pid, a)
		if err != nil {
			return run, fmt.Errorf("%s: %w", a.name, err)
		}
		run.add(row)
	}
	run.done = loadAverage()
	return run, nil
}

// add puts row in run, merged with an earlier row of the same attack (a
// repetition): the clients' rates in each, the peaks over both.
func (run *hostileRun) add(row hostileRow) {
	row.udpEach, row.tcpEach = []float64{row.udpQPS}, []float64{row.tcpQPS}
	for i := range run.rows {
		r := &run.rows[i]
		if r.attack != row.attack {
			continue
		}
		r.udpEach, r.tcpEach = append(r.udpEach, row.udpQPS), append(r.tcpEach, row.tcpQPS)
		r.udpQPS, r.tcpQPS = mean(r.udpEach), mean(r.tcpEach)
		r.probesOK, r.probeTries = r.probesOK+row.probesOK, r.probeTries+row.probeTries
		r.rssKiB, r.goroutines = max(r.rssKiB, row.rssKiB), max(r.goroutines, row.goroutines)
		return
	}
	run.rows = append(run.rows, row)
}

func mean(v []float64) float64 {
	var sum float64
	for _, x := range v {
		sum += x
	}
	return sum / float64(len(v))
}

// controlName is the flood that is not an attack on a limit: the largest
// churn's volume from sources the limiter knows.
var controlName = fmt.Sprintf("UDP flood, %dk/s from known sources (control)", churnMax/1000)

// churnMaxName is the churn the control has the volume of.
var churnMaxName = fmt.Sprintf("rate-limiter churn, %dk/s", churnMax/1000)

// attack is one hostile client. run attacks until ctx is done and says
// what it achieved; setup and undo (optional) prepare the cluster for it
// and put it back.
type attack struct {
	name   string
	setup  func(ctx context.Context) (undo func(), err error)
	run    func(ctx context.Context) string
	settle time.Duration // after the attack, before the next one
}

func (b *bench) attacks() []attack {
	return []attack{
		{name: "none (at rest)", run: func(ctx context.Context) string { <-ctx.Done(); return "" }, settle: time.Second},
		{name: fmt.Sprintf("rate-limiter churn, %dk/s", churnRate/1000), run: b.churnAttack(churnRate), settle: 3 * time.Second},
		// Past what these cores serve, the machine's other load moves the
		// figures: churn and its control alternate, twice each.
		{name: churnMaxName, run: b.churnAttack(churnMax), settle: 3 * time.Second},
		{name: controlName, run: b.knownFlood, settle: 3 * time.Second},
		{name: churnMaxName, run: b.churnAttack(churnMax), settle: 3 * time.Second},
		{name: controlName, run: b.knownFlood, settle: 3 * time.Second},
		{name: "TCP slot hogging", run: b.hogAttack, settle: 3 * time.Second},
		{name: "TCP slot hogging, 20 sources", run: b.hogManyAttack, settle: 3 * time.Second},
		{name: "HTTP idle flood", run: b.httpIdleAttack, settle: 3 * time.Second},
		{name: "lsn- flood", setup: b.stallReplicas, run: b.lsnFlood, settle: 5 * time.Second},
	}
}

// underAttack starts a, lets it ramp up, runs the well-behaved clients
// and the sampler for hostileWin, then stops a and lets pgdns settle.
func (b *bench) underAttack(ctx context.Context, pid int, a attack) (hostileRow, error) {
	row := hostileRow{attack: a.name}
	if a.setup != nil {
		undo, err := a.setup(ctx)
		if err != nil {
			return row, err
		}
		defer undo()
	}
	actx, stop := context.WithTimeout(ctx, attackRampUp+hostileWin+2*time.Second)
	defer stop()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); row.attacker = a.run(actx) }()
	select {
	case <-time.After(attackRampUp):
	case <-ctx.Done():
		return row, ctx.Err()
	}

	var cw sync.WaitGroup
	cw.Add(4)
	go func() { defer cw.Done(); row.udpQPS = b.wellUDP(b.addr.hostileDNS, hostileWin) }()
	go func() { defer cw.Done(); row.tcpQPS = b.wellTCP(b.addr.hostileDNS, hostileWin) }()
	go func() { defer cw.Done(); row.probesOK, row.probeTries = b.wellProbes(b.addr.hostileHTTP, hostileWin) }()
	go func() { defer cw.Done(); row.rssKiB, row.goroutines = b.footprint(pid, b.addr.hostileHTTP, hostileWin) }()
	cw.Wait()
	stop()
	wg.Wait()
	time.Sleep(a.settle)
	return row, nil
}
