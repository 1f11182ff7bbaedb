package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/app"
	"github.com/pgdns/pgdns/internal/app/apptest"
	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// TestEventsCommand: `pgdns events` prints a running pgdns's events one
// line each, and with -follow goes on printing them as a replica of a real
// cluster stops, until interrupted.
func TestEventsCommand(t *testing.T) {
	t.Parallel()
	b := pgtest.Addrs(t)
	pg := pgtest.New(t, pgtest.Options{IPs: b.IPs(2)})
	primary, replica := pg.Nodes[0], pg.Nodes[1]
	a, _, _ := apptest.Start(t, eventsConfig("127.0.0.1:0", "127.0.0.1:0", pg))
	// The events of a snapshot are appended just after it is published:
	// ask until the start's are in.
	var out string
	testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "pgdns events to print the start (exit, output)", func() (string, bool) {
		code, stdout, errOut := runMain(t, context.Background(), "events", "-http", a.HTTPAddr())
		out = stdout
		return fmt.Sprintf("%d\n%s%s", code, stdout, errOut), code == 0 &&
			strings.Contains(out, " primary_appeared cluster=main host="+primary.Addr()+" to="+primary.Addr()+"\n") &&
			strings.Contains(out, " identity_settled cluster=main to=")
	})
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(line); len(f) < 3 || !strings.HasPrefix(f[1], "#") {
			t.Errorf("not one event per line (time #index reason ...): %q", line)
		}
	}

	f := startFollow(t, a, "http://"+a.HTTPAddr()+"/")
	if err := replica.Stop(context.Background(), "fast"); err != nil {
		t.Fatal(err)
	}
	want := " host_down cluster=main host=" + replica.Addr() + " class=not_serving"
	testkit.Eventually(t, 30*time.Second, 10*time.Millisecond, "the replica's host_down followed", func() (string, bool) {
		return f.stdout.String(), strings.Contains(f.stdout.String(), want)
	})
	t.Logf("pgdns events:\n%s\npgdns events -follow:\n%s", out, f.stdout.String())
	f.stop(t)
}

// eventsConfig is the configuration of the events tests' pgdns: DNS and
// HTTP on the addresses given, probing pg's primary and replica (cluster
// main) every 100 ms.
func eventsConfig(dnsAddr, httpAddr string, pg *pgtest.Cluster) string {
	return fmt.Sprintf(`
dns: {listen: "%s"}
http: {listen: "%s"}
probe: {interval: 100ms, dsn: "user=postgres sslmode=disable"}
clusters:
  main:
    hosts: [%s, %s]
`, dnsAddr, httpAddr, pg.Nodes[0].Addr(), pg.Nodes[1].Addr())
}

// follower is a `pgdns events -follow` run in the background.
type follower struct {
	stdout, stderr testkit.Buffer
	cancel         context.CancelFunc
	done           chan int
}

// startFollow starts `pgdns events -follow -http addr` and waits until
// a, the pgdns it asks, has it waiting for events. The test ends it with
// stop.
func startFollow(t *testing.T, a *app.App, addr string) *follower {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := &follower{cancel: cancel, done: make(chan int, 1)}
	go func() {
		f.done <- run(ctx, []string{"events", "-follow", "-http", addr}, nil, &f.stdout, &f.stderr)
	}()
	testkit.Eventually(t, 10*time.Second, 5*time.Millisecond, "the follower waiting", func() (int, bool) {
		return a.Events().Waiters(), a.Events().Waiters() == 1
	})
	return f
}

// stop interrupts the follower, and checks that it returns within 10 s
// with exit 0.
func (f *follower) stop(t *testing.T) {
	t.Helper()
	f.cancel()
	select {
	case code := <-f.done:
		if code != 0 {
			t.Errorf("interrupted follow: exit %d, %s", code, f.stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an interrupted follow did not return")
	}
}

func TestEventsCommandBadUse(t *testing.T) {
	b := pgtest.Addrs(t)
	for _, c := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"events", "-nope"}, 2, "flag provided but not defined"},
		{[]string{"events", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"events", "-http", b.Addr(1, 1)}, 1, "connection refused"},
	} {
		code, _, errOut := runMain(t, context.Background(), c.args...)
		if code != c.code || !strings.Contains(errOut, c.err) {
			t.Errorf("pgdns %s: exit %d, %q; want %d and %q", strings.Join(c.args, " "), code, errOut, c.code, c.err)
		}
	}
}
