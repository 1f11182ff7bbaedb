package main

// Failover visibility at the default probe settings: how long a
// stopped primary is still answered as primary.db.local, and how long
// after a promotion the new one is, seen from the client side by a poller
// that asks every millisecond or so.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/dnspoll"
	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// stopRep is one stop of the primary, without a promotion. Times are
// relative to the postmaster's exit, negative when before it.
type stopRep struct {
	stopStarted  time.Duration // pg_ctl stop started (negative)
	stopReturned time.Duration // pg_ctl stop returned
	lastAnswered time.Duration // the last answer that named the stopped primary
	logged       time.Duration // pgdns logged it down (ms resolution); NaN-like if not found
	loggedOK     bool
}

// switchRep is one switchover. Times are relative to pg_ctl promote
// returning.
type switchRep struct {
	promoteStarted time.Duration // negative
	writable       time.Duration // the replica first answered pg_is_in_recovery() = false (polled every ms); negative
	oldLeft        time.Duration // the old primary's last answer (it was stopped with -m fast just before)
	firstAnswered  time.Duration // the first answer naming the new primary
	logged         time.Duration // pgdns logged the new primary (ms resolution)
	loggedOK       bool
}

// failoverResult is what the failover step measured.
type failoverResult struct {
	crash, fast []stopRep
	switchover  []switchRep
	pollGap     time.Duration // median time between two answers of the poller
	wrong       []string      // answers that named a host in a wrong role, or SERVFAIL
	fluxProbes  float64       // pgdns_flux_probes_total at the end
	episodes    int           // faults that put the cluster in flux
	patroni     *patroniResult
	stamp       stamp
	plotCrash   []sample        // the median crash, for the plot
	plotSwitch  []sample        // the median switchover
	label       string          // which pgdns: "pgdns at <commit>", "pgdns built from <commit>"
	load, done  string          // the load average when its cases began and ended
	before      *failoverResult // -failover-before's run, on the same cluster just ahead of this one, or nil
}

// sample is what primary.db.local answered at t.
type sample struct {
	t     time.Duration
	state int // 2 old primary, 0 nobody, 1 new primary
}

// watchExit reports when process pid is gone or a zombie, polling /proc
// every 250µs for at most 90s.
func watchExit(pid int) <-chan time.Time {
	ch := make(chan time.Time, 1)
	stat := "/proc/" + strconv.Itoa(pid) + "/stat"
	go func() {
		for end := time.Now().Add(90 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Microsecond) {
			b, err := os.ReadFile(stat)
			if err != nil {
				ch <- time.Now()
				return
			}
			// pid (comm) S ...: the state follows the last ')'.
			if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X') {
				ch <- time.Now()
				return
			}
		}
		ch <- time.Time{}
	}()
	return ch
}

// watchWritable reports when the server at dsn first answers pg_is_in_recovery() = false,
// asking every millisecond on one connection, for at most 60s.
func watchWritable(ctx context.Context, dsn string) <-chan time.Time {
	ch := make(chan time.Time, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			ch <- time.Time{}
			return
		}
		defer conn.Close(context.Background())
		for ctx.Err() == nil {
			var rec bool
			if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&rec); err == nil && !rec {
				ch <- time.Now()
				return
			}
			time.Sleep(time.Millisecond)
		}
		ch <- time.Time{}
	}()
	return ch
}

// pgdnsEvent is one "host state changed" line of pgdns's log.
type pgdnsEvent struct {
	at                    time.Time
	host, from, to, cause string
}

// readEvents parses pgdns's log.
func readEvents(path string) []pgdnsEvent {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []pgdnsEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.Contains(l, `msg="host state changed"`) {
			continue
		}
		ev := pgdnsEvent{}
		for _, f := range strings.Fields(l) {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "time":
				ev.at, _ = time.Parse(time.RFC3339Nano, v)
			case "host":
				ev.host = v
			case "from":
				ev.from = v
			case "to":
				ev.to = v
			}
		}
		if _, e, ok := strings.Cut(l, " error="); ok {
			ev.cause = e
		}
		out = append(out, ev)
	}
	return out
}

// firstEvent is the first event of host matching from/to ("" any) at or
// after t.
func firstEvent(evs []pgdnsEvent, host, from, to string, t time.Time) (time.Time, bool) {
	e, ok := findEvent(evs, host, from, to, t)
	return e.at, ok
}

