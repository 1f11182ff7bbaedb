package test

// No single point of failure: two pgdns instances serve the zone, one of
// them is frozen (SIGSTOP: no answer, no ICMP, only timeouts) or killed
// (SIGKILL: queries refused), and a switchover happens meanwhile. Real
// clients configured with both instances as docs/production.md recommends must
// follow it without an operator: libpq through glibc's resolver, CoreDNS
// forwarding, PgBouncer (c-ares) and HAProxy.

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// haResolvConf is the resolv.conf of docs/production.md ("Resolver
// settings") for two instances, as glibc and c-ares read it.
func haResolvConf(ns1, ns2 string) string {
	return "nameserver " + ns1 + "\nnameserver " + ns2 + "\noptions timeout:1 attempts:2\n"
}

// instanceConfig is the config every instance of the test shares; only
// dns.listen differs.
func instanceConfig(listen string, nameServers, hosts []string) string {
	return fmt.Sprintf(`
dns: {listen: %q, ttl: 1, nameservers: [%s]}
http: {listen: ""}
probe: {interval: 100ms, timeout: 1s, max_fails: 3, dsn: "user=postgres dbname=postgres sslmode=disable"}
clusters:
  main:
    hosts: [%s]
`, listen, strings.Join(nameServers, ", "), strings.Join(hosts, ", "))
}

// reach is how a client got to the new primary after a switchover.
type reach struct {
	took    time.Duration // from the promote to the first success
	tries   int
	fails   int           // tries that ended in an error
	slowest time.Duration // the longest try
	lastErr error
}

