package test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/app/apptest"
	"github.com/pgdns/pgdns/internal/pgtest"
)

// TestNameServersFromConfig: dns.nameservers, through the real loader and
// server, makes the NS RRset (with glue), the SOA MNAME and the name
// servers' own addresses. The apex needs no probe, so the host may be
// absent.
func TestNameServersFromConfig(t *testing.T) {
	t.Parallel()
	ips := pgtest.Addrs(t).IPs(3)
	a, _, _ := apptest.Start(t, fmt.Sprintf(`
dns: {listen: "127.0.0.1:0", nameservers: [ns1=%s, ns2=%s, pgdns.example.net.]}
http: {listen: ""}
clusters:
  main:
    hosts: [%s:5432]
`, ips[0], ips[1], ips[2]))
	addr := a.DNSAddr()

	m := query(t, "udp", addr, "db.local.", dns.TypeNS)
	var ns, glue []string
	for _, rr := range m.Answer {
		ns = append(ns, rr.(*dns.NS).Ns)
	}
	for _, rr := range m.Extra {
		if a, ok := rr.(*dns.A); ok {
			glue = append(glue, a.Hdr.Name+" "+a.A.String())
		}
	}
	slices.Sort(glue)
	if want := []string{"ns1.db.local.", "ns2.db.local.", "pgdns.example.net."}; !slices.Equal(ns, want) {
		t.Errorf("NS %v, want %v", ns, want)
	}
	if want := []string{"ns1.db.local. " + ips[0], "ns2.db.local. " + ips[1]}; !slices.Equal(glue, want) {
		t.Errorf("glue %v, want %v", glue, want)
	}
	m = query(t, "udp", addr, "db.local.", dns.TypeSOA)
	if len(m.Answer) != 1 || m.Answer[0].(*dns.SOA).Ns != "ns1.db.local." {
		t.Errorf("SOA %v, want MNAME ns1.db.local.", m.Answer)
	}
	if got := answerIPs(t, query(t, "udp", addr, "ns2.db.local.", dns.TypeA)); !slices.Equal(got, []string{ips[1]}) {
		t.Errorf("ns2.db.local. A %v, want %s", got, ips[1])
	}
	if m := query(t, "udp", addr, "ns.db.local.", dns.TypeA); m.Rcode != dns.RcodeNameError {
		t.Errorf("ns.db.local. is not a name server here: rcode %s", dns.RcodeToString[m.Rcode])
	}
}
