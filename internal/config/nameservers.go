package config

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/pgdns/pgdns/zone"
)

// nameServers reads dns.nameservers (after dns.zone and dns.listen): "label=address" for a name server in
// the zone (repeat the label for a second address), or a fully qualified
// "name." outside it, whose addresses are not pgdns's to answer. With none
// the NS target is ns.<zone>, answered with the listen address, so a
// listen address that is not one specific IP needs them.
func nameServers(r *reader, key string, c *Config) []NameServer {
	zoneName, listen, clusters := c.DNS.Zone, c.DNS.Listen, r.clusters
	origin := zoneName + "."
	var out []NameServer
	for i, entry := range r.list(key) {
		ekey := fmt.Sprintf("%s[%d]", key, i)
		name, addr, hasAddr := strings.Cut(strings.ToLower(entry), "=")
		name, addr = strings.TrimSpace(name), strings.TrimSpace(addr)
		label, inZone := strings.CutSuffix(name, "."+origin)
		if !strings.HasSuffix(name, ".") {
			label, inZone = name, true
		}
		var ip netip.Addr
		switch {
		case name == origin:
			r.fail(ekey, "is the zone itself, not a name server: %q", entry)
			continue
		case !inZone && hasAddr:
			r.fail(ekey, "gives an address for a name outside the zone %s (only names in the zone are answered): %q", zoneName, entry)
			continue
		case !inZone:
			if !validDomain(strings.TrimSuffix(name, ".")) {
				r.fail(ekey, "must be label=address or a fully qualified name.: %q", entry)
				continue
			}
		case label != zone.NameServerLabel && !zone.ValidClusterName(label):
			r.fail(ekey, "must be label=address with one label of letters, digits, '-', '_' that is not a role or filter: %q", entry)
			continue
		case slices.Contains(clusters, label):
			r.fail(ekey, "names the cluster %q; a name server needs a label of its own: %q", label, entry)
			continue
		case !hasAddr:
			r.fail(ekey, "must give the address of a name server in the zone, as %s=192.0.2.53: %q", label, entry)
			continue
		default:
			var err error
			if ip, err = netip.ParseAddr(addr); err != nil || ip.IsUnspecified() || ip.Zone() != "" {
				r.fail(ekey, "must be label=address with a specific IP address: %q", entry)
				continue
			}
			name = label + "." + origin
		}
		j := slices.IndexFunc(out, func(ns NameServer) bool { return ns.Name == name })
		if j < 0 {
			out, j = append(out, NameServer{Name: name}), len(out)
		}
		if ip.IsValid() {
			out[j].Addrs = append(out[j].Addrs, ip.Unmap())
		}
	}
	// A dns.listen that does not parse is reported as such, not again here.
	_, _, listenErr := zone.ParseListenAddr(listen)
	if _, one := ListenIP(listen); len(out) == 0 && listenErr == nil && !one {
		r.fail(key, "must list the zone's name servers (e.g. [ns1=192.0.2.53]) when dns.listen is not one specific IP address, got dns.listen %q: the NS record would point at a name with no address", listen)
	}
	return out
}