// reachUntil calls try every 20 ms until it returns want, for at most
// 30 s. A try that returns never (the old primary) ends it with an error;
// one that returns another value or an error is counted and retried.
func reachUntil(start time.Time, want, never string, try func() (string, error)) reach {
	var r reach
	for time.Since(start) < 30*time.Second {
		t0 := time.Now()
		got, err := try()
		r.tries++
		r.slowest = max(r.slowest, time.Since(t0))
		switch {
		case err != nil:
			r.fails++
			r.lastErr = err
		case got == never:
			r.lastErr = fmt.Errorf("reached %s, the old primary", never)
			return r
		case got == want:
			r.took = time.Since(start)
			r.lastErr = nil
			return r
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.lastErr = fmt.Errorf("not reached within 30 s; last error: %v", r.lastErr)
	return r
}

// lookupPrimary asks addr for primary.db.local with a client timeout of
// 5 s (glibc's default) and returns the address answered, "" for NODATA.
func lookupPrimary(addr string) (string, error) {
	req := new(dns.Msg)
	req.SetQuestion("primary.db.local.", dns.TypeA)
	m, _, err := (&dns.Client{Timeout: 5 * time.Second}).Exchange(req, addr)
	if err != nil {
		return "", err
	}
	if m.Rcode != dns.RcodeSuccess {
		return "", fmt.Errorf("rcode %s", dns.RcodeToString[m.Rcode])
	}
	if len(m.Answer) == 0 {
		return "", nil
	}
	return m.Answer[0].(*dns.A).A.String(), nil
}

// settleCoreDNS looks want up through CoreDNS every 20 ms until ten
// lookups in a row take under 500 ms (the stopped or killed instance is
// marked down), for at most 15 s; no lookup may fail or answer another
// address.
func settleCoreDNS(t *testing.T, addr, want string, sig syscall.Signal) {
	t.Helper()
	start := time.Now()
	lookups, slow, fast := 0, 0, 0
	for fast < 10 {
		if time.Since(start) > 15*time.Second {
			t.Fatalf("%v: lookups through CoreDNS still slow after 15 s (%d of %d over 500 ms)", sig, slow, lookups)
		}
		t0 := time.Now()
		got, err := lookupPrimary(addr)
		lookups++
		if err != nil || got != want {
			t.Fatalf("%v: lookup %d through CoreDNS: %q, %v; want %s", sig, lookups, got, err, want)
		}
		if time.Since(t0) < 500*time.Millisecond {
			fast++
		} else {
			fast, slow = 0, slow+1
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("%v of one instance: CoreDNS: %d more lookups, none failed, %d over 500 ms", sig, lookups, slow)
}

// haCorefile is configs/Corefile forwarding the zone to both instances.
func haCorefile(t *testing.T, addrs ...string) string {
	t.Helper()
	b, err := os.ReadFile("../configs/Corefile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "forward . {$PGDNS_ADDR}") {
		t.Fatal("configs/Corefile does not forward the zone to {$PGDNS_ADDR}")
	}
	return strings.Replace(string(b), "forward . {$PGDNS_ADDR}", "forward . "+strings.Join(addrs, " "), 1)
}

// TestOneOfTwoInstancesDown: with one of two pgdns instances frozen, then
// killed, a switchover reaches every client configured with both
// instances, with no operator action: psql (glibc), CoreDNS (no failed
// lookup), PgBouncer and HAProxy (writes committed by the new primary,
// never the old one).
func TestOneOfTwoInstancesDown(t *testing.T) {
	t.Parallel()
	testkit.RequireRoot(t, "pgdns listens on port 53, where glibc, c-ares and HAProxy ask")
	findCoreDNS(t)
	testkit.RequireTool(t, "pgbouncer")
	testkit.RequireTool(t, "haproxy")
	b := pgtest.Addrs(t)
	ips := []string{b.IP(11), b.IP(12), b.IP(13)}
	ns1, ns2 := b.IP(53), b.IP(54)
	resolv := haResolvConf(ns1, ns2)
	libpq := newResolverConf(t, resolv)
	pg := pgtest.New(t, pgtest.Options{IPs: ips})
	pg.Nodes[0].Exec(t, "CREATE DATABASE app")
	pg.Nodes[0].Exec(t, "CREATE TABLE w (i serial PRIMARY KEY, at timestamptz DEFAULT now())")

	nameServers := []string{"ns1=" + ns1, "ns2=" + ns2}
	hosts := []string{pg.Nodes[0].Addr(), pg.Nodes[1].Addr(), pg.Nodes[2].Addr()}
	one := startProcess(t, instanceConfig(ns1+":53", nameServers, hosts), ns1+":53")
	startProcess(t, instanceConfig(ns2+":53", nameServers, hosts), ns2+":53")

	coredns := startCoreDNS(t, haCorefile(t, ns1+":53", ns2+":53"), b.IP(55), "")
	bn := startPgBouncerResolv(t, b.IP(64), resolv)
	if _, err := bn.mustConnect(t, "app").Exec(context.Background(), "CREATE TABLE w (i int PRIMARY KEY, at timestamptz DEFAULT now())"); err != nil {
		t.Fatalf("create table through pgbouncer: %v", err)
	}
	hx := startHAProxy(t, b.IP(70), ns1+":53", ns2+":53")
	hxUntil(t, hx.rw, true, time.Now(), ips[0], "")
	w := &pgbWriter{b: bn}
	defer w.close()
	if addr, err := w.write(); err != nil || addr != ips[0] {
		t.Fatalf("write through pgbouncer: committed by %q, %v; want %s", addr, err, ips[0])
	}

	// Frozen, then killed; each time the primary moves on to the next node.
	for i, sig := range []syscall.Signal{syscall.SIGSTOP, syscall.SIGKILL} {
		old, next := pg.Nodes[i], pg.Nodes[i+1]
		one.signal(t, sig)
		promoted := switchover(t, old, next)
		if i == 0 {
			pg.Nodes[2].Follow(t, next)
		}

		clients := map[string]func() (string, error){
			"psql (glibc)": func() (string, error) {
				return libpq.psql("host=primary.db.local target_session_attrs=read-write", "SELECT inet_server_addr()")
			},
			"CoreDNS":   func() (string, error) { return lookupPrimary(coredns) },
			"PgBouncer": func() (string, error) { return w.write() },
			"HAProxy":   func() (string, error) { return hxServer(hx.rw, true) },
		}
		results := make(chan string, len(clients))
		for name, try := range clients {
			go func() {
				r := reachUntil(promoted, next.IP, old.IP, try)
				msg := fmt.Sprintf("%s: new primary after %v, %d tries, %d failed, slowest %v", name,
					r.took.Round(time.Millisecond), r.tries, r.fails, r.slowest.Round(time.Millisecond))
				switch {
				case r.lastErr != nil:
					msg = "FAIL " + msg + ": " + r.lastErr.Error()
				case name == "CoreDNS" && r.fails > 0:
					msg = "FAIL " + msg + ": a lookup through CoreDNS failed"
				}
				results <- msg
			}()
		}
		for range clients {
			if msg := <-results; strings.HasPrefix(msg, "FAIL ") {
				t.Errorf("%v of one instance: %s", sig, msg)
			} else {
				t.Logf("%v of one instance: %s", sig, msg)
			}
		}
		if t.Failed() {
			t.FailNow()
		}
		settleCoreDNS(t, coredns, next.IP, sig)
		if sig == syscall.SIGSTOP {
			one.signal(t, syscall.SIGCONT)
			one.waitAnswering(t, next.IP)
			// Before the next switchover the last node replicates from
			// the new primary on its timeline, as both instances see it.
			for _, addr := range []string{ns1 + ":53", ns2 + ":53"} {
				testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, addr+" answers replica.db.local. "+ips[2], func() ([]string, bool) {
					got := answerIPs(t, query(t, "udp", addr, "replica.db.local.", dns.TypeA))
					return got, slices.Equal(got, []string{ips[2]})
				})
			}
		}
	}
}