func findEvent(evs []pgdnsEvent, host, from, to string, t time.Time) (pgdnsEvent, bool) {
	for _, e := range evs {
		if e.host == host && (from == "" || e.from == from) && (to == "" || e.to == to) && !e.at.Before(t) {
			return e, true
		}
	}
	return pgdnsEvent{}, false
}

// dumpReps writes every repetition's times (UTC, µs) and the cause pgdns
// logged beside the kept logs, in file name, to look at one repetition
// closely.
func dumpReps(evs []pgdnsEvent, marks failoverMarks, name string) {
	var b strings.Builder
	ts := func(t time.Time) string { return t.UTC().Format("15:04:05.000000") }
	b.WriteString("case rep host fault_started reference(exit|promote_returned) pgdns_logged cause\n")
	for name, ms := range map[string][]repMarks{"crash": marks.crash, "fast": marks.fast, "switchover": marks.switchover} {
		for i, m := range ms {
			from, to := "primary", ""
			if name == "switchover" {
				from, to = "", "primary"
			}
			e, _ := findEvent(evs, m.host, from, to, m.t0.Add(-time.Millisecond))
			fmt.Fprintf(&b, "%s %d %s %s %s %s %+.1fms %s\n", name, i+1, m.host, ts(m.t0), ts(m.ref), ts(e.at), float64(e.at.Sub(m.ref).Microseconds())/1000, e.cause)
		}
	}
	dir := filepath.Join(os.TempDir(), "pgdns-bench-logs")
	_ = os.MkdirAll(dir, 0o755)
	_ = os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644)
}

// failoverWorld is the cluster and the pgdns the failover step measures.
type failoverWorld struct {
	pg       *pgtest.Cluster
	primary  *pgtest.Node
	replica  *pgtest.Node
	dnsAddr  string
	httpAddr string
	log      string
	wrong    []string
	gaps     []time.Duration
	marks    failoverMarks // where to find each repetition in pgdns's log
}

// failover runs the cases interleaved, 20 times each, on one primary and
// one replica that pgdns (bin/pgdns, default probe settings) watches
// throughout; with -failover-before, pgdns built from that commit first,
// the same way on the same cluster; then Patroni switchovers when Patroni
// is installed.
func (b *bench) failover(ctx context.Context, r *report) error {
	began, startLoad := time.Now(), loadAverage()
	beforeBin := ""
	if c := b.cfg.failoverBefore; c != "" {
		// Built before the cluster starts: the build's CPU falls
		// outside every measurement.
		fmt.Fprintf(os.Stderr, "bench: building pgdns at %s ...\n", c)
		bin, err := b.buildCommit(ctx, c)
		if err != nil {
			return err
		}
		beforeBin = bin
	}
	block, release, err := pgtest.Reserve()
	if err != nil {
		return err
	}
	defer release()
	pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	pg, err := pgtest.Start(pctx, pgtest.Options{IPs: block.IPs(2)})
	cancel()
	if err != nil {
		return err
	}
	defer pg.Close()
	w := &failoverWorld{pg: pg, primary: pg.Nodes[0], replica: pg.Nodes[1],
		dnsAddr: block.Addr(53, 5353), httpAddr: block.Addr(53, 8080)}
	var before *failoverResult
	if beforeBin != "" {
		if before, err = b.failoverWith(ctx, w, beforeBin, "pgdns-failover-"+b.cfg.failoverBefore+".log"); err != nil {
			return fmt.Errorf("pgdns built from %s: %w", b.cfg.failoverBefore, err)
		}
		before.label = "pgdns built from " + b.cfg.failoverBefore
	}
	res, err := b.failoverWith(ctx, w, b.pgdns, "pgdns-failover.log")
	if err != nil {
		return err
	}
	res.label, res.before = "pgdns at "+b.cfg.commit, before
	res.stamp.began, res.stamp.load = began.UTC(), startLoad
	res.stamp.took = time.Since(began)

	if pr, err := b.patroniSwitchovers(ctx, block); err != nil {
		fmt.Fprintln(os.Stderr, "bench: patroni:", err)
		res.patroni = &patroniResult{skipped: err.Error()}
	} else {
		res.patroni = pr
	}
	r.failover = res
	png, err := plotFailover(b.dir, res)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: no plot:", err)
		return nil
	}
	b.plotPath = png
	return nil
}

