package config

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/pgdns/pgdns/zone"
)

// Host names (zone/names.go): every host answers as
// <label>.host.<cluster>.<zone>. clusters.<name>.names gives hosts their
// label, keyed by label as locations are keyed by location name (koanf
// splits keys at dots, so a host:port cannot be a key): names: {pg-1:
// 127.0.0.11:5432}, or PGDNS_CLUSTERS__MAIN__NAMES__PG1=127.0.0.11:5432.
// A host given none is labelled by its address and port
// (zone.DerivedLabel); with Patroni, a member's name comes first.

// namesField is the cluster key of host labels.
const namesField = "names"

// hostLabels reads clusters.<name>.names: label → one host of the cluster
// (as listed in hosts, or with Patroni as Patroni reports it), at most one
// label per host. It returns host → label. Two hosts that would answer
// one name (a label given to one that is another's derived label) are
// refused, naming the key.
func (r *reader) hostLabels(key string, c *Cluster) map[string]string {
	if !r.k.Exists(key) {
		r.uniqueLabels(key, c, nil)
		return nil
	}
	if _, isMap := r.k.Get(key).(map[string]any); !isMap {
		r.fail(key, "must map host labels to host:port, got %q", r.k.Get(key))
		return nil
	}
	out := map[string]string{}
	labels := r.k.MapKeys(key)
	slices.Sort(labels)
	for _, label := range labels {
		lkey := key + "." + label
		if !zone.ValidHostLabel(label) {
			r.fail(lkey, "is not a valid host label (1 to 63 lower-case letters, digits and '-', not first or last): %q", label)
			continue
		}
		host := r.str(lkey)
		switch other, dup := out[host]; {
		case host == "":
			r.fail(lkey, "must be one host:port of clusters.%s.hosts, got %q", c.Name, r.k.Get(lkey))
		case dup:
			r.fail(lkey, "gives host %q a second name; it is already %q", host, other)
		case !slices.Contains(c.Hosts, host) && len(c.Patroni) == 0:
			r.fail(lkey, "names host %q, which is not in clusters.%s.hosts", host, c.Name)
		default:
			out[host] = label
		}
	}
	r.uniqueLabels(key, c, out)
	return out
}

// uniqueLabels refuses two configured hosts of c that would get one label:
// a label given to one host that another host derives from its address.
func (r *reader) uniqueLabels(key string, c *Cluster, given map[string]string) {
	owner := map[string]string{}
	for _, h := range c.Hosts {
		label, set := given[h]
		if !set {
			label = zone.DerivedLabel(h)
		}
		// The key to change: the label given (to this host or the other).
		lkey := key + "." + label
		if _, otherSet := given[owner[label]]; !set && !otherSet {
			lkey = "clusters." + c.Name + ".hosts"
		}
		if other, dup := owner[label]; dup && other != h { // a repeated host is said by readHosts
			r.fail(lkey, "would give hosts %q and %q one name, %s.host.%s: give one of them another in %s",
				other, h, label, c.Name, key)
			continue
		}
		owner[label] = h
	}
}

// readPort reads clusters.<name>.port: the port clients use with the
// cluster's A and AAAA names; 0 (absent) = the port most hosts share.
func readPort(r *reader, key string, c *Cluster) {
	if r.k.Exists(key) {
		c.Port = uint16(r.integer(key, 1, 65535))
	}
}

// Warnings are what is valid but likely wrong in cfg, one line each, for
// pgdns -check and the start-up log: the clusters whose hosts are not all
// on one port, whose other hosts only SRV answers carry, one server listed
// twice in two spellings, and a probe.admission_interval of 0, which
// leaves a smart shutdown unseen.
func (cfg *Config) Warnings() []string {
	var out []string
	if cfg.Probe.AdmissionInterval == 0 {
		out = append(out, AdmissionOffWarning)
	}
	for _, c := range cfg.Clusters {
		if w := c.PortWarning(); w != "" {
			out = append(out, w)
		}
	}
	return append(out, cfg.repeatWarnings()...)
}

