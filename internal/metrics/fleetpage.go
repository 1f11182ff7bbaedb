package metrics

import (
	"math"
	"time"

	"github.com/pgdns/pgdns/probe"
	"github.com/pgdns/pgdns/zone"
)

// writeFleet writes the per-cluster and per-host families: the counters
// from fleetStats, the gauges from one view of the table taken now, so
// they can never disagree with the answers. It takes no lock the probe
// or the DNS server waits on, but for fleetStats.mu for a copy of its
// lists.
func (m *Metrics) writeFleet(p *pageWriter) {
	clusters, hosts := m.fleet.lists()
	m.writeClusterCounters(p, clusters)
	m.writeHostCounters(p, hosts)
	m.writeGauges(p, m.table.View(time.Now()))
}

func (m *Metrics) writeClusterCounters(p *pageWriter, clusters []*clusterStats) {
	const duration = "pgdns_probe_duration_seconds"
	p.family(duration, "histogram", "Duration of one probe of a host of the cluster, connecting included.")
	le := bucketLabels(probeBuckets)
	for _, c := range clusters {
		var total uint64
		for i := range c.duration.counts {
			total += c.duration.counts[i].Load()
			p.count(duration+"_bucket", total, "cluster", c.name, "le", le[i])
		}
		p.sample(duration+"_sum", math.Float64frombits(c.duration.sumBits.Load()), "cluster", c.name)
		p.count(duration+"_count", total, "cluster", c.name)
	}

	const errors = "pgdns_probe_errors_total"
	p.family(errors, "counter", "Failed probes by cluster and class: not_serving (refused, reset, shut down or starting up), timeout, auth (the server refused the probe role), server_error, dns (the host name did not resolve), other. Each class starts at zero.")
	for _, c := range clusters {
		for i, class := range failureClasses() {
			p.count(errors, c.errors[i].Load(), "class", class, "cluster", c.name)
		}
	}

	const probes = "pgdns_probes_total"
	p.family(probes, "counter", "Probes by why they were made then: tick (a host's own probe.interval tick: a primary's opens a probe round, a host without a primary probes alone), tick_driven (a replica's own tick while its cluster has a primary, whose rounds did not drive it then), round (kicked by its primary's probe round), closing (the primary probed again to close a round: its replicas' byte lag bounds), flux, refresh (lsn- lookups).")
	for _, c := range clusters {
		for i, why := range probeCauses {
			if n := c.probes[i].Load(); n > 0 {
				p.count(probes, n, "cluster", c.name, "why", string(why))
			}
		}
	}

	const roleChanges = "pgdns_role_changes_total"
	p.family(roleChanges, "counter", "Changes of the role of a host of the cluster (primary, replica, down, unknown), by the role left and the role taken.")
	for _, c := range clusters {
		for from := range numRoles {
			for to := range numRoles {
				if n := c.roleChanges[from][to].Load(); n > 0 {
					p.count(roleChanges, n, "cluster", c.name, "from", zone.Role(from).String(), "to", zone.Role(to).String())
				}
			}
		}
	}

	const coalesced = "pgdns_lsn_refresh_coalesced_total"
	p.family(coalesced, "counter", "Refreshes asked for by lsn- lookups that started no round: they shared the round running (reason running) or waited for the one due at the end of dns.lsn_refresh_min_gap (reason min_gap).")
	for _, c := range clusters {
		for i, reason := range coalescedReasons {
			p.count(coalesced, c.coalesced[i].Load(), "cluster", c.name, "reason", string(reason))
		}
	}

	for _, f := range []struct {
		name, help string
		of         func(*clusterStats) uint64
	}{
		{"pgdns_split_brain_total", "Times a cluster had two writable hosts on its highest timeline (no primary answered meanwhile).", func(c *clusterStats) uint64 { return c.splitBrains.Load() }},
		{"pgdns_primary_changes_total", "Times a cluster's primary became a host other than the last one pgdns saw as its primary: failovers and switchovers (the first primary pgdns sees, and an old primary coming back, are not counted).", func(c *clusterStats) uint64 { return c.moved.Load() }},
		{"pgdns_flux_episodes_total", "Times a cluster entered flux (its role answer changed: its primary went down or changed, a host changed role), when pgdns probes it every probe.flux_interval for up to probe.flux_duration.", func(c *clusterStats) uint64 { return c.fluxEpisodes.Load() }},
		{"pgdns_flux_probes_total", "Probes asked for beyond the interval while a cluster was in flux (its primary went down or changed, a host changed role): the extra load of fast failover.", func(c *clusterStats) uint64 { return c.fluxProbes.Load() }},
		{"pgdns_lsn_refresh_rounds_total", "Refresh rounds started for lsn- lookups no replica satisfied: each probes the cluster's primary and replicas once.", func(c *clusterStats) uint64 { return c.refreshRounds.Load() }},
		{"pgdns_lsn_unreachable_total", "lsn- lookups answered at once, without a refresh round, because their LSN is beyond any position the cluster's primary can have reached (forged, another cluster's, or lost in a failover).", func(c *clusterStats) uint64 { return c.lsnUnreachable.Load() }},
	} {
		p.family(f.name, "counter", f.help)
		for _, c := range clusters {
			p.count(f.name, f.of(c), "cluster", c.name)
		}
	}
}

