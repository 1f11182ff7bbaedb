package probe

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/zone"
)

// A host costs the prober one goroutine while its session is open: the
// host's own, which probes on it and waits on its socket between probes
// (session.go), where a reader goroutine per session made two, each with
// its stack (issue 28: a thousand hosts held 2,014 goroutines and 17 MB
// of stacks). Real PostgreSQL 15, one server under the names of 12
// one-host clusters, probed every 50 ms (the admission check, a goroutine
// of its own for a moment each second, is off here so that the count is
// exact).
//
// Not parallel: it counts the process's goroutines.
func TestOneGoroutinePerHost(t *testing.T) {
	cl := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(1)})
	addr := cl.Nodes[0].Addr()
	newChecker, err := PostgresCheckers("user=postgres dbname=postgres sslmode=disable", AdmissionInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	const hosts = 12
	cfg := Config{Interval: 50 * time.Millisecond, Timeout: 5 * time.Second, MaxFails: 3}
	for i := range hosts {
		cfg.Clusters = append(cfg.Clusters, ClusterConfig{Name: fmt.Sprintf("c%d", i), Hosts: []string{addr}})
	}
	p := New(cfg, zone.NewTable(), newChecker, slog.New(slog.NewTextHandler(io.Discard, nil)), "c0")
	before := runtime.NumGoroutine()
	stop := runProber(p)
	defer stop()
	waitReady(t, p, 30*time.Second)
	// Each host probed a few times more, on its tick and on kicks of its
	// cluster's rounds.
	want := before + hosts + 1 // the hosts' and the aggregator's (Run)
	testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, fmt.Sprintf("%d goroutines (%d before, %d hosts, the aggregator)", want, before, hosts), func() (int, bool) {
		n := runtime.NumGoroutine()
		return n, n <= want
	})
	if passed, ok := testkit.Holds(time.Second, 10*time.Millisecond, func() bool { return runtime.NumGoroutine() <= want }); !ok {
		t.Fatalf("more than %d goroutines after %d checks: %d", want, passed, runtime.NumGoroutine())
	}
}

// A host's goroutine lives on a 4 KiB stack, probing or parked on its
// socket, a primary's too, and gives back a stack that grew. The runtime
// grows a stack by doubling when a call does not fit, and gives it back
// only by halves, at a collection that finds under a quarter of it in use
// with the runtime's reserve (stackNosplit, 800 bytes) on top.
//
//   - fits: encoding/json's decoding of a primary's standbys took every
//     primary's goroutine to 8 KiB on every probe (11 to 13 KiB a host with
//     the shrinks fix below missing, clusters of a primary and a replica;
//     4 KiB with parseStandbys reading them itself).
//   - shrinks: a goroutine whose stack grew once (a GC assist in the
//     middle of a probe, an error path, a deep hook; here each host's
//     first ProbeDone) is halved back to 4 KiB: parked on its socket it
//     uses 1,168 bytes. Watch's frame of 384 bytes, on the stack all the
//     goroutine's life, put it at 1,464, over a quarter of 8 KiB, and a
//     host that grew once kept 8 KiB for good (at a thousand hosts, 7.4 MB
//     of stacks with every probe fitting in 4 KiB).
//
// Real PostgreSQL 15: a primary with one streaming replica, under the
// names of 280 clusters (the primary alone, or both). Each case is
// measured in a process of its own (this test, run again as a child): the
// stacks a process's goroutines ever had stay in its stack memory for new
// ones to reuse. Without -race only: the race detector's instrumentation
// makes every frame larger, so its stacks say nothing of a real build's
// (make test runs these without -race as well).
func TestHostStack(t *testing.T) {
	if raceBuild {
		t.Skip("stack sizes under -race are the race detector's; make test runs this without -race")
	}
	if c := os.Getenv("PGDNS_TEST_STACK_CASE"); c != "" {
		hostStackChild(t, c, strings.Split(os.Getenv("PGDNS_TEST_STACK_HOSTS"), ","))
		return
	}
	cl := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(2), Conf: []string{"max_connections = 300"}})
	const bound = 6 << 10
	for _, c := range []struct{ name, hosts, fails string }{
		{"fits", cl.Nodes[0].Addr(), "a primary's probe no longer fits in a 4 KiB stack"},
		{"shrinks", cl.Nodes[0].Addr() + "," + cl.Nodes[1].Addr(),
			"after their first probe took them to 8 KiB: parked, a host's goroutine uses too much of its stack for the collector to halve it"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHostStack$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "PGDNS_TEST_STACK_CASE="+c.name, "PGDNS_TEST_STACK_HOSTS="+c.hosts)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.name, err, out)
		}
		m := regexp.MustCompile(`stack a host: (\d+)`).FindSubmatch(out)
		if m == nil {
			t.Fatalf("%s: the child said no figure:\n%s", c.name, out)
		}
		perHost, _ := strconv.Atoi(string(m[1]))
		t.Logf("%s: %d bytes of stack a host", c.name, perHost)
		for _, w := range regexp.MustCompile(`window \d: \d+ bytes a host`).FindAll(out, -1) {
			t.Logf("%s: %s", c.name, w)
		}
		if perHost > bound {
			t.Errorf("%s: %d bytes of stack a host, want at most %d: %s", c.name, perHost, bound, c.fails)
		}
	}
}

