package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// TestMain lets the test binary run as pgdns itself, so the process tests
// send real signals to a real process.
func TestMain(m *testing.M) {
	if os.Getenv("GO_TEST_RUN_PGDNS_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// startProcess runs pgdns as a child process with the config file at path
// and env added to the environment.
func startProcess(t *testing.T, path string, env ...string) (*exec.Cmd, *testkit.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-config", path)
	cmd.Env = append(append(os.Environ(), "GO_TEST_RUN_PGDNS_MAIN=1"), env...)
	logs := &testkit.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("pgdns output:\n%s", logs)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, logs
}

func waitAnswer(t *testing.T, addr, name string, want int) {
	t.Helper()
	testkit.Eventually(t, 15*time.Second, 50*time.Millisecond, fmt.Sprintf("%s to answer %d records", name, want), func() (string, bool) {
		req := new(dns.Msg)
		req.SetQuestion(name, dns.TypeA)
		m, _, err := (&dns.Client{Timeout: 300 * time.Millisecond}).Exchange(req, addr)
		return fmt.Sprintf("%v, %v", m, err), err == nil && m.Rcode == dns.RcodeSuccess && len(m.Answer) == want
	})
}

// TestSignals: SIGHUP reloads the config file (a bad one is rejected and
// the old one kept); SIGTERM under load lets queries finish, closes every
// probe connection and exits 0 within 5 s.
func TestSignals(t *testing.T) {
	b := pgtest.Addrs(t)
	pg := pgtest.New(t, pgtest.Options{IPs: b.IPs(3)})
	dnsAddr := b.Addr(53, 5353)
	conf := func(hosts ...string) string {
		return fmt.Sprintf("dns: {listen: %q}\nhttp: {listen: \"\"}\nprobe: {interval: 100ms, dsn: \"user=postgres dbname=postgres sslmode=disable\"}\nclusters:\n  main:\n    hosts: [%s]\n",
			dnsAddr, strings.Join(hosts, ", "))
	}
	path := writeConfig(t, conf(pg.Nodes[0].Addr(), pg.Nodes[1].Addr()))
	cmd, logs := startProcess(t, path)
	waitAnswer(t, dnsAddr, "replica.db.local.", 1)

	// Reload with a third host.
	if err := os.WriteFile(path, []byte(conf(pg.Nodes[0].Addr(), pg.Nodes[1].Addr(), pg.Nodes[2].Addr())), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitAnswer(t, dnsAddr, "replica.db.local.", 2)
	// A broken file is rejected; the running configuration stays.
	if err := os.WriteFile(path, []byte("dns: {ttl: 99}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if !testkit.Poll(15*time.Second, 20*time.Millisecond, func() bool { return strings.Contains(logs.String(), "reload rejected") }) {
		t.Fatalf("the rejected reload is not logged:\n%s", logs)
	}
	waitAnswer(t, dnsAddr, "replica.db.local.", 2)
	if !strings.Contains(logs.String(), "dns.ttl") {
		t.Fatalf("the rejected reload does not name the key:\n%s", logs)
	}

	// SIGTERM while queries are in flight.
	var answered, failedBadly atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &dns.Client{Timeout: 500 * time.Millisecond}
			for range 10_000 {
				select {
				case <-stop:
					return
				default:
				}
				req := new(dns.Msg)
				req.SetQuestion("any.db.local.", dns.TypeA)
				m, _, err := c.Exchange(req, dnsAddr)
				switch {
				case err != nil: // the server is gone: expected after the signal
				case m.Rcode != dns.RcodeSuccess || len(m.Answer) != 3:
					failedBadly.Add(1)
				default:
					answered.Add(1)
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	took := time.Since(start)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, logs)
	}
	t.Logf("exited 0 %v after SIGTERM; %d answers under load, %d bad", took.Round(time.Millisecond), answered.Load(), failedBadly.Load())
	if took > 5*time.Second {
		t.Errorf("shutdown took %v", took)
	}
	if failedBadly.Load() != 0 {
		t.Errorf("%d queries got a wrong answer around shutdown", failedBadly.Load())
	}
	// A closed connection's backend leaves pg_stat_activity when it has
	// exited, a moment after the client is gone.
	var conns int
	testkit.Poll(10*time.Second, 50*time.Millisecond, func() bool {
		pg.Nodes[0].Query(t, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgdns'", &conns)
		return conns == 0
	})
	if conns != 0 {
		t.Errorf("%d probe connections left open after exit", conns)
	}
}