// failoverWith starts bin on w's cluster at the default probe settings,
// runs the cases, and stops it.
func (b *bench) failoverWith(ctx context.Context, w *failoverWorld, bin, logName string) (*failoverResult, error) {
	w.log, w.wrong, w.gaps, w.marks = filepath.Join(b.dir, logName), nil, nil, failoverMarks{}
	conf := filepath.Join(b.dir, "pgdns-failover.yaml")
	// The probe settings are the defaults (interval 250ms, timeout 1s,
	// max_fails 3, flux_interval 10ms, flux_duration 3s): none is set.
	if err := writeFile(conf, fmt.Sprintf("dns: {listen: %q, zone: db.local, ttl: 1}\nhttp: {listen: %q}\nprobe: {dsn: \"user=postgres dbname=postgres sslmode=disable\"}\nclusters:\n  main:\n    hosts: [%s, %s]\n",
		w.dnsAddr, w.httpAddr, w.primary.Addr(), w.replica.Addr())); err != nil {
		return nil, err
	}
	res := &failoverResult{stamp: b.stampNow(), load: loadAverage()}
	cmd, err := b.startLogged(w.log, bin, "-config", conf)
	if err != nil {
		return nil, err
	}
	defer b.stopProc(cmd)
	if err := w.waitRoles(ctx); err != nil {
		return nil, err
	}
	var crashTL, switchTL [][]sample
	for rep := range b.cfg.failoverReps {
		fmt.Fprintf(os.Stderr, "bench: failover round %d/%d (%s)\n", rep+1, b.cfg.failoverReps, filepath.Base(bin))
		for _, mode := range []string{"immediate", "fast"} {
			sr, tl, err := w.stop(ctx, mode)
			if err != nil {
				return nil, fmt.Errorf("stop -m %s, round %d: %w\n%s", mode, rep+1, err, tailFile(w.log, 3000))
			}
			if mode == "immediate" {
				res.crash, crashTL = append(res.crash, sr), append(crashTL, tl)
			} else {
				res.fast = append(res.fast, sr)
			}
		}
		sw, tl, err := w.switchover(ctx)
		if err != nil {
			return nil, fmt.Errorf("switchover, round %d: %w\n%s", rep+1, err, tailFile(w.log, 3000))
		}
		res.switchover, switchTL = append(res.switchover, sw), append(switchTL, tl)
	}
	res.episodes = 3 * b.cfg.failoverReps
	// pgdns's log has each host state change with a millisecond timestamp.
	evs := readEvents(w.log)
	res.fillLogged(evs, w.marks)
	dumpReps(evs, w.marks, strings.Replace(strings.TrimSuffix(logName, ".log"), "pgdns-failover", "failover-reps", 1)+".txt")
	res.wrong = w.wrong
	res.pollGap = median(w.gaps)
	res.fluxProbes = metric(w.httpAddr, "pgdns_flux_probes_total")
	res.plotCrash = crashTL[medianIndex(res.crash, func(s stopRep) time.Duration { return s.lastAnswered })]
	res.plotSwitch = switchTL[medianIndex(res.switchover, func(s switchRep) time.Duration { return s.firstAnswered })]
	res.done = loadAverage()
	b.stopProc(cmd)
	keepLog(w.log)
	return res, nil
}

// repMarks is what is kept of each repetition to find pgdns's log lines.
type repMarks struct {
	host string
	t0   time.Time // the fault started
	ref  time.Time // the reference: postmaster exit, or promote returned
}

// failoverMarks are each case's repetitions, in order.
type failoverMarks struct{ crash, fast, switchover []repMarks }

// fillLogged finds, for each repetition, when pgdns logged the change.
func (res *failoverResult) fillLogged(evs []pgdnsEvent, marks failoverMarks) {
	for i, m := range marks.crash {
		if at, ok := firstEvent(evs, m.host, "primary", "", m.t0.Add(-time.Millisecond)); ok {
			res.crash[i].logged, res.crash[i].loggedOK = at.Sub(m.ref), true
		}
	}
	for i, m := range marks.fast {
		if at, ok := firstEvent(evs, m.host, "primary", "", m.t0.Add(-time.Millisecond)); ok {
			res.fast[i].logged, res.fast[i].loggedOK = at.Sub(m.ref), true
		}
	}
	for i, m := range marks.switchover {
		if at, ok := firstEvent(evs, m.host, "", "primary", m.t0.Add(-time.Millisecond)); ok {
			res.switchover[i].logged, res.switchover[i].loggedOK = at.Sub(m.ref), true
		}
	}
}

