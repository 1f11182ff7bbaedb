package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// scaleSize is one point of the scale series: how many hosts (the three
// real servers, fakes for the rest), probed how often.
type scaleSize struct {
	hosts    int
	interval time.Duration
}

// defaultScaleSizes is the series `make bench` measures (-scale-hosts):
// 100, 1,000 and 3,000 hosts at the default 250 ms, 10,000 at 1 s.
const defaultScaleSizes = "100,1000,3000,10000@1s"

// The scale step's measuring, per size: after every host is a live
// replica or the primary, scaleSettle (beyond the 3 s a flux episode of
// the start lasts, and a /metrics page's garbage), then scaleWindows windows of scaleWindow of pgdns's
// CPU time. At the largest size the mixed query set's queries/s is
// measured scaleDNSRounds times beside the pgdns of 3 hosts, in turns.
const (
	scaleSettle    = 4 * time.Second
	scaleWindows   = 3
	scaleWindow    = 10 * time.Second
	scaleDNSRounds = 2
	scaleReadyIn   = 3 * time.Minute // most a size waits for every host to be live before it is measured all the same
	scalePprofAt   = 1000            // the size whose profiles -pprof takes, when the series has it (pprofSize)
)

// pprofSize is the size of sizes whose profiles -pprof takes: 1,000 hosts
// when the series has it (the default series), otherwise the largest asked
// (-scale-hosts 10000@1s profiles 10,000 hosts, not none).
func pprofSize(sizes []scaleSize) int {
	largest := 0
	for _, s := range sizes {
		if s.hosts == scalePprofAt {
			return scalePprofAt
		}
		largest = max(largest, s.hosts)
	}
	return largest
}

// parseScaleSizes reads -scale-hosts: host counts separated by commas,
// each followed by @interval when it is not probed every 250ms.
func parseScaleSizes(s string, realHosts int) ([]scaleSize, error) {
	var out []scaleSize
	for _, f := range strings.Split(s, ",") {
		n, iv, hasIv := strings.Cut(strings.TrimSpace(f), "@")
		hosts, err := strconv.Atoi(n)
		if err != nil || hosts <= realHosts || hosts-realHosts > pgtest.FleetSize {
			return nil, fmt.Errorf("-scale-hosts %q: %q is not a number of hosts from %d to %d", s, n, realHosts+1, realHosts+pgtest.FleetSize)
		}
		size := scaleSize{hosts: hosts, interval: 250 * time.Millisecond}
		if hasIv {
			if size.interval, err = time.ParseDuration(iv); err != nil || size.interval < 10*time.Millisecond {
				return nil, fmt.Errorf("-scale-hosts %q: %q is not a probe interval of at least 10ms", s, iv)
			}
		}
		out = append(out, size)
	}
	return out, nil
}

// scalePoint is what one size of the series measured.
type scalePoint struct {
	hosts, fakes  int
	clusters      int // the fakes' clusters (fakeClusters)
	interval      time.Duration
	readyIn       time.Duration      // from pgdns's start until every host was a live replica or the primary
	notReady      string             // "5,003 of 10,000 live after 3m0s" when they were not, or ""
	liveAfter     int                // hosts live right after the windows
	fakeProbes    int64              // probe statements the fakes ran over span
	probesPerSec  float64            // probes done: the fakes', for every host
	fluxPerSec    float64            // of those, probes asked for beyond the interval (pgdns_flux_probes_total)
	why           map[string]float64 // probes/s by why they were made (pgdns_probes_total), nil without it
	metricsPerSec float64            // probes done by /metrics (pgdns_probe_duration_seconds_count, around span)
	metricsErr    string             // why /metrics was not read, or ""
	page          int                // bytes of the /metrics page after the windows
	pageTook      time.Duration      // how long it took to read
	span          time.Duration      // the windows, end to end
	cpu           time.Duration      // pgdns's CPU time over span (schedstat)
	cpuTicks      time.Duration      // the same from /proc/PID/stat, threads that exited included
	shares        []float64          // percent of one core, per window
	mallocs       float64            // heap allocations over span
	rss           int64              // KiB, at the end
	heapInuse     float64            // bytes, MemStats.HeapInuse
	goroutines    float64
	fakeProcs     int           // the fakes' processes (fakesPerProc each at most)
	fakeCPU       time.Duration // their CPU time over span, together
	fakeRSS       int64         // KiB, together
	p50, p99      time.Duration // answer latency at 5,000 queries/s
}

