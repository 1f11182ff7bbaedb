package test

// Locality against a real cluster: hosts labelled in two locations, and
// clients in each (issue 15).

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/app/apptest"
	"github.com/pgdns/pgdns/internal/config"
	"github.com/pgdns/pgdns/internal/pgtest"
)

// localityYAML is a config for cluster main: p and r1 in east, r2 in west;
// clients in eastNets are in east, in westNets in west.
func localityYAML(listen, p, r1, r2, eastNets, westNets string) string {
	return fmt.Sprintf(`
dns:
  listen: %q
  locations:
    east: [%s]
    west: [%s]
http: {listen: "127.0.0.1:0"}
probe: {interval: 100ms, dsn: "user=postgres dbname=postgres sslmode=disable"}
clusters:
  main:
    hosts: [%s:5432, %s:5432, %s:5432]
    locations:
      east: [%s:5432, %s:5432]
      west: [%s:5432]
`, listen, eastNets, westNets, p, r1, r2, p, r1, r2)
}

// queryFrom asks pgdns at addr for name over network, from source address
// src (the client socket is bound to it), and returns the A records in the
// order answered.
func queryFrom(t *testing.T, network, src, addr, name string) (*dns.Msg, []string) {
	t.Helper()
	var local net.Addr = &net.UDPAddr{IP: net.ParseIP(src)}
	if network == "tcp" {
		local = &net.TCPAddr{IP: net.ParseIP(src)}
	}
	c := &dns.Client{Net: network, Timeout: 2 * time.Second, Dialer: &net.Dialer{LocalAddr: local, Timeout: 2 * time.Second}}
	req := new(dns.Msg)
	req.SetQuestion(name, dns.TypeA)
	m, _, err := c.Exchange(req, addr)
	if err != nil {
		t.Fatalf("%s %s from %s: %v", network, name, src, err)
	}
	var ips []string
	for _, rr := range m.Answer {
		if a, ok := rr.(*dns.A); ok {
			ips = append(ips, a.A.String())
		}
	}
	return m, ips
}