// stop stops the primary with mode and measures until it is no longer
// answered; then starts it again as the primary.
func (w *failoverWorld) stop(ctx context.Context, mode string) (stopRep, []sample, error) {
	p := w.primary
	pid, err := p.PostmasterPID()
	if err != nil {
		return stopRep{}, nil, err
	}
	pl := dnspoll.Start(w.dnsAddr, "primary.db.local.", time.Millisecond, 200*time.Millisecond)
	time.Sleep(150 * time.Millisecond) // answers before
	exited := watchExit(pid)
	t0 := time.Now()
	if err := p.Stop(ctx, mode); err != nil {
		pl.Finish()
		return stopRep{}, nil, err
	}
	t1 := time.Now()
	exit := <-exited
	if exit.IsZero() {
		pl.Finish()
		return stopRep{}, nil, fmt.Errorf("postmaster %d never exited", pid)
	}
	time.Sleep(300 * time.Millisecond) // answers after
	polls := pl.Finish()
	w.check(polls, "stop -m "+mode, p.IP)
	last := dnspoll.LastWith(polls, p.IP)
	if len(polls) == 0 || slices.Contains(polls[len(polls)-1].IPs, p.IP) {
		return stopRep{}, nil, fmt.Errorf("%s still answered as primary 300ms after its postmaster exited", p.IP)
	}
	sr := stopRep{stopStarted: t0.Sub(exit), stopReturned: t1.Sub(exit), lastAnswered: last.Sub(exit)}
	m := repMarks{host: p.Addr(), t0: t0, ref: exit}
	if mode == "immediate" {
		w.marks.crash = append(w.marks.crash, m)
	} else {
		w.marks.fast = append(w.marks.fast, m)
	}
	tl := timeline(polls, exit, p.IP, "")
	if err := p.Start(ctx); err != nil {
		return sr, nil, err
	}
	return sr, tl, w.settle(ctx, t0)
}

// switchover stops the primary cleanly and promotes the replica, then
// measures until the new primary is answered; the old primary rejoins as
// its replica.
func (w *failoverWorld) switchover(ctx context.Context) (switchRep, []sample, error) {
	old, next := w.primary, w.replica
	pl := dnspoll.Start(w.dnsAddr, "primary.db.local.", time.Millisecond, 200*time.Millisecond)
	time.Sleep(150 * time.Millisecond)
	t0 := time.Now()
	if err := old.Stop(ctx, "fast"); err != nil {
		pl.Finish()
		return switchRep{}, nil, err
	}
	writable := watchWritable(ctx, next.DSN())
	p0 := time.Now()
	if err := next.Promote(ctx); err != nil {
		pl.Finish()
		return switchRep{}, nil, err
	}
	p1 := time.Now()
	wr := <-writable
	// Not answered within 5 s is reported from the polls below.
	testkit.Poll(5*time.Second, 20*time.Millisecond, func() bool {
		last, ok := pl.Latest()
		return ok && slices.Contains(last.IPs, next.IP)
	})
	time.Sleep(200 * time.Millisecond)
	polls := pl.Finish()
	w.check(polls, "switchover", old.IP, next.IP)
	first := dnspoll.FirstWith(polls, next.IP, p0)
	if first.IsZero() {
		return switchRep{}, nil, fmt.Errorf("the promoted %s was never answered as primary", next.IP)
	}
	sw := switchRep{promoteStarted: p0.Sub(p1), oldLeft: dnspoll.LastWith(polls, old.IP).Sub(p1), firstAnswered: first.Sub(p1)}
	if !wr.IsZero() {
		sw.writable = wr.Sub(p1)
	}
	w.marks.switchover = append(w.marks.switchover, repMarks{host: next.Addr(), t0: t0, ref: p1})
	tl := timeline(polls, p1, old.IP, next.IP)
	// The old primary is copied again from the new one and follows it.
	if err := old.Reclone(ctx, next); err != nil {
		return sw, nil, err
	}
	w.primary, w.replica = next, old
	return sw, tl, w.settle(ctx, t0)
}

