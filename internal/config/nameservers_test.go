package config

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

// dns.nameservers: label=address entries for names in the zone (a label
// repeated adds an address), fully qualified names outside it; the same
// from the environment as a comma-separated string.
func TestNameServers(t *testing.T) {
	want := []NameServer{
		{Name: "ns1.db.local.", Addrs: []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")}},
		{Name: "ns2.db.local.", Addrs: []netip.Addr{netip.MustParseAddr("192.0.2.2")}},
		{Name: "pgdns.example.net."},
	}
	cfg, err := Load(write(t, minimal+"dns:\n  nameservers: [ns1=192.0.2.1, NS1.db.local.=2001:db8::1, ns2=192.0.2.2, pgdns.example.net.]\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.DNS.NameServers, want) {
		t.Fatalf("from YAML: %+v, want %+v", cfg.DNS.NameServers, want)
	}
	cfg, err = Load(write(t, minimal+"dns:\n  listen: 0.0.0.0:5353\n"),
		[]string{"PGDNS_DNS__NAMESERVERS=ns1=192.0.2.1, ns1=2001:db8::1,ns2=192.0.2.2,pgdns.example.net."})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.DNS.NameServers, want) {
		t.Fatalf("from the environment: %+v, want %+v", cfg.DNS.NameServers, want)
	}
	cfg, err = Load(write(t, minimal), nil)
	if err != nil || cfg.DNS.NameServers != nil {
		t.Fatalf("default: %+v, %v", cfg, err)
	}
}

// A wildcard listen address without name servers would leave the NS
// target ns.<zone> without an address: refused, naming both keys.
func TestNameServersErrors(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"wildcard v4", "dns:\n  listen: 0.0.0.0:5353\n",
			`dns.nameservers must list the zone's name servers (e.g. [ns1=192.0.2.53]) when dns.listen is not one specific IP address, got dns.listen "0.0.0.0:5353"`},
		{"wildcard v6", "dns:\n  listen: '[::]:5353'\n", `got dns.listen "[::]:5353"`},
		{"no host", "dns:\n  listen: ':5353'\n", `got dns.listen ":5353"`},
		{"a host name", "dns:\n  listen: 'pgdns.internal:5353'\n", `got dns.listen "pgdns.internal:5353"`},
		{"no address", "dns:\n  nameservers: [ns1]\n", `dns.nameservers[0] must give the address of a name server in the zone, as ns1=192.0.2.53: "ns1"`},
		{"bad address", "dns:\n  nameservers: [ns1=192.0.2]\n", `dns.nameservers[0] must be label=address with a specific IP address: "ns1=192.0.2"`},
		{"wildcard address", "dns:\n  nameservers: [ns1=0.0.0.0]\n", `dns.nameservers[0] must be label=address with a specific IP address: "ns1=0.0.0.0"`},
		{"a role word", "dns:\n  nameservers: [ns1=192.0.2.1, primary=192.0.2.2]\n", `dns.nameservers[1] must be label=address with one label`},
		{"two labels", "dns:\n  nameservers: [ns1.east=192.0.2.1]\n", `dns.nameservers[0] must be label=address with one label`},
		{"a cluster's name", "dns:\n  nameservers: [main=192.0.2.1]\n", `dns.nameservers[0] names the cluster "main"`},
		{"the apex", "dns:\n  nameservers: [db.local.]\n", `dns.nameservers[0] is the zone itself`},
		{"outside with an address", "dns:\n  nameservers: [ns.example.net.=192.0.2.1]\n", `dns.nameservers[0] gives an address for a name outside the zone db.local`},
		{"not a list", "dns:\n  nameservers: {ns1: 192.0.2.1}\n", `dns.nameservers must be a list`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(write(t, minimal+tc.yaml), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}
