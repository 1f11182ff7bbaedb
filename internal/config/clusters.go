package config

import (
	"fmt"
	"math"
	"net/url"
	"slices"

	"github.com/pgdns/pgdns/zone"
)

// readClusters reads clusters.<name>, in name order, each key as declared
// in clusterKeys.
func (r *reader) readClusters() []Cluster {
	if r.k.Exists("clusters") && len(r.clusters) == 0 {
		r.fail("clusters", "must map cluster names to their hosts, got %q", r.k.Get("clusters"))
	}
	var out []Cluster
	for _, name := range r.clusters {
		prefix := "clusters." + name
		if !zone.ValidClusterName(name) {
			r.fail(prefix, "is not a valid cluster name (lower-case letters, digits, '-', '_'; not a role, filter or %q): %q", zone.NameServerLabel, name)
		}
		c := Cluster{Name: name}
		for _, k := range clusterKeys {
			k.read(r, prefix+"."+k.name, &c)
		}
		if len(c.Hosts) == 0 && len(c.Patroni) == 0 {
			r.fail(prefix+".hosts", "must list at least one host:port (or give patroni URLs)")
		}
		out = append(out, c)
	}
	if len(r.clusters) == 0 {
		r.fail("clusters", "must define at least one cluster")
	}
	return out
}

// readHosts reads clusters.<name>.hosts: host:port each
// (zone.ParseHostPort), none in two clusters.
func readHosts(r *reader, key string, c *Cluster) {
	c.Hosts = r.list(key)
	for i, h := range c.Hosts {
		ekey := fmt.Sprintf("%s[%d]", key, i)
		if _, _, err := zone.ParseHostPort(h); err != nil {
			r.fail(ekey, "must be host:port, got %q: %v", h, err)
			continue
		}
		if other, dup := r.seen[h]; dup {
			r.fail(ekey, "repeats host %q, already in %s", h, other)
		}
		r.seen[h] = "clusters." + c.Name
	}
}

// readMinTimeline reads clusters.<name>.min_timeline: a timeline (0:
// none), only with system_identifier, read before it (a timeline number means
// nothing without the cluster it belongs to).
func readMinTimeline(r *reader, key string, c *Cluster) {
	if !r.k.Exists(key) {
		return
	}
	c.MinTimeline = uint32(r.integer(key, 0, math.MaxUint32))
	if c.MinTimeline != 0 && c.SystemID == 0 {
		r.fail(key, "needs clusters.%s.system_identifier: a timeline belongs to one cluster, got %q", c.Name, r.k.String(key))
	}
}

// readPatroni reads clusters.<name>.patroni: http or https URLs.
func readPatroni(r *reader, key string, c *Cluster) {
	c.Patroni = r.list(key)
	for i, u := range c.Patroni {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			r.fail(fmt.Sprintf("%s[%d]", key, i), "must be an http or https URL, got %q", u)
		}
	}
}

// readReplicas reads clusters.<name>.replicas: all (or absent) or async.
func readReplicas(r *reader, key string, c *Cluster) {
	switch v := r.str(key); v {
	case "", "all":
	case "async":
		c.AsyncOnly = true
	default:
		r.fail(key, "must be all or async, got %q", v)
	}
}

// defaultCluster reads dns.default_cluster: needed with more than one
// cluster, the only one's name otherwise.
func defaultCluster(r *reader, key string, _ *Config) string {
	v := r.str(key)
	switch {
	case len(r.clusters) == 0:
		// reported as clusters without a cluster
	case v == "" && len(r.clusters) == 1:
		return r.clusters[0]
	case v == "":
		r.fail(key, "must be set when there is more than one cluster")
	case !slices.Contains(r.clusters, v):
		r.fail(key, "must name a cluster in clusters, got %q", v)
	}
	return v
}
