package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// addrs are one run's addresses, all on loopback, in a block of
// pgtest.Reserve (taken by newBench): two runs side by side, or a run
// beside the tests, never share one.
type addrs struct {
	primaryIP, replica1IP, replica2IP string
	pgdnsDNS, pgdnsHTTP               string
	corednsDNS, floorDNS, echoDNS     string
	bigDNS, bigHTTP                   string             // pgdns of the scale step, 1,000 hosts
	noWaitDNS                         string             // the read-your-writes step's second pgdns, lsn_wait 0
	hostileDNS, hostileHTTP           string             // pgdns of the hostile-clients step
	wellSrc, hogSrc, floodSrc         string             // that step's client and attacker source addresses
	fleet                             func(i int) string // the scale step's fake servers: pgtest.Block.Fleet
	fakeControl                       func(k int) string // where the scale step's k-th fakes' process tells its count
}

// addrsIn lays the run's addresses out in block.
func addrsIn(block *pgtest.Block) addrs {
	return addrs{
		primaryIP: block.IP(11), replica1IP: block.IP(12), replica2IP: block.IP(13),
		pgdnsDNS: block.Addr(53, 5353), pgdnsHTTP: block.Addr(53, 8080),
		corednsDNS: block.Addr(54, 5353), floorDNS: block.Addr(55, 5353), echoDNS: block.Addr(56, 5353),
		bigDNS: block.Addr(57, 5353), bigHTTP: block.Addr(57, 8080),
		noWaitDNS:  block.Addr(58, 5353),
		hostileDNS: block.Addr(59, 5353), hostileHTTP: block.Addr(59, 8080),
		wellSrc: block.IP(60), hogSrc: block.IP(61), floodSrc: block.IP(62),
		fleet:       block.Fleet,
		fakeControl: func(k int) string { return block.Addr(70+k, 6000) },
	}
}

// bench holds what every step uses: the run's configuration and
// addresses, the cluster, the servers, a scratch directory.
type bench struct {
	cfg       config
	addr      addrs
	dir       string
	pgdns     string // binary
	pg        *pgtest.Cluster
	procs     []*exec.Cmd
	pgdnsPID  int
	rssIdle   int64  // KiB, pgdns with 3 hosts before any load
	plotPath  string // failover.png, once drawn
	scalePlot string // scale.png, once drawn
	lsn       string // an LSN every replica has replayed, for lsn- queries
	floodLSN  string // the hostile step's LSN no replica has (stallReplicas)
	release   func() // frees the address block
}

// newBench takes an address block and, when cluster, starts the
// three-node cluster every step but ha uses.
func newBench(cfg config, cluster bool) (*bench, error) {
	dir, err := os.MkdirTemp("", "pgdns-bench-")
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(cfg.pgdns)
	if err != nil {
		return nil, err
	}
	block, release, err := pgtest.Reserve()
	if err != nil {
		return nil, err
	}
	b := &bench{cfg: cfg, addr: addrsIn(block), dir: dir, pgdns: abs, release: release}
	if !cluster {
		return b, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if b.pg, err = pgtest.Start(ctx, pgtest.Options{IPs: []string{b.addr.primaryIP, b.addr.replica1IP, b.addr.replica2IP}}); err != nil {
		release()
		return nil, err
	}
	return b, nil
}

func (b *bench) close() {
	for _, p := range b.procs {
		_ = p.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = p.Process.Kill()
		}
	}
	if b.pg != nil {
		b.pg.Close()
	}
	_ = os.RemoveAll(b.dir)
	b.release()
}

// start runs a server process that lives until the bench ends.
func (b *bench) start(name string, args []string, env ...string) (*exec.Cmd, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	logf, err := os.Create(filepath.Join(b.dir, filepath.Base(name)+".log"))
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

// startPGDNS runs bin/pgdns on hosts with live probing.
func (b *bench) startPGDNS(hosts []string, interval string) (*exec.Cmd, error) {
	conf := filepath.Join(b.dir, "pgdns.yaml")
	text := fmt.Sprintf(`dns: {listen: %q, zone: db.local, ttl: 1, lsn_wait: 20ms}
http: {listen: %q}
probe: {interval: %s, timeout: 1s, max_fails: 3, dsn: "user=postgres dbname=postgres sslmode=disable"}
clusters:
  main:
    hosts: [%s]
`, b.addr.pgdnsDNS, b.addr.pgdnsHTTP, interval, strings.Join(hosts, ", "))
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		return nil, err
	}
	cmd, err := b.start(b.pgdns, []string{"-config", conf})
	if err != nil {
		return nil, err
	}
	b.pgdnsPID = cmd.Process.Pid
	return cmd, waitDNS(b.addr.pgdnsDNS, "lag-50ms.replica.db.local.", 2, 30*time.Second)
}