// configured is the probes per second the configuration asks for.
func (p scalePoint) configured() float64 { return float64(p.hosts) / p.interval.Seconds() }

// probes is how many probes were done over the windows.
func (p scalePoint) probes() float64 { return p.probesPerSec * p.span.Seconds() }

// perProbe is pgdns's CPU time per probe done.
func (p scalePoint) perProbe() time.Duration {
	if p.probes() <= 0 {
		return 0
	}
	return time.Duration(float64(p.cpu) / p.probes())
}

// share is pgdns's CPU time as a percentage of one core.
func (p scalePoint) share() float64 { return pctOfCore(p.cpu, p.span) }

// fakeShare is the fakes' processes', the same way.
func (p scalePoint) fakeShare() float64 { return pctOfCore(p.fakeCPU, p.span) }

// allocsPerProbe is pgdns's heap allocations per probe done (everything
// it allocated meanwhile: nothing else asked it anything).
func (p scalePoint) allocsPerProbe() float64 {
	if p.probes() <= 0 {
		return 0
	}
	return p.mallocs / p.probes()
}

// rateKept is the probes done as a share of the probes configured.
func (p scalePoint) rateKept() float64 { return p.probesPerSec / p.configured() }

func pctOfCore(cpu, span time.Duration) float64 {
	if span <= 0 {
		return 0
	}
	return cpu.Seconds() / span.Seconds() * 100
}

// scaleDNS is the mixed query set's queries/s at the largest size of the
// series beside the same figure of the pgdns of 3 hosts, in turns.
type scaleDNS struct {
	hosts         int
	interval      time.Duration
	duration      time.Duration
	small, large  []float64 // queries/s per round: 3 hosts, hosts
	probesPerSec  float64   // the large one's probes/s meanwhile
	configuredPer float64
	answers       []mixAnswer // the large one's answer to each name of the mix, asked once over UDP before the rounds
}

// mixAnswer is what the large pgdns answered one name of the mixed set,
// asked once over UDP as dnsperf asks it: what the report says of the
// answers the rounds measure is read here, not assumed.
type mixAnswer struct {
	name      string
	rcode     string
	records   int  // A records in the answer section
	truncated bool // TC set: a UDP client would ask again over TCP
}

// askMix asks addr each of names once over UDP (no EDNS, as dnsperf's
// query file asks) and returns what came back.
func askMix(addr string, names []string) ([]mixAnswer, error) {
	var out []mixAnswer
	for _, name := range names {
		req := new(dns.Msg)
		req.SetQuestion(dns.Fqdn(name), dns.TypeA)
		m, _, err := (&dns.Client{Net: "udp", Timeout: 2 * time.Second}).Exchange(req, addr)
		if err != nil { // a truncated answer is no error: it comes back with TC set

			return nil, fmt.Errorf("%s at %s: %w", name, addr, err)
		}
		a := mixAnswer{name: strings.TrimSuffix(dns.Fqdn(name), "."), rcode: dns.RcodeToString[m.Rcode], truncated: m.Truncated}
		for _, rr := range m.Answer {
			if _, ok := rr.(*dns.A); ok {
				a.records++
			}
		}
		out = append(out, a)
	}
	return out, nil
}

