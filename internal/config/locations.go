package config

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/pgdns/pgdns/zone"
)

// Locations are keyed by location name, never by network or address:
// koanf splits keys at dots, so "10.1.0.0/16" or "10.1.0.5:5432" cannot be
// a key, while a name can, in YAML and in the environment alike
// (PGDNS_DNS__LOCATIONS__EAST=10.1.0.0/16,10.3.0.0/16).

// locationsKey and clusterLocationsField hold the location maps.
const (
	locationsKey          = "dns.locations"
	clientSubnetKey       = "dns.client_subnet_from"
	clusterLocationsField = "locations"
)

// networks reads dns.locations: location name → the client networks
// (CIDRs) in it. The same network under two names is an error; a network
// inside another is not (the most specific wins).
func networks(r *reader, key string, _ *Config) []zone.Network {
	var out []zone.Network
	owner := map[netip.Prefix]string{}
	for _, name := range r.locationNames(key) {
		lkey := key + "." + name
		for i, s := range r.list(lkey) {
			ekey := fmt.Sprintf("%s[%d]", lkey, i)
			p, ok := r.prefix(ekey, s)
			if !ok {
				continue
			}
			if other, dup := owner[p]; dup {
				r.fail(ekey, "repeats network %q, already in %s.%s", s, key, other)
				continue
			}
			owner[p] = name
			out = append(out, zone.Network{Prefix: p, Location: name})
		}
	}
	return out
}

// prefix reads one network, such as 10.1.0.0/16 or 2001:db8::/32, with no
// host bits set (10.1.2.3/16 is likely a typo for something else) and not
// IPv4-mapped (::ffff:10.1.0.0/112 is written 10.1.0.0/16).
func (r *reader) prefix(key, s string) (netip.Prefix, bool) {
	p, err := netip.ParsePrefix(s)
	switch {
	case err != nil || p.Addr().Zone() != "":
		r.fail(key, "must be a network such as 10.1.0.0/16, got %q", s)
		return p, false
	case p != p.Masked():
		r.fail(key, "has host bits set: %q; the network is %s", s, p.Masked())
		return p, false
	case p.Addr().Is4In6():
		// Clients are matched by their unmapped address (a dual-stack
		// socket's ::ffff:10.1.2.3 is 10.1.2.3), so this network would
		// silently match none. (A masked mapped prefix has at least 96 bits.)
		r.fail(key, "is an IPv4-mapped IPv6 network, which no client matches: write it as IPv4, %s",
			netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96))
		return p, false
	}
	return p, true
}

// prefixes reads a list of networks, such as dns.client_subnet_from: the
// sources whose EDNS Client Subnet option is believed.
func prefixes(r *reader, key string, _ *Config) []netip.Prefix {
	var out []netip.Prefix
	for i, s := range r.list(key) {
		if p, ok := r.prefix(fmt.Sprintf("%s[%d]", key, i), s); ok {
			out = append(out, p)
		}
	}
	return out
}

// hostLocations reads clusters.<name>.locations: location name → hosts of
// the cluster in it, as listed in hosts (or, with Patroni, as Patroni
// reports them). It returns host → location.
func (r *reader) hostLocations(key string, c *Cluster) map[string]string {
	prefix := "clusters." + c.Name
	out := map[string]string{}
	for _, name := range r.locationNames(key) {
		lkey := key + "." + name
		for i, h := range r.list(lkey) {
			ekey := fmt.Sprintf("%s[%d]", lkey, i)
			switch other, dup := out[h]; {
			case dup:
				r.fail(ekey, "puts host %q in a second location; it is already in %q", h, other)
				continue
			case !slices.Contains(c.Hosts, h) && len(c.Patroni) == 0:
				r.fail(ekey, "names host %q, which is not in %s.hosts", h, prefix)
				continue
			}
			out[h] = name
		}
	}
	return out
}

// locationNames returns the location names under key, sorted, failing on
// a name that cannot follow "dc-" in a label, or on a key that is not a map.
func (r *reader) locationNames(key string) []string {
	if !r.k.Exists(key) {
		return nil
	}
	if _, isMap := r.k.Get(key).(map[string]any); !isMap {
		r.fail(key, "must map location names to lists, got %q", r.k.Get(key))
		return nil
	}
	var names []string
	for _, name := range r.k.MapKeys(key) {
		if !zone.ValidLocationName(name) {
			r.fail(key+"."+name, "is not a valid location name (1 to 60 lower-case letters, digits, '-', '_'): %q", name)
			continue
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