// stopProc stops one server started by start.
func (b *bench) stopProc(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(os.Interrupt)
	_, _ = cmd.Process.Wait()
	for i, p := range b.procs {
		if p == cmd {
			b.procs = append(b.procs[:i], b.procs[i+1:]...)
			break
		}
	}
}

// waitDNS polls addr until name has at least want A records.
func waitDNS(addr, name string, want int, timeout time.Duration) error {
	if testkit.Poll(timeout, 50*time.Millisecond, func() bool {
		req := new(dns.Msg)
		req.SetQuestion(name, dns.TypeA)
		m, _, err := (&dns.Client{Timeout: 300 * time.Millisecond}).Exchange(req, addr)
		return err == nil && m.Rcode == dns.RcodeSuccess && len(m.Answer) >= want
	}) {
		return nil
	}
	return fmt.Errorf("%s never answered %s with %d records", addr, name, want)
}

// startCoreDNS serves the same names from a static zone file: what a user
// might put there instead of pgdns.
func (b *bench) startCoreDNS() error {
	bin, err := exec.LookPath("coredns")
	if err != nil {
		home, _ := os.UserHomeDir()
		bin = filepath.Join(home, "go", "bin", "coredns")
	}
	zone := filepath.Join(b.dir, "db.local.zone")
	var z strings.Builder
	z.WriteString("$ORIGIN db.local.\n$TTL 1\n@ IN SOA ns hostmaster 1 60 10 3600 1\n@ IN NS ns\nns IN A " + strings.Split(b.addr.corednsDNS, ":")[0] + "\n")
	z.WriteString("primary IN A " + b.addr.primaryIP + "\n")
	for _, name := range []string{"replica", "lag-50ms.replica", "bytes-1mb.replica", b.lsnName()} {
		z.WriteString(name + " IN A " + b.addr.replica1IP + "\n" + name + " IN A " + b.addr.replica2IP + "\n")
	}
	if err := os.WriteFile(zone, []byte(z.String()), 0o644); err != nil {
		return err
	}
	host, port, _ := net.SplitHostPort(b.addr.corednsDNS)
	corefile := filepath.Join(b.dir, "Corefile")
	if err := os.WriteFile(corefile, []byte(fmt.Sprintf("db.local:%s {\n    bind %s\n    file %s\n}\n", port, host, zone)), 0o644); err != nil {
		return err
	}
	if _, err := b.start(bin, []string{"-conf", corefile}); err != nil {
		return err
	}
	return waitDNS(b.addr.corednsDNS, "replica.db.local.", 2, 15*time.Second)
}

// startFloor runs this binary as the minimal miekg/dns server.
func (b *bench) startFloor() error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	args := []string{"floor", "-listen", b.addr.floorDNS, "-primary", b.addr.primaryIP, "-replicas", b.addr.replica1IP + "," + b.addr.replica2IP, "-lsn", b.lsnName()}
	if _, err := b.start(self, args); err != nil {
		return err
	}
	return waitDNS(b.addr.floorDNS, "replica.db.local.", 2, 15*time.Second)
}

// startEcho runs this binary as the plain UDP echo, the ceiling.
func (b *bench) startEcho() error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if _, err := b.start(self, []string{"echo", "-listen", b.addr.echoDNS}); err != nil {
		return err
	}
	return waitEcho(b.addr.echoDNS, 15*time.Second)
}

// waitEcho polls addr until a query comes back as a response.
func waitEcho(addr string, timeout time.Duration) error {
	if testkit.Poll(timeout, 50*time.Millisecond, func() bool {
		req := new(dns.Msg)
		req.SetQuestion("primary.db.local.", dns.TypeA)
		m, _, err := (&dns.Client{Timeout: 300 * time.Millisecond}).Exchange(req, addr)
		return err == nil && m.Response
	}) {
		return nil
	}
	return fmt.Errorf("the UDP echo on %s never answered", addr)
}

// lsnName is the relative lsn- name of the query mix: an LSN both replicas
// have replayed, so that it is answered like the other names.
func (b *bench) lsnName() string {
	return "lsn-" + b.lsn + ".replica"
}

// queryNames is the dnsperf query mix.
func (b *bench) queryNames() []string {
	return []string{"primary.db.local", "replica.db.local", "lag-50ms.replica.db.local", "bytes-1mb.replica.db.local", b.lsnName() + ".db.local"}
}