// scaleResult is the scale step: the 3 real hosts at rest, then the
// series.
type scaleResult struct {
	stamp           stamp
	realHosts       int
	rss3Idle        int64 // KiB, before any load
	rss3            int64 // KiB, after the load steps (0 when scale ran alone)
	points          []scalePoint
	windows         int
	window          time.Duration
	dns             *scaleDNS
	cpuTop, heapTop string // pprof -top summaries, when -pprof is given
	pprofHosts      int
	plot            string // the plot's file name, "" when none was drawn
}

func (b *bench) scale(ctx context.Context, r *report) error {
	res := &scaleResult{stamp: b.stampNow(), realHosts: len(b.pg.Nodes), rss3Idle: b.rssIdle, windows: scaleWindows, window: scaleWindow}
	began := time.Now()
	sizes, err := parseScaleSizes(b.cfg.scaleHosts, res.realHosts)
	if err != nil {
		return err
	}
	if res.rss3, err = rssKiB(b.pgdnsPID); err != nil {
		return err
	}
	largest := slices.MaxFunc(sizes, func(a, b scaleSize) int { return a.hosts - b.hosts })
	// pgdns holds a socket per host, a fakes' process a listener and an
	// accepted connection per fake; the rest is headroom.
	if err := raiseNoFile(uint64(max(largest.hosts, 2*min(largest.hosts, fakesPerProc)) + 1024)); err != nil {
		return err
	}
	if b.lsn == "" {
		if err := b.takeLSN(ctx); err != nil {
			return err
		}
	}
	// The fakes learn their answer from a replica when they start: one
	// that has replayed the mixed set's LSN answers lsn- names too.
	if err := waitDNS(b.addr.pgdnsDNS, b.lsnName()+".db.local.", 2, 10*time.Second); err != nil {
		return err
	}
	mixed := filepath.Join(b.dir, "queries-mixed.txt")
	if err := writeFile(mixed, strings.Join(b.queryNames(), " A\n")+" A\n"); err != nil {
		return err
	}
	res.pprofHosts = pprofSize(sizes)
	for _, size := range sizes {
		fmt.Fprintf(os.Stderr, "bench: scale, %d hosts every %v (load average %s)\n", size.hosts, size.interval, loadAverage())
		var dnsAt *scaleDNS
		if size == largest && res.dns == nil {
			dnsAt = &scaleDNS{hosts: size.hosts, interval: size.interval, duration: b.cfg.dnsTime}
		}
		p, err := b.scaleAt(ctx, res, size, mixed, dnsAt)
		if err != nil {
			return fmt.Errorf("%d hosts: %w", size.hosts, err)
		}
		res.points = append(res.points, p)
		if dnsAt != nil {
			res.dns = dnsAt
		}
	}
	res.stamp.took = time.Since(began)
	if png, err := plotScale(b.dir, res); err != nil {
		fmt.Fprintln(os.Stderr, "bench: no scale plot:", err)
	} else {
		b.scalePlot, res.plot = png, filepath.Base(png)
	}
	r.scale = res
	return nil
}

