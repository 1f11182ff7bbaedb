package probe

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	before := runtime.NumGoroutine()
	stopped := make(chan struct{})
	go func() { p.Run(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	select {
	case <-p.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("not every host was probed within 30s")
	}
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