func (m *Metrics) writeHostCounters(p *pageWriter, hosts []*hostStats) {
	const probes = "pgdns_host_probes_total"
	p.family(probes, "counter", "Probes of the host, whatever their outcome (pgdns_probes_total says why they were made, by cluster).")
	for _, h := range hosts {
		p.count(probes, h.probes.Load(), "cluster", h.cluster.name, "host", h.addr)
	}
	const failures = "pgdns_probe_failures_total"
	p.family(failures, "counter", "Failed probes, by host.")
	for _, h := range hosts {
		p.count(failures, h.failures.Load(), "cluster", h.cluster.name, "host", h.addr)
	}
}

// writeGauges writes the gauges read from v: readiness, each cluster's
// answers, each host's state, by the same rules as the answers.
func (m *Metrics) writeGauges(p *pageWriter, v zone.View) {
	p.family("pgdns_ready", "gauge", "1 once every host has been probed at least once.")
	p.sample("pgdns_ready", boolValue(v.Snap.Ready))
	m.writeClusterGauges(p, v)

	type hostGauge struct {
		name, help string
		// value is the host's, and whether it has one.
		value func(cl *zone.Cluster, h *zone.Host) (float64, bool)
	}
	for _, g := range []hostGauge{
		{"pgdns_host_up", "1 when the host may be answered (a live primary or replica), else 0.",
			func(_ *zone.Cluster, h *zone.Host) (float64, bool) { return boolValue(v.Live(h)), true }},
		{"pgdns_host_role_since_timestamp_seconds", "Unix time the host took its current role (pgdns_host_role), or pgdns's start when it has had it since then.",
			func(cl *zone.Cluster, h *zone.Host) (float64, bool) { return m.roleSince(cl.Name, h.Addr), true }},
		{"pgdns_host_lag_seconds", "Time lag of a replica (docs/probe.md); absent when it cannot be vouched for.",
			func(cl *zone.Cluster, h *zone.Host) (float64, bool) {
				lag, ok := v.Lag(cl, h)
				return lag.Seconds(), ok
			}},
		{"pgdns_host_lag_bytes", "WAL byte lag of a replica; absent when it cannot be vouched for.",
			func(cl *zone.Cluster, h *zone.Host) (float64, bool) {
				b, ok := v.LagBytes(cl, h)
				return float64(b), ok
			}},
		{"pgdns_host_probe_age_seconds", "Time since the host's last successful probe.",
			func(_ *zone.Cluster, h *zone.Host) (float64, bool) { return h.Age(v.Now).Seconds(), h.Seen }},
		{"pgdns_host_stats_hidden", "1 when the probe role cannot read the host's replication statistics (it lacks pg_monitor): pgdns then fails closed on what they decide (docs/operating.md).",
			func(_ *zone.Cluster, h *zone.Host) (float64, bool) { return boolValue(h.StatsHidden), h.Seen }},
	} {
		p.family(g.name, "gauge", g.help)
		for _, cl := range v.Snap.Clusters {
			for i := range cl.Hosts {
				if x, ok := g.value(cl, &cl.Hosts[i]); ok {
					p.sample(g.name, x, "cluster", cl.Name, "host", cl.Hosts[i].Addr)
				}
			}
		}
	}

	const role = "pgdns_host_role"
	p.family(role, "gauge", "1 for the host's current role.")
	for _, cl := range v.Snap.Clusters {
		for i := range cl.Hosts {
			h := &cl.Hosts[i]
			for _, r := range []zone.Role{zone.RolePrimary, zone.RoleReplica, zone.RoleDown, zone.RoleUnknown} {
				p.sample(role, boolValue(h.Role == r), "cluster", cl.Name, "host", h.Addr, "role", r.String())
			}
		}
	}
}