// check records answers that are not allowed: a SERVFAIL, two primaries,
// or a host that is not one of allowed.
func (w *failoverWorld) check(polls []dnspoll.Answer, what string, allowed ...string) {
	for i, pl := range polls {
		if i > 0 {
			w.gaps = append(w.gaps, pl.At.Sub(polls[i-1].At))
		}
		bad := pl.Rcode != dns.RcodeSuccess || len(pl.IPs) > 1
		for _, ip := range pl.IPs {
			bad = bad || !slices.Contains(allowed, ip)
		}
		if bad {
			w.wrong = append(w.wrong, fmt.Sprintf("%s at %s: rcode %s, %v", what, pl.At.UTC().Format("15:04:05.000000"), dns.RcodeToString[pl.Rcode], pl.IPs))
		}
	}
}

// settle waits until pgdns answers the cluster as it now is, and until no
// flux episode of this fault can delay the next: an episode that ran its
// full 3s is followed by 3s during which none starts.
func (w *failoverWorld) settle(ctx context.Context, fault time.Time) error {
	if err := w.waitRoles(ctx); err != nil {
		return err
	}
	if time.Since(fault) > 2700*time.Millisecond {
		time.Sleep(time.Until(fault.Add(6300 * time.Millisecond)))
	} else {
		time.Sleep(300 * time.Millisecond)
	}
	return nil
}

// waitRoles waits (60s at most) until primary.db.local answers w.primary
// and replica.db.local w.replica.
func (w *failoverWorld) waitRoles(ctx context.Context) error {
	if testkit.Poll(60*time.Second, 20*time.Millisecond, func() bool {
		return ctx.Err() != nil ||
			slices.Equal(ask(w.dnsAddr, "primary.db.local."), []string{w.primary.IP}) &&
				slices.Equal(ask(w.dnsAddr, "replica.db.local."), []string{w.replica.IP})
	}) {
		return ctx.Err()
	}
	return fmt.Errorf("pgdns never answered primary %s and replica %s", w.primary.IP, w.replica.IP)
}

// ask returns the A records of name, nil on any error.
func ask(addr, name string) []string {
	req := new(dns.Msg)
	req.SetQuestion(name, dns.TypeA)
	m, _, err := (&dns.Client{Timeout: 300 * time.Millisecond}).Exchange(req, addr)
	if err != nil || m.Rcode != dns.RcodeSuccess {
		return nil
	}
	var ips []string
	for _, rr := range m.Answer {
		if a, ok := rr.(*dns.A); ok {
			ips = append(ips, a.A.String())
		}
	}
	return ips
}

// timeline turns polls into plot samples relative to ref.
func timeline(polls []dnspoll.Answer, ref time.Time, oldIP, newIP string) []sample {
	tl := make([]sample, 0, len(polls))
	for _, pl := range polls {
		st := 0
		switch {
		case slices.Contains(pl.IPs, oldIP):
			st = 2
		case newIP != "" && slices.Contains(pl.IPs, newIP):
			st = 1
		}
		tl = append(tl, sample{t: pl.At.Sub(ref), state: st})
	}
	return tl
}

// startLogged runs a server process with its output in logPath; it lives
// until the bench ends or stopProc.
func (b *bench) startLogged(logPath, name string, args ...string) (*exec.Cmd, error) {
	cmd := exec.Command(name, args...)
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	b.procs = append(b.procs, cmd)
	return cmd, nil
}

// keepLog copies a pgdns log out of the scratch directory, which the
// bench removes, to look at where the time went.
func keepLog(path string) {
	dir := filepath.Join(os.TempDir(), "pgdns-bench-logs")
	if err := os.MkdirAll(dir, 0o755); err == nil && copyFile(path, filepath.Join(dir, filepath.Base(path))) == nil {
		fmt.Fprintf(os.Stderr, "bench: pgdns log kept in %s\n", filepath.Join(dir, filepath.Base(path)))
	}
}

// metric reads one unlabelled value from pgdns's /metrics, NaN if absent.
func metric(httpAddr, name string) float64 {
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + httpAddr + "/metrics")
	if err != nil {
		return math.NaN()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var sum float64
	found := false
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, name+" ") || strings.HasPrefix(l, name+"{") {
			f := strings.Fields(l)
			if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
				sum, found = sum+v, true
			}
		}
	}
	if !found {
		return math.NaN()
	}
	return sum
}

