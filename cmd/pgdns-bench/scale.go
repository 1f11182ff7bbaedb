package main

import (
	"context"
	"errors"
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

	"github.com/pgdns/pgdns/internal/testkit"
)

// scaleResult: memory and CPU of pgdns with 3 and with 1,000 hosts.
type scaleResult struct {
	stamp            stamp
	rss3Idle         int64           // KiB, before any load
	rss3, rss1000    int64           // KiB, after the load steps (rss3: 0 when scale ran alone)
	cpuTotal         float64         // percent of one core, 1,000 hosts, median window
	cpuPerProbe      []time.Duration // CPU time of pgdns per probe done, per window
	probesPerSec     float64
	heapInuse        float64 // bytes, go_memstats_heap_inuse_bytes at 1,000 hosts
	goroutines       float64
	p50, p99         time.Duration
	readyIn          time.Duration
	realHosts, fakes int
	interval         string
	windows          int
	window           time.Duration
	cpuTop, heapTop  string  // pprof -top summaries, when -pprof is given
	fakeCPU          float64 // percent of one core the fakes' process used over the windows
}

// rssKiB reads a process's resident set size.
func rssKiB(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			return strconv.ParseInt(strings.Fields(v)[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmRSS")
}

// cpuTicks reads a process's user+system CPU time in clock ticks (1/100 s).
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+2:])
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s, nil
}

func (b *bench) scale(ctx context.Context, r *report) error {
	res := &scaleResult{stamp: b.stampNow(), realHosts: 3, interval: "250ms", rss3Idle: b.rssIdle}
	var err error
	if res.rss3, err = rssKiB(b.pgdnsPID); err != nil {
		return err
	}

	// 997 fake replicas beside the 3 real servers, on addresses of the
	// run's block, each answering the probe as the first real replica
	// does.
	res.fakes = 997
	hosts := make([]string, 0, res.realHosts+res.fakes)
	for _, n := range b.pg.Nodes {
		hosts = append(hosts, n.Addr())
	}
	for i := range res.fakes {
		hosts = append(hosts, b.addr.fleet(i)+":5432")
	}
	fakeList := filepath.Join(b.dir, "fakes.txt")
	if err := writeFile(fakeList, strings.Join(hosts[res.realHosts:], "\n")+"\n"); err != nil {
		return err
	}
	self, _ := os.Executable()
	fake, err := b.start(self, []string{"fakepg", "-addrs", fakeList, "-dsn", b.pg.Nodes[1].DSN()})
	if err != nil {
		return err
	}
	if !testkit.Poll(30*time.Second, 50*time.Millisecond, func() bool {
		c, err := net.Dial("tcp", hosts[len(hosts)-1])
		if err == nil {
			c.Close()
		}
		return err == nil
	}) {
		return fmt.Errorf("fake replicas did not start")
	}
	path := filepath.Join(b.dir, "pgdns-1000.yaml")
	if err := writeFile(path, fmt.Sprintf("dns: {listen: %q}\nhttp: {listen: %q}\nprobe: {interval: %s, dsn: \"user=postgres dbname=postgres sslmode=disable\"}\nclusters:\n  main:\n    hosts: [%s]\n",
		b.addr.bigDNS, b.addr.bigHTTP, res.interval, strings.Join(hosts, ", "))); err != nil {
		return err
	}
	start := time.Now()
	cmd, err := b.start(b.pgdns, []string{"-config", path})
	if err != nil {
		return err
	}
	defer b.stopProc(cmd)
	// Every replica answered; not lag-50ms: on a loaded machine a few
	// fakes' lag bounds may stay above 50 ms for long.
	if err := waitDNSTCP(b.addr.bigDNS, "replica.db.local.", res.realHosts-1+res.fakes, 3*time.Minute); err != nil {
		return err
	}
	res.readyIn = time.Since(start)
	time.Sleep(2 * time.Second)
	// CPU per probe: pgdns's own CPU time (/proc, so the fakes' CPU is
	// not counted) over the probes it finished meanwhile. Other load on
	// the machine slows both alike, so the ratio holds where a share of a
	// core would not. The scrapes of /metrics fall outside each window.
	res.windows, res.window = 3, 10*time.Second
	var shares []float64
	f0, err := cpuTicks(fake.Process.Pid)
	if err != nil {
		return err
	}
	fw0 := time.Now()
	for range res.windows {
		n0, err0 := probesDone(b.addr.bigHTTP)
		t0, err := cpuTicks(cmd.Process.Pid)
		if err != nil {
			return err
		}
		w0 := time.Now()
		time.Sleep(res.window)
		t1, _ := cpuTicks(cmd.Process.Pid)
		took := time.Since(w0)
		n1, err1 := probesDone(b.addr.bigHTTP)
		if err := errors.Join(err0, err1); err != nil {
			return err
		}
		if n1 <= n0 {
			return fmt.Errorf("no probes counted in a window (%v → %v)", n0, n1)
		}
		cpu := time.Duration(t1-t0) * 10 * time.Millisecond
		res.cpuPerProbe = append(res.cpuPerProbe, time.Duration(float64(cpu)/(n1-n0)))
		shares = append(shares, cpu.Seconds()/took.Seconds()*100)
		res.probesPerSec += (n1 - n0) / took.Seconds() / float64(res.windows)
	}
	f1, err := cpuTicks(fake.Process.Pid)
	if err != nil {
		return err
	}
	res.fakeCPU = (time.Duration(f1-f0) * 10 * time.Millisecond).Seconds() / time.Since(fw0).Seconds() * 100
	slices.Sort(shares)
	res.cpuTotal = shares[len(shares)/2]
	if res.rss1000, err = rssKiB(cmd.Process.Pid); err != nil {
		return err
	}
	if res.heapInuse, err = scrapeSum(b.addr.bigHTTP, "go_memstats_heap_inuse_bytes"); err != nil {
		return err
	}
	if res.goroutines, err = scrapeSum(b.addr.bigHTTP, "go_goroutines"); err != nil {
		return err
	}
	if b.cfg.pprofDir != "" {
		if res.cpuTop, res.heapTop, err = takeProfiles(b.addr.bigHTTP, b.cfg.pprofDir, b.pgdns); err != nil {
			return err
		}
	}
	queries := filepath.Join(b.dir, "queries-1000.txt")
	if err := writeFile(queries, "primary.db.local A\nlag-50ms.replica.db.local A\n"); err != nil {
		return err
	}
	if res.p50, res.p99, err = dnsperfLatency(ctx, b.addr.bigDNS, queries); err != nil {
		return err
	}
	r.scale = res
	return nil
}

// waitDNSTCP is waitDNS over TCP, for answers too large for UDP.
func waitDNSTCP(addr, name string, want int, timeout time.Duration) error {
	if testkit.Poll(timeout, 100*time.Millisecond, func() bool {
		req := new(dns.Msg)
		req.SetQuestion(name, dns.TypeA)
		m, _, err := (&dns.Client{Net: "tcp", Timeout: time.Second}).Exchange(req, addr)
		return err == nil && m.Rcode == dns.RcodeSuccess && len(m.Answer) >= want
	}) {
		return nil
	}
	return fmt.Errorf("%s never answered %s with %d records", addr, name, want)
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

// probesDone sums pgdns_probe_duration_seconds_count over every host. The
// page is large with 1,000 hosts: it is read whole, with time to spare,
// or not at all.
func probesDone(httpAddr string) (float64, error) {
	return scrapeSum(httpAddr, "pgdns_probe_duration_seconds_count")
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
	var sum float64
	for _, l := range strings.Split(body, "\n") {
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