// hostStackChild measures a case of TestHostStack in this process: 280
// hosts in clusters of hosts, probed every second, so that a collection
// finds nearly every host parked between probes. It logs the stack memory
// the prober added a host: in case fits, the fewest of three windows of
// 2.5 s without a collection after six (every host probed twice in
// each); in case shrinks, where each host's first
// ProbeDone takes its goroutine's stack to 8 KiB, the fewest at 6
// collections 400 ms apart.
func hostStackChild(t *testing.T, c string, hosts []string) {
	var hooks Hooks
	if c == "shrinks" {
		var grown sync.Map
		hooks.ProbeDone = func(cluster, addr string, _ time.Duration, _ error) {
			if _, seen := grown.LoadOrStore(cluster+" "+addr, true); !seen {
				deepStack(3)
			}
		}
	}
	newChecker, err := PostgresCheckers("user=postgres dbname=postgres sslmode=disable", AdmissionInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Interval: time.Second, Timeout: 5 * time.Second, MaxFails: 3, Hooks: hooks}
	const n = 280 // stack memory moves in spans of 32 KiB: over 280 hosts that is 117 bytes a host
	for i := range n / len(hosts) {
		cfg.Clusters = append(cfg.Clusters, ClusterConfig{Name: fmt.Sprintf("c%d", i), Hosts: hosts})
	}
	p := New(cfg, zone.NewTable(), newChecker, slog.New(slog.NewTextHandler(io.Discard, nil)), "c0")
	var ms runtime.MemStats
	stacks := func(collect bool) int64 {
		if collect {
			runtime.GC()
		}
		runtime.ReadMemStats(&ms)
		return int64(ms.StackInuse)
	}
	stacks(true)
	before := stacks(true)
	stop := runProber(p)
	defer stop()
	waitReady(t, p, 30*time.Second)
	var held int64
	if c == "fits" {
		// The steady state, not a moment: a window is six collections
		// 200 ms apart (a stack grown by anything before, the session's
		// opening included, halved back, as in a pgdns that has run a
		// while), then 2.5 s with none, in which every host probes twice:
		// a probe that does not fit in 4 KiB takes every host back to
		// 8 KiB in every window. A path deeper only now and then (under
		// load 40-50 one window once read 8,543 bytes a host) grows some
		// hosts in one window and others in the next: the fewest of
		// three windows is the figure.
		held = -1
		for w := range 3 {
			for range 6 {
				stacks(true)
				time.Sleep(200 * time.Millisecond)
			}
			time.Sleep(2300 * time.Millisecond)
			s := stacks(false)
			t.Logf("window %d: %d bytes a host", w+1, (s-before)/n)
			if held < 0 || s < held {
				held = s
			}
		}
	} else {
		held = -1
		for range 6 {
			time.Sleep(400 * time.Millisecond)
			if s := stacks(true); held < 0 || s < held {
				held = s
			}
		}
	}
	t.Logf("stack a host: %d", (held-before)/n)
}

// deepStack uses about n+1 KiB of stack.
//
//go:noinline
func deepStack(n int) byte {
	var b [900]byte
	b[n] = byte(n)
	if n > 0 {
		return deepStack(n-1) + b[n]
	}
	return b[0]
}
