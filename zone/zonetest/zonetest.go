// Package zonetest builds zone fixtures for the tests of the packages
// above zone (dnsserver, httpapi, metrics, probe): a probed host, a
// cluster, a decided snapshot. zone's own tests cannot import it (it
// imports zone) and keep their own small builders.
package zonetest

import (
	"net"
	"net/netip"
	"time"

	"github.com/pgdns/pgdns/zone"
)

// T0 is the fixed clock of fixtures, so that an answer that depends on
// ages is the same on every run.
var T0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// SystemID is the system identifier every fixture host reports: one
// cluster of hosts that agree.
const SystemID = 7

// Host returns a host of cluster "main" at ip, port 5432 (ip may be IPv6),
// probed successfully at probedAt: timeline 1 known exactly, system
// identifier SystemID, replayed up to replay. A replica (inRecovery) has
// its lag in time and in bytes known, zero until the test sets them; a
// primary has no lag to know.
func Host(ip string, inRecovery bool, replay zone.LSN, probedAt time.Time) zone.Host {
	return zone.Host{
		Cluster: "main", Addr: net.JoinHostPort(ip, "5432"), IP: netip.MustParseAddr(ip),
		Seen: true, ProbedAt: probedAt, InRecovery: inRecovery,
		Timeline: 1, TimelineExact: true, SystemID: SystemID, ReplayLSN: replay,
		LagKnown: inRecovery, BytesKnown: inRecovery,
	}
}

// Cluster returns the cluster name holding hosts, not yet decided.
func Cluster(name string, hosts ...zone.Host) *zone.Cluster {
	return &zone.Cluster{Name: name, Hosts: hosts}
}

// Ready decides each cluster at now (hosts older than staleAfter are
// stale, three failed probes make a host down) and returns them as a
// ready snapshot whose default cluster is the first.
func Ready(now time.Time, staleAfter time.Duration, clusters ...*zone.Cluster) *zone.Snapshot {
	for _, c := range clusters {
		c.Decide(now, staleAfter, 3)
	}
	return &zone.Snapshot{Ready: true, Clusters: clusters, Default: clusters[0].Name, StaleAfter: staleAfter}
}
