// Package zonetest builds zone fixtures for the tests of the packages
// above zone (dnsserver, httpapi, metrics, probe): a probed host, a
// cluster, the cluster the adapters' tests share (Main), a decided
// snapshot. zone's own tests cannot import it (it
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
// named by its address (zone.DerivedLabel),
// probed successfully at probedAt: timeline 1 known exactly, system
// identifier SystemID, replayed up to replay. A replica (inRecovery) has
// its lag in time and in bytes known, zero until the test sets them; a
// primary has no lag to know.
func Host(ip string, inRecovery bool, replay zone.LSN, probedAt time.Time) zone.Host {
	addr := net.JoinHostPort(ip, "5432")
	return zone.Host{
		Cluster: "main", Addr: addr, IP: netip.MustParseAddr(ip), Port: 5432, Name: zone.DerivedLabel(addr),
		Seen: true, ProbedAt: probedAt, InRecovery: inRecovery,
		Timeline: 1, TimelineExact: true, SystemID: SystemID, ReplayLSN: replay,
		LagKnown: inRecovery, BytesKnown: inRecovery,
	}
}

// Cluster returns the cluster name holding hosts (each now of that
// cluster), not yet decided.
func Cluster(name string, hosts ...zone.Host) *zone.Cluster {
	for i := range hosts {
		hosts[i].Cluster = name
	}
	return &zone.Cluster{Name: name, Hosts: hosts}
}

// Main returns the cluster "main" that the tests of both adapters
// (dnsserver, httpapi) answer from, every host probed at probedAt: a
// primary at 127.0.0.11 (0/3000060), a fresh replica at 127.0.0.12
// (0/3000060, 3 ms and 0 bytes behind) and a replica behind at 127.0.0.13
// (0/3000000, behindLag and behindBytes behind: DNS's tests keep it within
// 1 kB, the pg-status ones beyond 1 MB). A test adds what it is about
// (hosts, clusters, locations) to what Main returns.
func Main(probedAt time.Time, behindLag time.Duration, behindBytes uint64) *zone.Cluster {
	primary := Host("127.0.0.11", false, 0x3000060, probedAt)
	fresh := Host("127.0.0.12", true, 0x3000060, probedAt)
	fresh.Lag = 3 * time.Millisecond
	behind := Host("127.0.0.13", true, 0x3000000, probedAt)
	behind.Lag, behind.LagBytes = behindLag, behindBytes
	return Cluster("main", primary, fresh, behind)
}

// Interval is the probe.interval of Ready's snapshots, the default one: a
// sample younger than it vouches for its lag as it is (zone.View.Lag).
const Interval = 250 * time.Millisecond

// Ready decides each cluster at now (hosts older than staleAfter are
// stale, three failed probes make a host down) and returns them as a
// ready snapshot whose default cluster is the first, probed every
// Interval.
func Ready(now time.Time, staleAfter time.Duration, clusters ...*zone.Cluster) *zone.Snapshot {
	for _, c := range clusters {
		c.Decide(now, staleAfter, 3)
	}
	return &zone.Snapshot{Ready: true, Clusters: clusters, Default: clusters[0].Name, StaleAfter: staleAfter, Interval: Interval}
}
