package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// scaleResult: memory and CPU of pgdns with 3 and with 1,000 hosts.
type scaleResult struct {
	rss3Idle         int64 // KiB, before any load
	rss3, rss1000    int64 // KiB, after the load steps
	cpuPerHost       float64
	cpuTotal         float64 // percent of one core, 1,000 hosts
	p50, p99         time.Duration
	readyIn          time.Duration
	realHosts, fakes int
	interval         string
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
	res := &scaleResult{realHosts: 3, interval: "250ms", rss3Idle: b.rssIdle}
	var err error
	if res.rss3, err = rssKiB(b.pgdnsPID); err != nil {
		return err
	}

	// 997 fake replicas beside the 3 real servers.
	var sysid, lsn string
	if err := b.pg.Nodes[0].QueryOnce(ctx, "SELECT (SELECT system_identifier FROM pg_control_system())::text, pg_current_wal_lsn()::text", &sysid, &lsn); err != nil {
		return err
	}
	res.fakes = 997
	self, _ := os.Executable()
	if _, err := b.start(self, []string{"fakepg", "-n", strconv.Itoa(res.fakes), "-sysid", sysid, "-lsn", lsn}); err != nil {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", FakeAddr(res.fakes-1)); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("fake replicas did not start")
		}
	}
	var hosts []string
	for _, n := range b.pg.Nodes {
		hosts = append(hosts, n.Addr())
	}
	for i := range res.fakes {
		hosts = append(hosts, FakeAddr(i))
	}
	const bigDNS = "127.0.30.57:5353"
	path := filepath.Join(b.dir, "pgdns-1000.yaml")
	if err := writeFile(path, fmt.Sprintf("dns: {listen: %q}\nhttp: {listen: \"\"}\nprobe: {interval: %s, dsn: \"user=postgres dbname=postgres sslmode=disable\"}\nclusters:\n  main:\n    hosts: [%s]\n",
		bigDNS, res.interval, strings.Join(hosts, ", "))); err != nil {
		return err
	}
	start := time.Now()
	cmd, err := b.start(b.pgdns, []string{"-config", path})
	if err != nil {
		return err
	}
	defer b.stopProc(cmd)
	if err := waitDNSTCP(bigDNS, "lag-50ms.replica.db.local.", 999, 60*time.Second); err != nil {
		return err
	}
	res.readyIn = time.Since(start)
	time.Sleep(2 * time.Second)
	t0, err := cpuTicks(cmd.Process.Pid)
	if err != nil {
		return err
	}
	const window = 10 * time.Second
	time.Sleep(window)
	t1, _ := cpuTicks(cmd.Process.Pid)
	res.cpuTotal = float64(t1-t0) / 100 / window.Seconds() * 100
	res.cpuPerHost = res.cpuTotal / float64(len(hosts))
	if res.rss1000, err = rssKiB(cmd.Process.Pid); err != nil {
		return err
	}
	queries := filepath.Join(b.dir, "queries-1000.txt")
	if err := writeFile(queries, "primary.db.local A\nlag-50ms.replica.db.local A\n"); err != nil {
		return err
	}
	if res.p50, res.p99, err = dnsperfLatency(ctx, bigDNS, queries); err != nil {
		return err
	}
	r.scale = res
	return nil
}

// waitDNSTCP is waitDNS over TCP, for answers too large for UDP.
func waitDNSTCP(addr, name string, want int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		req := new(dns.Msg)
		req.SetQuestion(name, dns.TypeA)
		m, _, err := (&dns.Client{Net: "tcp", Timeout: time.Second}).Exchange(req, addr)
		if err == nil && m.Rcode == dns.RcodeSuccess && len(m.Answer) >= want {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s never answered %s with %d records", addr, name, want)
}