func tailFile(path string, n int) string {
	b, _ := os.ReadFile(path)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// medianIndex is the index of the repetition whose key is the median.
func medianIndex[T any](reps []T, key func(T) time.Duration) int {
	idx := make([]int, len(reps))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return int(key(reps[a]) - key(reps[b])) })
	return idx[len(idx)/2]
}

// pct is the nearest-rank percentile of ds: with 20 values p99 is the
// largest.
func pct(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// plotFailover draws the median crash and the median switchover with
// gnuplot: what primary.db.local answered, one sample per poll.
func plotFailover(dir string, res *failoverResult) (string, error) {
	if _, err := exec.LookPath("gnuplot"); err != nil {
		return "", err
	}
	write := func(name string, tl []sample) (string, error) {
		var d strings.Builder
		for _, s := range tl {
			fmt.Fprintf(&d, "%.3f %d\n", float64(s.t.Microseconds())/1000, s.state)
		}
		p := filepath.Join(dir, name)
		return p, writeFile(p, d.String())
	}
	crash, err := write("failover-crash.dat", res.plotCrash)
	if err != nil {
		return "", err
	}
	sw, err := write("failover-switchover.dat", res.plotSwitch)
	if err != nil {
		return "", err
	}
	msf := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	c := res.crash[medianIndex(res.crash, func(s stopRep) time.Duration { return s.lastAnswered })]
	ss := res.switchover[medianIndex(res.switchover, func(s switchRep) time.Duration { return s.firstAnswered })]
	png := filepath.Join(dir, "failover.png")
	script := fmt.Sprintf(`set terminal pngcairo size 900,560 font "sans,10"
set output %q
set multiplot layout 2,1
set grid xtics
set yrange [-0.5:2.5]
set title "crash: pg_ctl stop -m immediate of the primary, no promotion (median of %d; probe.interval 250ms)" noenhanced
set xlabel "ms since the postmaster exited" noenhanced
set ytics ("nobody" 0, "old primary" 2)
set xrange [-320:320]
set arrow 1 from 0, graph 0 to 0, graph 1 nohead lc rgb "red" dt 2
set arrow 2 from %.3f, graph 0 to %.3f, graph 1 nohead lw 1.5 lc rgb "#888888" dt 2
set label 1 "postmaster exits" at 3, 2.3 tc rgb "red" noenhanced
set label 2 "pg_ctl stop started" at %.3f, 1.3 right tc rgb "#666666" noenhanced
plot %q using 1:2 with steps lw 2 lc rgb "#1f77b4" notitle
unset arrow 1
unset arrow 2
unset label 1
unset label 2
set title "switchover: pg_ctl stop -m fast, then pg_ctl promote of the replica (median of %d)" noenhanced
set xlabel "ms since pg_ctl promote returned" noenhanced
set ytics ("nobody" 0, "new primary" 1, "old primary" 2)
set xrange [*:250]
set arrow 3 from 0, graph 0 to 0, graph 1 nohead lc rgb "red" dt 2
set arrow 4 from %.3f, graph 0 to %.3f, graph 1 nohead lw 1.5 lc rgb "#888888" dt 2
set arrow 5 from %.3f, graph 0 to %.3f, graph 1 nohead lw 1.5 lc rgb "dark-green" dt 2
set label 3 "pg_ctl promote returned" at 3, 2.3 tc rgb "red" noenhanced
set label 4 "pg_ctl promote started" at %.3f, 1.7 right tc rgb "#666666" noenhanced
set label 5 "writable" at %.3f, 0.5 right tc rgb "dark-green" noenhanced
plot %q using 1:2 with steps lw 2 lc rgb "#1f77b4" notitle
unset multiplot
`, png, len(res.crash), msf(c.stopStarted), msf(c.stopStarted), msf(c.stopStarted)-3, crash,
		len(res.switchover), msf(ss.promoteStarted), msf(ss.promoteStarted), msf(ss.writable), msf(ss.writable),
		msf(ss.promoteStarted)-3, msf(ss.writable)-3, sw)
	sp := filepath.Join(dir, "failover.gp")
	if err := writeFile(sp, script); err != nil {
		return "", err
	}
	if out, err := exec.Command("gnuplot", sp).CombinedOutput(); err != nil {
		return "", fmt.Errorf("gnuplot: %w: %s", err, out)
	}
	return png, nil
}
