package test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/testkit"
)

// kubernetesStanza is deploy/kubernetes/coredns-pgdns.server made to run
// here: its zone becomes the tests' db.local, its port and bind address
// CoreDNS's test address, and its upstream (the Service's ClusterIP) the
// pgdns under test. Everything else — the cache settings in particular —
// is run as shipped.
func kubernetesStanza(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../deploy/kubernetes/coredns-pgdns.server")
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	for old, repl := range map[string]string{
		"db.internal:53 {":       "db.local:{$COREDNS_PORT} {\n    bind {$COREDNS_BIND}",
		"forward . 10.96.0.53 {": "forward . {$PGDNS_ADDR} {",
	} {
		if !strings.Contains(s, old) {
			t.Fatalf("the stanza has no %q:\n%s", old, s)
		}
		s = strings.Replace(s, old, repl, 1)
	}
	return s
}

// TestKubernetesCoreDNSStanza runs a real CoreDNS with the server block
// the Kubernetes deployment adds to the cluster's CoreDNS: it answers what
// pgdns answers, a cached answer never carries a TTL above 1, and a
// change (the primary stops) reaches its clients within the TTL.
func TestKubernetesCoreDNSStanza(t *testing.T) {
	t.Parallel()
	findCoreDNS(t)
	e := newEnv(t, envOptions{Nodes: 1})
	via := startCoreDNS(t, kubernetesStanza(t), e.block.IP(53), e.app.DNSAddr())

	for _, n := range []struct {
		name  string
		qtype uint16
	}{
		{"primary.db.local.", dns.TypeA},
		{"any.db.local.", dns.TypeTXT},
		{"replica.db.local.", dns.TypeA},
		{"nope.db.local.", dns.TypeA},
	} {
		direct := ask(t, e.app.DNSAddr(), n.name, n.qtype)
		for range 3 { // the first fills the cache, the others come from it
			forwarded := ask(t, via, n.name, n.qtype)
			if direct.rcode != forwarded.rcode || !slices.Equal(direct.ips, forwarded.ips) {
				t.Errorf("%s via CoreDNS: %+v, pgdns answers %+v", n.name, forwarded, direct)
			}
			for _, ttl := range forwarded.ttls {
				if ttl > 1 {
					t.Errorf("%s via CoreDNS: TTL %d", n.name, ttl)
				}
			}
		}
	}

	ask(t, via, "primary.db.local.", dns.TypeA) // cached
	if err := e.pg.Nodes[0].Stop(context.Background(), "immediate"); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", nil)
	start := time.Now()
	// TTL 1: 5 s is five times what a client may see the old answer.
	testkit.Eventually(t, 5*time.Second, 20*time.Millisecond, "CoreDNS to drop the stopped primary (answer)", func() ([]string, bool) {
		ips := ask(t, via, "primary.db.local.", dns.TypeA).ips
		return ips, len(ips) == 0
	})
	t.Logf("through CoreDNS the stopped primary was gone %v after pgdns dropped it", time.Since(start).Round(time.Millisecond))
}