// scaleAt measures one size: the fakes' processes and a pgdns of their
// own, all stopped at the end.
func (b *bench) scaleAt(ctx context.Context, res *scaleResult, size scaleSize, mixed string, dnsAt *scaleDNS) (scalePoint, error) {
	p := scalePoint{hosts: size.hosts, fakes: size.hosts - res.realHosts, interval: size.interval}
	hosts := make([]string, 0, size.hosts)
	for _, n := range b.pg.Nodes {
		hosts = append(hosts, n.Addr())
	}
	for i := range p.fakes {
		hosts = append(hosts, b.addr.fleet(i)+":5432")
	}
	tag := strconv.Itoa(size.hosts)
	fakes, err := b.startFakes(hosts[res.realHosts:], tag)
	defer func() {
		for _, f := range fakes {
			b.stopProc(f)
		}
	}()
	if err != nil {
		return p, err
	}
	p.fakeProcs = len(fakes)
	path := filepath.Join(b.dir, "pgdns-"+tag+".yaml")
	if err := writeFile(path, scaleConfig(b.addr.bigDNS, b.addr.bigHTTP, size.interval, b.cfg.scaleAdmission, hosts[:res.realHosts], hosts[res.realHosts:])); err != nil {
		return p, err
	}
	log := filepath.Join(b.dir, "pgdns-scale-"+tag+".log")
	start := time.Now()
	cmd, err := b.startLogged(log, b.pgdns, "-config", path)
	if err != nil {
		return p, err
	}
	defer b.stopProc(cmd)
	defer keepLog(log)
	pid := cmd.Process.Pid
	// A pgdns that cannot keep every host live (a machine too loaded for
	// the size) is measured all the same, and the report says so.
	live, ok := waitReplicas(b.addr.bigHTTP, size.hosts, scaleReadyIn)
	p.readyIn = time.Since(start)
	if !ok {
		p.notReady = fmt.Sprintf("%s of %s live after %v", thousands(live), thousands(size.hosts), scaleReadyIn)
		fmt.Fprintf(os.Stderr, "bench: scale, %s; measuring all the same\n", p.notReady)
	}
	// The fleet must be what it models: every fake cluster a primary
	// and its replicas, all answered. A fake pgdns does not take for
	// such (a proof that fails) would measure something else: the run
	// stops here, saying which.
	// A fleet not all live (a machine too loaded for the size, above) is
	// measured as it is, and said so.
	if ok {
		if err := checkFleet(b.addr.bigHTTP, len(fakeClusters(p.fakes)), p.fakes, scaleReadyIn); err != nil {
			return p, fmt.Errorf("the fake fleet: %w (pgdns log %s)", err, log)
		}
	}
	p.clusters = len(fakeClusters(p.fakes))

	// The probes are counted where they are answered, by the fakes'
	// processes, at the edges of the windows. pgdns's /metrics, whose
	// page grows with the hosts (a histogram each: tens of MiB at
	// 10,000), is read outside the windows, for the probes by why and
	// as a cross-check: before the settling time, which lets the page's
	// garbage be collected, and after the windows.
	before, metricsErr := scrapeFigures(b.addr.bigHTTP)
	time.Sleep(scaleSettle)
	m0, err := mallocsSince(b.addr.bigHTTP)
	if err != nil {
		return p, err
	}
	c0, err := fakeCounts(len(fakes), b.addr.fakeControl)
	if err != nil {
		return p, err
	}
	t0, err := cpuTime(pid)
	if err != nil {
		return p, err
	}
	k0, _ := cpuTicks(pid)
	f0, err := cpuTimes(fakes)
	if err != nil {
		return p, err
	}
	w0 := time.Now()
	last, lastAt := t0, w0
	for range res.windows {
		time.Sleep(res.window)
		t, err := cpuTime(pid)
		if err != nil {
			return p, err
		}
		now := time.Now()
		p.shares = append(p.shares, pctOfCore(t-last, now.Sub(lastAt)))
		last, lastAt = t, now
	}
	c1, err := fakeCounts(len(fakes), b.addr.fakeControl)
	if err != nil {
		return p, err
	}
	f1, err := cpuTimes(fakes)
	if err != nil {
		return p, err
	}
	k1, _ := cpuTicks(pid)
	p.span, p.cpu, p.cpuTicks, p.fakeCPU = lastAt.Sub(w0), last-t0, time.Duration(k1-k0)*10*time.Millisecond, f1-f0
	if p.mallocs, err = m0(); err != nil {
		return p, err
	}
	// The 3 real hosts are probed as often as the fakes are.
	p.fakeProbes = c1 - c0
	p.probesPerSec = float64(p.fakeProbes) * float64(p.hosts) / float64(p.fakes) / p.span.Seconds()
	if p.probesPerSec <= 0 {
		return p, fmt.Errorf("the fakes counted no probes (%d, then %d)", c0, c1)
	}
	after, err := scrapeFigures(b.addr.bigHTTP)
	if metricsErr == nil {
		metricsErr = err
	}
	p.page, p.pageTook = after.bytes, after.took
	if metricsErr != nil {
		p.metricsErr = metricsErr.Error()
	} else {
		between := after.at.Sub(before.at).Seconds()
		p.metricsPerSec = (after.probes - before.probes) / between
		p.fluxPerSec = (after.flux - before.flux) / between
		if len(after.why) > 0 {
			p.why = map[string]float64{}
			for k, v := range after.why {
				p.why[k] = (v - before.why[k]) / between
			}
		}
	}
	if p.liveAfter, err = liveHosts(b.addr.bigHTTP); err != nil {
		return p, err
	}
	ms, err := readMemStats(b.addr.bigHTTP)
	if err != nil {
		return p, err
	}
	p.heapInuse = ms.heapInuse
	if p.goroutines, err = readGoroutines(b.addr.bigHTTP); err != nil {
		return p, err
	}
	if p.rss, err = rssKiB(pid); err != nil {
		return p, err
	}
	for _, f := range fakes {
		rss, err := rssKiB(f.Process.Pid)
		if err != nil {
			return p, err
		}
		p.fakeRSS += rss
	}
	if b.cfg.pprofDir != "" && size.hosts == res.pprofHosts {
		if res.cpuTop, res.heapTop, err = takeProfiles(b.addr.bigHTTP, b.cfg.pprofDir, b.pgdns); err != nil {
			return p, err
		}
	}
	queries := filepath.Join(b.dir, "queries-latency.txt")
	if err := writeFile(queries, "primary.db.local A\nlag-50ms.replica.db.local A\n"); err != nil {
		return p, err
	}
	if p.p50, p.p99, err = dnsperfLatency(ctx, b.addr.bigDNS, queries); err != nil {
		return p, err
	}
	if dnsAt != nil {
		if dnsAt.answers, err = askMix(b.addr.bigDNS, b.queryNames()); err != nil {
			return p, err
		}
		n0, err := fakeCounts(len(fakes), b.addr.fakeControl)
		if err != nil {
			return p, err
		}
		began := time.Now()
		for round := range scaleDNSRounds {
			for _, t := range []struct {
				qps  *[]float64
				addr string
			}{{&dnsAt.small, b.addr.pgdnsDNS}, {&dnsAt.large, b.addr.bigDNS}} {
				fmt.Fprintf(os.Stderr, "bench: scale, mixed set round %d/%d on %s\n", round+1, scaleDNSRounds, t.addr)
				q, err := dnsperfThroughput(ctx, t.addr, mixed, dnsAt.duration)
				if err != nil {
					return p, err
				}
				*t.qps = append(*t.qps, q)
			}
		}
		n1, err := fakeCounts(len(fakes), b.addr.fakeControl)
		if err != nil {
			return p, err
		}
		dnsAt.probesPerSec = float64(n1-n0) * float64(p.hosts) / float64(p.fakes) / time.Since(began).Seconds()
		dnsAt.configuredPer = p.configured()
	}
	return p, nil
}