// writeClusterGauges writes each cluster's gauges from v, by the rules of
// the answers.
func (m *Metrics) writeClusterGauges(p *pageWriter, v zone.View) {
	p.family("pgdns_cluster_hosts", "gauge", "Hosts of the cluster pgdns probes (configured and read from Patroni).")
	for _, cl := range v.Snap.Clusters {
		p.sample("pgdns_cluster_hosts", float64(len(cl.Hosts)), "cluster", cl.Name)
	}
	p.family("pgdns_cluster_primary_answered", "gauge", "1 when primary.<cluster>'s A/AAAA answer holds a host now, 0 when it holds none (no primary, a stale one, split brain, a primary answered by SRV only, or pgdns not ready yet).")
	for _, cl := range v.Snap.Clusters {
		p.sample("pgdns_cluster_primary_answered", boolValue(v.AnsweredPrimary(cl) != nil), "cluster", cl.Name)
	}
	p.family("pgdns_cluster_replicas_answered", "gauge", "How many hosts replica.<cluster>'s A/AAAA answer holds now (no lag filter).")
	// Each cluster is selected in a copy of the snapshot holding it
	// alone: the answer of a cluster's name depends on that cluster only,
	// and Select finds a cluster by name in a list, which over every
	// cluster of a fleet made the page quadratic (3,334 clusters: 11
	// million name comparisons, 30% of a scrape).
	one := *v.Snap
	alone := v
	alone.Snap = &one
	one.Clusters = []*zone.Cluster{nil}
	var replicas []*zone.Host
	for _, cl := range v.Snap.Clusters {
		one.Clusters[0], one.Default = cl, cl.Name
		var err error
		replicas, err = alone.Select(&zone.Query{Kind: zone.KindHosts, Target: zone.TargetReplica, Cluster: cl.Name}, replicas[:0])
		if err != nil {
			replicas = replicas[:0] // not ready: none is answered
		}
		p.sample("pgdns_cluster_replicas_answered", float64(len(replicas)), "cluster", cl.Name)
	}
	p.family("pgdns_cluster_split_brain", "gauge", "1 while the cluster has two writable hosts on its newest timeline (no primary answered), else 0.")
	for _, cl := range v.Snap.Clusters {
		p.sample("pgdns_cluster_split_brain", boolValue(cl.SplitBrain), "cluster", cl.Name)
	}
}

// roleSince is the Unix time the host took its current role: pgdns's
// start when no hook has told of a change.
func (m *Metrics) roleSince(cluster, addr string) float64 {
	t := m.start.UnixNano()
	if h := m.fleet.lookupHost(cluster, addr); h != nil {
		if at := h.since.Load(); at != 0 {
			t = at
		}
	}
	return float64(t) / 1e9
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// failureClasses are probe.FailureClasses, as many as clusterStats counts.
func failureClasses() []string {
	return probe.FailureClasses[:min(len(probe.FailureClasses), maxClasses)]
}
