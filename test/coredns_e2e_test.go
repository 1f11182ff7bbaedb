package test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/testkit"
)

// findCoreDNS finds the coredns binary on PATH or where go install puts
// it; .ci/run installs it.
func findCoreDNS(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("coredns"); err == nil {
		return p
	}
	if home, err := os.UserHomeDir(); err == nil {
		if p := filepath.Join(home, "go", "bin", "coredns"); fileExists(p) {
			return p
		}
	}
	return testkit.RequireTool(t, "coredns") // fails under CI, skips elsewhere
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// startCoreDNS runs CoreDNS with corefile on ip:port, forwarding to pgdns,
// and waits until it answers.
func startCoreDNS(t *testing.T, corefile, ip, pgdnsAddr string) string {
	t.Helper()
	bin := findCoreDNS(t)
	path := filepath.Join(t.TempDir(), "Corefile")
	if err := os.WriteFile(path, []byte(corefile), 0o644); err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", ip+":0") // a free port
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(pc.LocalAddr().String())
	pc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "-conf", path)
	cmd.Env = append(os.Environ(), "PGDNS_ADDR="+pgdnsAddr, "COREDNS_BIND="+ip, "COREDNS_PORT="+port)
	var out testkit.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("CoreDNS output:\n%s", out.String())
		}
	})
	addr := net.JoinHostPort(ip, port)
	if !testkit.Poll(10*time.Second, 50*time.Millisecond, func() bool {
		req := new(dns.Msg)
		req.SetQuestion("db.local.", dns.TypeSOA)
		m, _, err := (&dns.Client{Timeout: 200 * time.Millisecond}).Exchange(req, addr)
		return err == nil && m.Rcode == dns.RcodeSuccess
	}) {
		t.Fatalf("CoreDNS did not answer on %s:\n%s", addr, out.String())
	}
	return addr
}

// withCache puts cache settings into the db.local block of a Corefile.
func withCache(corefile, cache string) string {
	block := strings.Index(corefile, "db.local:")
	end := block + strings.Index(corefile[block:], "    errors\n")
	return corefile[:end] + cache + "\n" + corefile[end:]
}

// answer is what a test compares between pgdns and CoreDNS.
type answer struct {
	rcode int
	ips   []string
	ttls  []uint32
}

func ask(t *testing.T, addr, name string, qtype uint16) answer {
	t.Helper()
	m := query(t, "udp", addr, name, qtype)
	a := answer{rcode: m.Rcode}
	for _, rr := range append(m.Answer, m.Ns...) {
		a.ttls = append(a.ttls, rr.Header().Ttl)
		switch v := rr.(type) {
		case *dns.A:
			a.ips = append(a.ips, v.A.String())
		case *dns.TXT:
			a.ips = append(a.ips, strings.Fields(v.Txt[0])[0])
		}
	}
	slices.Sort(a.ips)
	return a
}

// TestCoreDNSForwarding runs a real CoreDNS with configs/Corefile in front
// of pgdns: it answers what pgdns answers, with TTLs that stay at most 1.
// CoreDNS's cache plugin, as configured by default, would stretch them;
// with the settings of docs/clients/coredns.md ("Caching") it does not.
func TestCoreDNSForwarding(t *testing.T) {
	t.Parallel()
	corefile, err := os.ReadFile("../configs/Corefile")
	if err != nil {
		t.Fatal(err)
	}
	findCoreDNS(t)
	e := newEnv(t, envOptions{})
	b, r1, r2 := e.block, e.ip(1), e.ip(2)
	e.waitFor(t, "replica.db.local.", []string{r1, r2})
	plain := startCoreDNS(t, string(corefile), b.IP(53), e.app.DNSAddr())
	cached := startCoreDNS(t, withCache(string(corefile), "    cache {\n        success 9984 1 0\n        denial 9984 1 0\n    }"),
		b.IP(54), e.app.DNSAddr())
	naive := startCoreDNS(t, withCache(string(corefile), "    cache"), b.IP(55), e.app.DNSAddr())

	names := []struct {
		name  string
		qtype uint16
	}{
		{"primary.db.local.", dns.TypeA},
		{"replica.db.local.", dns.TypeA},
		{"lag-500ms.replica.db.local.", dns.TypeA},
		{"any.db.local.", dns.TypeTXT},
		{"lsn-ffffffff-0.replica.db.local.", dns.TypeA},
		{"nope.db.local.", dns.TypeA},
	}
	for _, via := range []string{plain, cached} {
		for _, n := range names {
			direct, forwarded := ask(t, e.app.DNSAddr(), n.name, n.qtype), ask(t, via, n.name, n.qtype)
			if direct.rcode != forwarded.rcode || !slices.Equal(direct.ips, forwarded.ips) {
				t.Errorf("via %s %s: %+v, pgdns answers %+v", via, n.name, forwarded, direct)
			}
			for _, ttl := range forwarded.ttls {
				if ttl > 1 {
					t.Errorf("via %s %s: TTL %d", via, n.name, ttl)
				}
			}
		}
	}

	// The plain cache plugin keeps answers for its 5 s minimum TTL: the
	// pitfall docs/clients/coredns.md ("Caching") warns about.
	ask(t, naive, "primary.db.local.", dns.TypeA)
	if a := ask(t, naive, "primary.db.local.", dns.TypeA); len(a.ttls) == 0 || a.ttls[0] <= 1 {
		t.Errorf("CoreDNS's default cache kept TTL %v; docs/clients/coredns.md says it stretches it", a.ttls)
	} else {
		t.Logf("CoreDNS's default cache stretches TTL 1 to %d s", a.ttls[0])
	}

	// A change reaches clients of the recommended configurations at once.
	ask(t, cached, "replica.db.local.", dns.TypeA)
	if err := e.pg.Nodes[2].Stop(context.Background(), "immediate"); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "replica.db.local.", []string{r1})
	start := time.Now()
	for _, via := range []string{plain, cached} {
		if !testkit.Poll(time.Until(start.Add(5*time.Second)), 50*time.Millisecond, func() bool {
			return slices.Equal(ask(t, via, "replica.db.local.", dns.TypeA).ips, []string{r1})
		}) {
			t.Fatalf("via %s the stopped replica is still answered", via)
		}
	}
	t.Logf("through CoreDNS the stopped replica was gone %v after pgdns dropped it", time.Since(start).Round(time.Millisecond))
}