// fakesPerProc is the most fakes one process serves: two descriptors
// each (a listener, the connection it accepted) stay under a limit of
// 20,000 open files, which a root without CAP_SYS_RESOURCE cannot raise.
const fakesPerProc = 5000

// startFakes runs the fakes on addrs, fakesPerProc to a process, in
// clusters of 3 (fakeClusters: a primary answering as the real primary
// does, two replicas as the first real replica does, each a server of
// its own: fake i of addrs is numbered i whichever process serves it,
// every process reading the whole list), and waits until each
// process's last address accepts. It returns the processes started, also
// with an error.
func (b *bench) startFakes(addrs []string, tag string) ([]*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var procs []*exec.Cmd
	list := filepath.Join(b.dir, "fakes-"+tag+".txt")
	if err := writeFile(list, strings.Join(addrs, "\n")+"\n"); err != nil {
		return procs, err
	}
	for i := 0; i < len(addrs); i += fakesPerProc {
		chunk := addrs[i:min(i+fakesPerProc, len(addrs))]
		name := fmt.Sprintf("fakes-%s-%d", tag, len(procs)+1)
		log := filepath.Join(b.dir, name+".log")
		fake, err := b.startLogged(log, self, "fakepg", "-addrs", list, "-dsn", b.pg.Nodes[1].DSN(), "-primary-dsn", b.pg.Nodes[0].DSN(),
			"-first", strconv.Itoa(i), "-n", strconv.Itoa(len(chunk)), "-control", b.addr.fakeControl(len(procs)))
		if err != nil {
			return procs, err
		}
		procs = append(procs, fake)
		last := chunk[len(chunk)-1]
		if !testkit.Poll(time.Minute, 50*time.Millisecond, func() bool {
			c, err := net.Dial("tcp", last)
			if err == nil {
				c.Close()
			}
			return err == nil
		}) {
			return procs, fmt.Errorf("the fake replicas did not start:\n%s", tailFile(log, 2000))
		}
	}
	return procs, nil
}