func TestLocalityFromTwoSources(t *testing.T) {
	t.Parallel()
	b := pgtest.Addrs(t)
	p, r1, r2 := b.IP(11), b.IP(12), b.IP(13)
	east, west, nowhere := b.IP(101), b.IP(102), b.IP(103)
	pg := pgtest.New(t, pgtest.Options{IPs: []string{p, r1, r2}})
	a, _, logs := apptest.Start(t, localityYAML("127.0.0.1:0", p, r1, r2, east+"/32", west+"/32"))
	e := &env{pg: pg, app: a, logs: logs}
	e.waitFor(t, "replica.db.local.", []string{r1, r2})
	all := []string{r1, r2}

	// Each source gets its own location's replica first, the full set
	// unchanged, on UDP and TCP, turn after turn (rotation never moves a
	// remote host ahead).
	for _, tc := range []struct {
		src, first string
	}{{east, r1}, {west, r2}} {
		for _, network := range []string{"udp", "tcp"} {
			for range 6 {
				_, got := queryFrom(t, network, tc.src, a.DNSAddr(), "replica.db.local.")
				if len(got) != 2 || got[0] != tc.first || !slices.Equal(slices.Sorted(slices.Values(got)), all) {
					t.Fatalf("%s from %s: %v, want %s first of %v", network, tc.src, got, tc.first, all)
				}
			}
		}
	}
	// An unmapped source gets today's rotating answer: both replicas come first.
	firsts := map[string]bool{}
	for range 6 {
		_, got := queryFrom(t, "udp", nowhere, a.DNSAddr(), "replica.db.local.")
		if !slices.Equal(slices.Sorted(slices.Values(got)), all) {
			t.Fatalf("from %s: %v", nowhere, got)
		}
		firsts[got[0]] = true
	}
	if len(firsts) != 2 {
		t.Fatalf("an unlocated client always got %v first", firsts)
	}
	// any: the primary heads east's group, and follows west's replica.
	if _, got := queryFrom(t, "udp", east, a.DNSAddr(), "any.db.local."); len(got) != 3 || got[0] != p || got[1] != r1 {
		t.Fatalf("any from east: %v", got)
	}
	if _, got := queryFrom(t, "udp", west, a.DNSAddr(), "any.db.local."); len(got) != 3 || got[0] != r2 || got[1] != p {
		t.Fatalf("any from west: %v", got)
	}

	// The strict filter, whoever asks.
	for name, want := range map[string][]string{
		"dc-east.replica.db.local.":                 {r1},
		"dc-west.lag-1s.replica.db.local.":          {r2},
		"dc-west.primary.db.local.":                 nil, // the primary is in east: fail closed
		"dc-east.primary.db.local.":                 {p},
		"dc-west.any.db.local.":                     {r2},
		"dc-east.prefer-replica.db.local.":          {r1},
		"dc-west.lsn-0-0.prefer-replica.db.local.":  {r2},
		"dc-west.lsn-ff-0.prefer-replica.db.local.": nil, // beyond the primary's reach: it lacks it too
	} {
		for _, src := range []string{east, west} {
			m, got := queryFrom(t, "udp", src, a.DNSAddr(), name)
			if m.Rcode != dns.RcodeSuccess || !slices.Equal(got, want) {
				t.Errorf("%s from %s: %s %v, want %v", name, src, dns.RcodeToString[m.Rcode], got, want)
			}
		}
	}
	if m, _ := queryFrom(t, "udp", east, a.DNSAddr(), "dc-north.replica.db.local."); m.Rcode != dns.RcodeNameError {
		t.Errorf("unknown location: %s", dns.RcodeToString[m.Rcode])
	}

	// HTTP: the same order for client=, each host's location, the counts.
	var res struct {
		ClientLocation string `json:"client_location"`
		Answer         []struct{ Addr, Location string }
	}
	code, body := e.get(t, http.DefaultClient, "/v1/resolve?name=replica&client="+west, "")
	if err := json.Unmarshal([]byte(body), &res); err != nil || code != http.StatusOK {
		t.Fatalf("/v1/resolve: %d %s", code, body)
	}
	if res.ClientLocation != "west" || len(res.Answer) != 2 || res.Answer[0].Addr != r2+":5432" || res.Answer[0].Location != "west" {
		t.Fatalf("/v1/resolve for a west client: %+v", res)
	}
	_, metrics := e.get(t, http.DefaultClient, "/metrics", "")
	for _, want := range []string{`pgdns_dns_locality_total{answer="local"}`, `pgdns_dns_locality_total{answer="unlocated"}`} {
		if !strings.Contains(metrics, want) || strings.Contains(metrics, want+" 0\n") {
			t.Errorf("metrics: %s not counted", want)
		}
	}
}

// TestLibpqLandsInItsLocation: psql, through a resolv.conf naming pgdns,
// connects to the replica of the location its source address maps to, and
// follows when the mapping changes. The source of a loopback query is the
// kernel's choice (127.0.0.1 when the socket is not bound), so the test
// maps all of 127.0.0.0/8: whichever loopback address psql's resolver
// sends from is in it. Then it reloads pgdns with that network in the
// other location: the same psql now lands on the other replica, which
// proves that the location, not rotation or luck, picked the host.
func TestLibpqLandsInItsLocation(t *testing.T) {
	t.Parallel()
	b := pgtest.Addrs(t)
	p, r1, r2, dnsIP := b.IP(11), b.IP(12), b.IP(13), b.IP(53)
	ns := newResolverNS(t, dnsIP)
	pg := pgtest.New(t, pgtest.Options{IPs: []string{p, r1, r2}})
	const loopback, doc = "127.0.0.0/8", "192.0.2.0/24" // doc: a network no test client is in
	a, _, logs := apptest.Start(t, localityYAML(dnsIP+":53", p, r1, r2, loopback, doc))
	e := &env{pg: pg, app: a, logs: logs}
	e.waitFor(t, "replica.db.local.", []string{r1, r2})

	land := func(want string) {
		t.Helper()
		for range 6 {
			out, err := ns.psql("host=replica.db.local target_session_attrs=standby", "SELECT inet_server_addr()")
			if err != nil || out != want {
				t.Fatalf("psql landed on %q (%v), want %s", out, err, want)
			}
		}
	}
	land(r1) // 127.0.0.0/8 is east: r1, 6 times of 6

	path := filepath.Join(t.TempDir(), "west.yaml")
	if err := os.WriteFile(path, []byte(localityYAML(dnsIP+":53", p, r1, r2, doc, loopback)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	land(r2) // now west: r2
}