// repeatWarnings says which configured hosts are an earlier one written
// another way: one address and port, as "[::ffff:10.0.0.11]:5432" is
// "10.0.0.11:5432" (an IPv4-mapped IPv6 address is the IPv4 address a
// session reaches). readHosts refuses a host written twice alike; two
// spellings load, and would be probed and named as two hosts (in two
// clusters, one server would be in both).
func (cfg *Config) repeatWarnings() []string {
	type where struct{ cluster, host string }
	var out []string
	first := map[string]where{} // addrKey|port → where it was first listed
	for _, c := range cfg.Clusters {
		for _, h := range c.Hosts {
			host, p, err := zone.ParseHostPort(h)
			if err != nil {
				continue
			}
			key := addrKey(host) + "|" + strconv.Itoa(int(p))
			switch other, dup := first[key]; {
			case !dup:
				first[key] = where{c.Name, h}
			case other.host != h: // the same text twice is readHosts's error
				out = append(out, fmt.Sprintf("clusters.%s.hosts: %s is clusters.%s's %s written another way (one address and port: one server listed twice); list it once",
					c.Name, h, other.cluster, other.host))
			}
		}
	}
	return out
}

// AdmissionOffWarning is the warning of a probe.admission_interval of 0.
const AdmissionOffWarning = "probe.admission_interval is 0: a host stopping smartly (pg_ctl stop -m smart) is not seen; " +
	"it stays in the answers while it refuses every new session, and pgdns's open probe session keeps the stop from completing"

// PortWarning says, in one line naming the cluster and the hosts, which
// of c's hosts no A or AAAA answer holds: those whose IP another host has
// on another port (never, whatever the client port: zone.Host.SharesIP),
// and those on another port than the client port; "" when every host is
// on one port. Hosts named by DNS names are compared by name: their
// addresses are known only once resolved.
func (c *Cluster) PortWarning() string {
	ports := make([]uint16, len(c.Hosts))
	atIP := map[string]map[uint16]bool{}
	for i, h := range c.Hosts {
		host, p, err := zone.ParseHostPort(h)
		if err != nil {
			continue
		}
		ports[i] = p
		host = addrKey(host)
		if atIP[host] == nil {
			atIP[host] = map[uint16]bool{}
		}
		atIP[host][p] = true
	}
	port := zone.ClientPort(ports, c.Port)
	var shared, off []string
	for i, h := range c.Hosts {
		host, _, _ := zone.ParseHostPort(h)
		switch {
		case len(atIP[addrKey(host)]) > 1:
			shared = append(shared, h)
		case ports[i] != port:
			off = append(off, h)
		}
	}
	var parts []string
	if len(shared) > 0 {
		parts = append(parts, fmt.Sprintf("%s share an address on different ports: answered by SRV only (_postgresql._tcp.<name>), never by A or AAAA, whatever the client port (give each its own address)",
			strings.Join(shared, ", ")))
	}
	if len(off) > 0 {
		parts = append(parts, fmt.Sprintf("hosts are not all on port %d (the port of its A and AAAA answers, %s): %s answered by SRV only (_postgresql._tcp.<name>)",
			port, portWhy(c.Name, c.Port), strings.Join(off, ", ")))
	}
	if len(parts) == 0 {
		return ""
	}
	return "clusters." + c.Name + ": " + strings.Join(parts, "; ")
}

// addrKey is host as compared for a shared address: an IP in its
// canonical form, IPv4-mapped IPv6 as the IPv4 address it maps (so that
// "::1" meets "0:0::1", and "::ffff:10.0.0.11" meets "10.0.0.11": one
// server, as the probe sees it once connected), a DNS name in lower case
// (DNS names are case-insensitive).
func addrKey(host string) string {
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.Unmap().WithZone("").String()
	}
	return strings.ToLower(host)
}

func portWhy(cluster string, configured uint16) string {
	if configured != 0 {
		return "clusters." + cluster + ".port"
	}
	return "the one most hosts share, which adding or removing a host can change; set clusters." + cluster + ".port to keep it"
}