// cpuTimes is cpuTime of every process, together.
func cpuTimes(procs []*exec.Cmd) (time.Duration, error) {
	var sum time.Duration
	for _, p := range procs {
		t, err := cpuTime(p.Process.Pid)
		if err != nil {
			return 0, err
		}
		sum += t
	}
	return sum, nil
}

// pageFigures are the figures the scale step reads from one page of
// pgdns's /metrics, and when: the middle of the request.
type pageFigures struct {
	at           time.Time
	probes, flux float64
	why          map[string]float64 // pgdns_probes_total by why, over the clusters; nil without it
	bytes        int                // the page's size
	took         time.Duration      // reading it
}

// scrapeFigures reads pageFigures; the page's size and time are those of
// the last try, also when it failed.
func scrapeFigures(httpAddr string) (pageFigures, error) {
	var (
		f    pageFigures
		page string
		err  error
	)
	for range 3 { // a loaded machine may cut a page this long short
		t0 := time.Now()
		page, err = scrapePage(httpAddr)
		f.took, f.bytes = time.Since(t0), len(page)
		f.at = t0.Add(f.took / 2)
		if err == nil {
			break
		}
	}
	if err != nil {
		return f, err
	}
	for _, m := range []struct {
		v    *float64
		name string
	}{{&f.probes, "pgdns_probe_duration_seconds_count"}, {&f.flux, "pgdns_flux_probes_total"}} {
		if *m.v, err = metricSum(page, m.name); err != nil {
			return f, err
		}
	}
	f.why, err = probesByWhy(page)
	return f, err
}

// probesByWhy sums pgdns_probes_total{cluster,why} over the clusters, by
// why: nil when pgdns has no such metric (a build before it).
func probesByWhy(page string) (map[string]float64, error) {
	var why map[string]float64
	for _, l := range strings.Split(page, "\n") {
		rest, ok := strings.CutPrefix(l, "pgdns_probes_total{")
		if !ok {
			continue
		}
		_, w, ok := strings.Cut(rest, `why="`)
		if !ok {
			return nil, fmt.Errorf("/metrics: %q has no why", l)
		}
		w, _, _ = strings.Cut(w, `"`)
		f := strings.Fields(l)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return nil, fmt.Errorf("/metrics: %q: %w", l, err)
		}
		if why == nil {
			why = map[string]float64{}
		}
		why[w] += v
	}
	return why, nil
}

// fakeCounts adds up the probe statements the n fakes' processes ran.
func fakeCounts(n int, control func(k int) string) (int64, error) {
	var sum int64
	for k := range n {
		c, err := fakeProbes(control(k))
		if err != nil {
			return 0, err
		}
		sum += c
	}
	return sum, nil
}

