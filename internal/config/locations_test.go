package config

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/pgdns/pgdns/zone"
)

const withLocations = `
dns:
  locations:
    east: [10.1.0.0/16, 2001:db8:1::/48]
    west: [10.2.0.0/16, 10.1.9.0/24]
  client_subnet_from: [10.0.0.53/32]
clusters:
  main:
    hosts: [10.1.0.5:5432, 10.1.0.6:5432, 10.2.0.5:5432, 10.3.0.5:5432]
    locations:
      east: [10.1.0.5:5432, 10.1.0.6:5432]
      west: [10.2.0.5:5432]
`

func TestLocations(t *testing.T) {
	cfg, err := Load(write(t, withLocations), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []zone.Network{
		{Prefix: netip.MustParsePrefix("10.1.0.0/16"), Location: "east"},
		{Prefix: netip.MustParsePrefix("2001:db8:1::/48"), Location: "east"},
		{Prefix: netip.MustParsePrefix("10.2.0.0/16"), Location: "west"},
		{Prefix: netip.MustParsePrefix("10.1.9.0/24"), Location: "west"},
	}
	if !slices.Equal(cfg.DNS.Networks, want) {
		t.Fatalf("networks %v", cfg.DNS.Networks)
	}
	if !slices.Equal(cfg.DNS.ClientSubnetFrom, []netip.Prefix{netip.MustParsePrefix("10.0.0.53/32")}) {
		t.Fatalf("client_subnet_from %v", cfg.DNS.ClientSubnetFrom)
	}
	locs := cfg.Clusters[0].Locations
	if len(locs) != 3 || locs["10.1.0.6:5432"] != "east" || locs["10.2.0.5:5432"] != "west" || locs["10.3.0.5:5432"] != "" {
		t.Fatalf("host locations %v", locs)
	}
}

// TestLocationsFromEnvironment: a location is a key, so the environment
// can set one (and a plain host list stays a plain list).
func TestLocationsFromEnvironment(t *testing.T) {
	cfg, err := Load(write(t, minimal), []string{
		"PGDNS_DNS__LOCATIONS__EAST=127.0.0.0/8, 10.1.0.0/16",
		"PGDNS_DNS__LOCATIONS__WEST=10.2.0.0/16",
		"PGDNS_CLUSTERS__MAIN__LOCATIONS__EAST=127.0.0.11:5432",
		"PGDNS_CLUSTERS__MAIN__LOCATIONS__WEST=127.0.0.12:5432",
	})
	if err != nil {
		t.Fatal(err)
	}
	n := zone.NewNetworks(cfg.DNS.Networks)
	if n.Locate(netip.MustParseAddr("127.0.0.9")) != "east" || n.Locate(netip.MustParseAddr("10.2.3.4")) != "west" {
		t.Fatalf("networks %v", cfg.DNS.Networks)
	}
	if l := cfg.Clusters[0].Locations; l["127.0.0.11:5432"] != "east" || l["127.0.0.12:5432"] != "west" {
		t.Fatalf("host locations %v", l)
	}
}

func TestLocationErrors(t *testing.T) {
	cluster := "clusters:\n  main:\n    hosts: [h:1, i:1]\n"
	cases := []struct{ name, yaml, want string }{
		{"bad network", cluster + "dns:\n  locations:\n    east: [10.1.0.0/33]\n", `dns.locations.east[0] must be a network such as 10.1.0.0/16, got "10.1.0.0/33"`},
		{"address, no prefix", cluster + "dns:\n  locations:\n    east: [10.1.0.1]\n", `dns.locations.east[0] must be a network such as 10.1.0.0/16, got "10.1.0.1"`},
		{"host bits", cluster + "dns:\n  locations:\n    east: [10.1.2.3/16]\n", `dns.locations.east[0] has host bits set: "10.1.2.3/16"; the network is 10.1.0.0/16`},
		{"same network twice", cluster + "dns:\n  locations:\n    east: [10.1.0.0/16]\n    west: [10.1.0.0/16]\n", `dns.locations.west[0] repeats network "10.1.0.0/16", already in dns.locations.east`},
		{"bad name", cluster + "dns:\n  locations:\n    East: [10.1.0.0/16]\n", `dns.locations.East is not a valid location name (1 to 60 lower-case letters, digits, '-', '_'): "East"`},
		{"long name", cluster + "dns:\n  locations:\n    " + strings.Repeat("e", 61) + ": [10.1.0.0/16]\n", `is not a valid location name`},
		{"not a map", cluster + "dns:\n  locations: [10.1.0.0/16]\n", `dns.locations must map location names to lists, got "[10.1.0.0/16]"`},
		{"not a list", cluster + "dns:\n  locations:\n    east: {a: b}\n", `dns.locations.east.a is not a known key`},
		// Clients are located by their unmapped address (zone.Networks.Locate,
		// dnsserver's source), so an IPv4-mapped network would never match.
		{"ipv4-mapped network", cluster + "dns:\n  locations:\n    east: ['::ffff:10.1.0.0/112']\n", `dns.locations.east[0] is an IPv4-mapped IPv6 network, which no client matches: write it as IPv4, 10.1.0.0/16`},
		{"ipv4-mapped client subnet source", cluster + "dns:\n  client_subnet_from: ['::ffff:10.0.0.53/128']\n", `dns.client_subnet_from[0] is an IPv4-mapped IPv6 network, which no client matches: write it as IPv4, 10.0.0.53/32`},
		{"bad client subnet source", cluster + "dns:\n  client_subnet_from: [forwarder]\n", `dns.client_subnet_from[0] must be a network such as 10.1.0.0/16, got "forwarder"`},
		{"host not listed", cluster + "    locations:\n      east: [j:1]\n", `clusters.main.locations.east[0] names host "j:1", which is not in clusters.main.hosts`},
		{"host in two", cluster + "    locations:\n      east: [h:1]\n      west: [h:1]\n", `clusters.main.locations.west[0] puts host "h:1" in a second location; it is already in "east"`},
		{"bad host location name", cluster + "    locations:\n      e.st: [h:1]\n", `clusters.main.locations.e.st is not a known key`},
		{"cluster locations not a map", cluster + "    locations: [h:1]\n", `clusters.main.locations must map location names to lists`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(write(t, tc.yaml), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	// A location map given something else than a map is one error, about
	// its value: the key itself is known.
	for _, yaml := range []string{
		cluster + "dns:\n  locations: [10.1.0.0/16]\n",
		cluster + "dns:\n  locations:\n",
		cluster + "    locations: [h:1]\n",
		cluster + "    locations:\n",
	} {
		_, err := Load(write(t, yaml), nil)
		if err == nil || strings.Contains(err.Error(), "not a known key") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error %v, want one error about the value", yaml, err)
		}
	}
	// With Patroni, a host may be one Patroni reports rather than one listed.
	if _, err := Load(write(t, "clusters:\n  main:\n    patroni: [http://p:8008]\n    locations:\n      east: [10.1.0.5:5432]\n"), nil); err != nil {
		t.Fatal(err)
	}
}
