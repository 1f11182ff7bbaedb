package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// TestDemo runs what `make demo` runs, on addresses of its own, and checks
// the promise: lag-50ms.replica answers the replicas while
// lsn-ffffffff-0.replica answers NOERROR with no address; Ctrl-C stops
// everything.
func TestDemo(t *testing.T) {
	pgtest.Require(t)
	b := pgtest.Addrs(t)
	o := options{dns: b.Addr(53, 5353), http: b.Addr(53, 8080), ips: b.IPs(3)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, o, &out) }()

	ask := func(name string) *dns.Msg {
		req := new(dns.Msg)
		req.SetQuestion(name, dns.TypeA)
		m, _, err := (&dns.Client{Timeout: 500 * time.Millisecond}).Exchange(req, o.dns)
		if err != nil {
			return nil
		}
		return m
	}
	if !testkit.Poll(60*time.Second, 100*time.Millisecond, func() bool {
		m := ask("lag-50ms.replica.db.local.")
		return m != nil && m.Rcode == dns.RcodeSuccess && len(m.Answer) == 2
	}) {
		t.Fatalf("the demo never answered lag-50ms.replica with both replicas:\n%s", out.String())
	}
	// The probe runs as the role docs/operating.md's "The probe role" creates, on
	// every host (the replicas copied it).
	for _, ip := range o.ips {
		var role string
		err := (&pgtest.Node{IP: ip, Port: 5432}).QueryOnce(ctx,
			"SELECT string_agg(DISTINCT usename, ',') FROM pg_stat_activity WHERE usename = 'pgdns' AND pg_has_role('pgdns', 'pg_monitor', 'USAGE')", &role)
		if err != nil || role != "pgdns" {
			t.Errorf("%s: probe sessions as %q (%v), want pgdns with pg_monitor", ip, role, err)
		}
	}
	m := ask("lsn-ffffffff-0.replica.db.local.")
	if m == nil || m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 {
		t.Fatalf("lsn-ffffffff-0.replica: %v", m)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the demo did not stop")
	}
	if !strings.Contains(out.String(), "dig @"+b.IP(53)+" -p 5353 lag-50ms.replica.db.local") ||
		!strings.Contains(out.String(), "stopping PostgreSQL") {
		t.Errorf("demo output:\n%s", out.String())
	}
	if c, err := net.DialTimeout("tcp", o.ips[0]+":5432", time.Second); err == nil {
		c.Close()
		t.Error("PostgreSQL still runs after the demo stopped")
	}
}

// TestAddressInUseIsNamed: a demo still running in another terminal holds
// the addresses; the next one says which, before it starts anything.
func TestAddressInUseIsNamed(t *testing.T) {
	b := pgtest.Addrs(t)
	ips := b.IPs(3)
	ln, err := net.Listen("tcp", ips[1]+":5432")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	err = run(context.Background(), options{dns: b.Addr(53, 5353), http: b.Addr(53, 8080), ips: ips}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), ips[1]+":5432 is in use") {
		t.Fatalf("run = %v, want %s:5432 named as in use", err, ips[1])
	}
}

// TestDemoSwitchover asks the running demo for a switchover (what `make
// demo-switchover` does by SIGUSR1): the next node is answered as the
// primary, and replica answers both other nodes, the re-pointed replica on
// the new timeline and the old primary re-cloned, not an empty answer.
func TestDemoSwitchover(t *testing.T) {
	pgtest.Require(t)
	b := pgtest.Addrs(t)
	ask := make(chan struct{}, 1)
	o := options{dns: b.Addr(53, 5353), http: b.Addr(53, 8080), ips: b.IPs(3), switchover: ask}
	ctx, cancel := context.WithCancel(context.Background())
	var out testkit.Buffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, o, &out) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	answers := func(name string) (string, bool) {
		req := new(dns.Msg)
		req.SetQuestion(name, dns.TypeA)
		m, _, err := (&dns.Client{Timeout: 500 * time.Millisecond}).Exchange(req, o.dns)
		if err != nil {
			return err.Error(), false
		}
		var ips []string
		for _, rr := range m.Answer {
			ips = append(ips, rr.(*dns.A).A.String())
		}
		slices.Sort(ips)
		return strings.Join(ips, ","), true
	}
	want := func(name, ips string) {
		t.Helper()
		testkit.Eventually(t, 2*time.Minute, 100*time.Millisecond, name+" to answer "+ips, func() (string, bool) {
			got, ok := answers(name)
			return got, ok && got == ips
		})
	}
	want("primary.db.local.", o.ips[0])
	want("lag-1s.replica.db.local.", o.ips[1]+","+o.ips[2])

	ask <- struct{}{}
	want("primary.db.local.", o.ips[1])
	want("lag-1s.replica.db.local.", o.ips[0]+","+o.ips[2])
	if !strings.Contains(out.String(), "switchover: done in") {
		t.Errorf("demo output:\n%s", out.String())
	}
	// A second one moves on to the third node.
	ask <- struct{}{}
	want("primary.db.local.", o.ips[2])
	want("lag-1s.replica.db.local.", o.ips[0]+","+o.ips[1])
}