// mallocsSince starts counting pgdns's heap allocations; the function it
// returns says how many were made since. They are read from the Go
// runtime's MemStats that /debug/pprof/allocs?debug=1 ends with: unlike
// /metrics, whose page grows with the hosts, that read costs about the
// same at any size. It allocates too (the request, the profile's records
// before MemStats is read): two reads back to back at the start measure
// that, and it is taken off.
func mallocsSince(httpAddr string) (func() (float64, error), error) {
	a, err := readMemStats(httpAddr)
	if err != nil {
		return nil, err
	}
	b, err := readMemStats(httpAddr)
	if err != nil {
		return nil, err
	}
	return func() (float64, error) {
		c, err := readMemStats(httpAddr)
		return c.mallocs - b.mallocs - (b.mallocs - a.mallocs), err
	}, nil
}

// memStats are the runtime.MemStats figures the scale step reads.
type memStats struct{ mallocs, heapInuse float64 }

// readMemStats reads the MemStats of the pgdns serving httpAddr.
func readMemStats(httpAddr string) (memStats, error) {
	body, err := debugPage(httpAddr, "/debug/pprof/allocs?debug=1")
	if err != nil {
		return memStats{}, err
	}
	return parseMemStats(body)
}

// readGoroutines reads how many goroutines the pgdns serving httpAddr
// has ("goroutine profile: total N").
func readGoroutines(httpAddr string) (float64, error) {
	body, err := debugPage(httpAddr, "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(body, "\n")
	n, ok := strings.CutPrefix(first, "goroutine profile: total ")
	if !ok {
		return 0, fmt.Errorf("/debug/pprof/goroutine?debug=1 begins %q", first)
	}
	return strconv.ParseFloat(strings.TrimSpace(n), 64)
}

// debugPage reads a page of pgdns's /debug/pprof/.
func debugPage(httpAddr, path string) (string, error) {
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get("http://" + httpAddr + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", path, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// parseMemStats finds "# Mallocs = N" and "# HeapInuse = N" in a heap
// profile's text form.
func parseMemStats(profile string) (memStats, error) {
	var ms memStats
	found := 0
	for _, l := range strings.Split(profile, "\n") {
		for _, f := range []struct {
			v      *float64
			prefix string
		}{{&ms.mallocs, "# Mallocs = "}, {&ms.heapInuse, "# HeapInuse = "}} {
			if v, ok := strings.CutPrefix(l, f.prefix); ok {
				n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil {
					return ms, fmt.Errorf("%q: %w", l, err)
				}
				*f.v = n
				found++
			}
		}
	}
	if found != 2 {
		return ms, fmt.Errorf("/debug/pprof/allocs?debug=1: no \"# Mallocs = \" and \"# HeapInuse = \" lines")
	}
	return ms, nil
}

// waitReplicas polls pgdns's /v1/hosts until want of its hosts are live
// (DNS cannot tell past a few thousand: an answer holds 64 KiB), at most
// for timeout; it returns the last count and whether it got there. The
// page grows with the hosts: it is read every 0.3 ms per host, at least
// every second.
func waitReplicas(httpAddr string, want int, timeout time.Duration) (int, bool) {
	got, said := 0, time.Now()
	ok := testkit.Poll(timeout, max(time.Second, time.Duration(want)*300*time.Microsecond), func() bool {
		n, err := liveHosts(httpAddr)
		if err != nil {
			return false
		}
		got = n
		if time.Since(said) > 15*time.Second {
			fmt.Fprintf(os.Stderr, "bench: scale, %d of %d hosts live\n", got, want)
			said = time.Now()
		}
		return got >= want
	})
	return got, ok
}

// liveHosts counts the hosts pgdns's /v1/hosts says are live replicas or
// primaries.
func liveHosts(httpAddr string) (int, error) {
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get("http://" + httpAddr + "/v1/hosts")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var body struct {
		Hosts []struct {
			Role  string `json:"role"`
			Alive bool   `json:"alive"`
		} `json:"hosts"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, fmt.Errorf("/v1/hosts: %w", err)
	}
	n := 0
	for _, h := range body.Hosts {
		if h.Alive && (h.Role == "replica" || h.Role == "primary") {
			n++
		}
	}
	return n, nil
}

// takeLSN writes on the primary and keeps the LSN, for the mixed query
// set's lsn- name.
func (b *bench) takeLSN(ctx context.Context) error {
	conn, err := pgxConnect(ctx, b.pg.Nodes[0].DSN())
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS bench (id bigserial PRIMARY KEY, v text)"); err != nil {
		return err
	}
	return conn.QueryRow(ctx, "SELECT lower(replace(pg_current_wal_insert_lsn()::text, '/', '-'))").Scan(&b.lsn)
}

// takeProfiles saves an 8 s CPU profile and a heap profile of the pgdns
// serving httpAddr (its /debug/pprof/, loopback only) in dir, and returns
// the top entries of each as `go tool pprof -top` prints them.
func takeProfiles(httpAddr, dir, bin string) (cpuTop, heapTop string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	get := func(path, file string) error {
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Get("http://" + httpAddr + path)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", path, resp.Status)
		}
		f, err := os.Create(file)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(f, resp.Body)
		return err
	}
	cpuFile, heapFile := filepath.Join(dir, "scale-cpu.pprof"), filepath.Join(dir, "scale-heap.pprof")
	if err := get("/debug/pprof/profile?seconds=8", cpuFile); err != nil {
		return "", "", err
	}
	if err := get("/debug/pprof/heap", heapFile); err != nil {
		return "", "", err
	}
	top := func(args ...string) (string, error) {
		out, err := exec.Command("go", append([]string{"tool", "pprof", "-top", "-nodecount=15"}, args...)...).Output()
		return string(out), err
	}
	if cpuTop, err = top(bin, cpuFile); err != nil {
		return "", "", fmt.Errorf("go tool pprof: %w", err)
	}
	if heapTop, err = top("-sample_index=inuse_space", bin, heapFile); err != nil {
		return "", "", fmt.Errorf("go tool pprof: %w", err)
	}
	return cpuTop, heapTop, nil
}

// scrapeSum sums the samples of the metric name on pgdns's /metrics.
func scrapeSum(httpAddr, name string) (n float64, err error) {
	for range 3 { // a loaded machine may cut a page this long short
		if n, err = scrapeOnce(httpAddr, name); err == nil {
			return n, nil
		}
	}
	return 0, err
}

func scrapeOnce(httpAddr, name string) (float64, error) {
	return scrapeWith(&http.Client{Timeout: 30 * time.Second}, httpAddr, name)
}

// scrapeWith is scrapeOnce with client.
func scrapeWith(client *http.Client, httpAddr, name string) (float64, error) {
	body, err := scrapePageWith(client, httpAddr)
	if err != nil {
		return 0, err
	}
	return metricSum(body, name)
}

// metricSum sums the samples of the metric name on a /metrics page.
func metricSum(page, name string) (float64, error) {
	var sum float64
	for _, l := range strings.Split(page, "\n") {
		if strings.HasPrefix(l, name+"{") || strings.HasPrefix(l, name+" ") {
			f := strings.Fields(l)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				return 0, fmt.Errorf("/metrics: %q: %w", l, err)
			}
			sum += v
		}
	}
	return sum, nil
}

// scrapePage reads pgdns's /metrics page whole.
func scrapePage(httpAddr string) (string, error) {
	return scrapePageWith(&http.Client{Timeout: 30 * time.Second}, httpAddr)
}

func scrapePageWith(client *http.Client, httpAddr string) (string, error) {
	resp, err := client.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("/metrics: %w", err)
	}
	return string(body), nil
}
