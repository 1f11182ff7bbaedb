// Package metrics exposes pgdns's Prometheus metrics: counters fed by
// hooks of the DNS server, the probe and the HTTP API, and gauges read
// from the current zone snapshot at scrape time. Every family is kept in
// plain atomics and written to the page line by line (page.go), without
// client_golang: its registry, collectors and protobuf were about 3 MiB
// of pgdns's resident memory, more than a thousand hosts' probe state
// (issue 28).
package metrics

import (
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/dnsserver"
	"github.com/pgdns/pgdns/probe"
	"github.com/pgdns/pgdns/zone"
)

// Metrics holds pgdns's counters and gauges, the fleet's (fleet.go) and
// the rest (DNS, HTTP, the state file, alerting.go's).
type Metrics struct {
	table *zone.Table
	start time.Time // a host not reported yet has had its role since pgdns started
	fleet fleetStats

	// answers counts pgdns_dns_queries_total by (asked, rcode); a series
	// is on the page once it exists.
	answers labeled[answerKey]
	// httpRequests counts pgdns_http_requests_total by (route, code).
	httpRequests labeled[httpKey]

	httpClosed   [2]atomic.Uint64 // by refused: connections the HTTP cap closed
	lsnWaitsFull atomic.Uint64

	// localities counts replica answers by zone.Locality.
	localities [3]atomic.Uint64

	// The state file's, once TrackState has put them on the page.
	stateTracked  atomic.Bool
	stateFailures atomic.Uint64
	stateOK       atomic.Bool

	alerting // the metrics made to alert on (alerting.go)
}

type answerKey struct {
	asked dnsserver.Asked
	rcode int
}

type httpKey struct {
	route string
	code  int
}

// labeled is a counter family with a series per key, made at zero the
// first time the key is counted: a lookup of an existing series is
// lock-free and allocates nothing.
type labeled[K comparable] struct {
	series sync.Map // K -> *atomic.Uint64
}

// at returns the counter of k, made when it is new.
func (l *labeled[K]) at(k K) *atomic.Uint64 {
	if c, ok := l.series.Load(k); ok {
		return c.(*atomic.Uint64)
	}
	c, _ := l.series.LoadOrStore(k, new(atomic.Uint64))
	return c.(*atomic.Uint64)
}

// each calls f with every series and its count.
func (l *labeled[K]) each(f func(K, uint64)) {
	l.series.Range(func(k, c any) bool {
		f(k.(K), c.(*atomic.Uint64).Load())
		return true
	})
}

// New makes the metrics, with host gauges read from table.
func New(table *zone.Table) *Metrics {
	m := &Metrics{table: table, start: time.Now()}
	m.newAlerting()
	// Every query kind's SERVFAIL exists from the start, at zero: an alert
	// on its rate sees the first one.
	for a := range dnsserver.Asked(dnsserver.NumAsked) {
		m.answers.at(answerKey{a, dns.RcodeServerFailure})
	}
	return m
}

// DNSAnswer counts one DNS answer (dnsserver.Config.OnAnswer).
func (m *Metrics) DNSAnswer(asked dnsserver.Asked, rcode int) {
	m.answers.at(answerKey{asked, rcode}).Add(1)
}

// rcodeName is the label of rcode: its mnemonic, else its number.
func rcodeName(rcode int) string {
	if name, ok := dns.RcodeToString[rcode]; ok {
		return name
	}
	return strconv.Itoa(rcode)
}

// DNSLocality counts one answer to a replica name by where it sends the
// client (dnsserver.Config.OnLocality).
func (m *Metrics) DNSLocality(l zone.Locality) {
	if int(l) < len(m.localities) {
		m.localities[l].Add(1)
	}
}

// ProbeDone records one probe of the host, found by name.
func (m *Metrics) ProbeDone(cluster, host string, took time.Duration, err error) {
	m.fleet.host(cluster, host).probeDone(took, err)
}

// HostProbes returns what records each probe of the host
// (probe.Hooks.HostProbes): the host's loop keeps it, so a probe finds
// its counters without hashing two names into a map (5% of the probe's
// CPU at 1,000 hosts, issue 28). It allocates nothing and takes no lock.
func (m *Metrics) HostProbes(cluster, host string) func(took time.Duration, err error) {
	return m.fleet.host(cluster, host).probeDone
}

func (h *hostStats) probeDone(took time.Duration, err error) {
	h.probes.Add(1)
	h.cluster.duration.observe(took.Seconds())
	if err != nil {
		h.failures.Add(1)
		h.cluster.errors[failureClass(err)].Add(1)
	}
}

// RoleChanged counts one change of a host's role, notes when the host
// took it (pgdns_host_role_since_timestamp_seconds), and counts a change
// of the cluster's primary (pgdns_primary_changes_total).
func (m *Metrics) RoleChanged(cluster, host string, from, to zone.Role) {
	h := m.fleet.host(cluster, host)
	c := h.cluster
	c.roleChanges[roleIndex(from)][roleIndex(to)].Add(1)
	h.since.Store(time.Now().UnixNano())
	if to != zone.RolePrimary {
		return
	}
	c.mu.Lock()
	last := c.lastPrimary
	c.lastPrimary = host
	c.mu.Unlock()
	if last != "" && last != host {
		c.moved.Add(1)
	}
}

// SplitBrain counts one cluster entering split brain.
func (m *Metrics) SplitBrain(cluster string) { m.fleet.cluster(cluster).splitBrains.Add(1) }

// RefreshRound counts one refresh round started.
func (m *Metrics) RefreshRound(cluster string) { m.fleet.cluster(cluster).refreshRounds.Add(1) }

// LSNUnreachable counts one lsn- lookup answered without a refresh because
// its LSN is beyond the primary's reach (dnsserver.Config.OnLSNUnreachable).
func (m *Metrics) LSNUnreachable(cluster string) { m.fleet.cluster(cluster).lsnUnreachable.Add(1) }

// RefreshCoalesced counts one refresh asked for that started no round,
// with why (probe.Hooks.RefreshCoalesced).
func (m *Metrics) RefreshCoalesced(cluster string, why probe.Coalesced) {
	for i, r := range coalescedReasons {
		if r == why {
			m.fleet.cluster(cluster).coalesced[i].Add(1)
		}
	}
}

// FluxProbes counts the probes of one flux round of a cluster.
func (m *Metrics) FluxProbes(cluster string, hosts int) {
	m.fleet.cluster(cluster).fluxProbes.Add(uint64(max(hosts, 0)))
}

// Probes counts n probes of cluster made for why (probe.Hooks.Probes).
func (m *Metrics) Probes(cluster string, why probe.ProbeCause, n int) {
	m.fleet.cluster(cluster).countProbes(why, n)
}

// ClusterProbes returns what counts the probes of cluster
// (probe.Hooks.ClusterProbes): the prober keeps it for each cluster, so
// that the three counts of each probe round (its tick, its replicas'
// probes, its closing probe) find their counters without hashing the
// cluster's name into a map (about 1% of pgdns's CPU at 1,000 hosts,
// issue 28). It allocates nothing and takes no lock.
func (m *Metrics) ClusterProbes(cluster string) func(why probe.ProbeCause, n int) {
	return m.fleet.cluster(cluster).countProbes
}

func (c *clusterStats) countProbes(why probe.ProbeCause, n int) {
	for i, w := range probeCauses {
		if w == why {
			c.probes[i].Add(uint64(max(n, 0)))
			return
		}
	}
}

// TrackState puts the state file's metrics on the page; pgdns calls it
// when state.path is set, so that without one they are absent rather
// than saying all is well.
func (m *Metrics) TrackState() {
	if !m.stateTracked.Swap(true) {
		m.stateOK.Store(true)
	}
}

// StateWritten records one attempt to write the state file; TrackState
// must have been called.
func (m *Metrics) StateWritten(err error) {
	if err != nil {
		m.stateFailures.Add(1)
		m.stateOK.Store(false)
		return
	}
	m.stateOK.Store(true)
}

// HTTPRequest counts one HTTP request.
func (m *Metrics) HTTPRequest(route string, code int) {
	m.httpRequests.at(httpKey{route, code}).Add(1)
}

// HTTPEvicted counts one connection closed by the HTTP connection cap
// (httpapi.ServerConfig.OnEvict).
func (m *Metrics) HTTPEvicted(refused bool) {
	if refused {
		m.httpClosed[1].Add(1)
	} else {
		m.httpClosed[0].Add(1)
	}
}

// LSNWaitFull counts one lsn- lookup answered at once because every
// waiting slot was taken (dnsserver.Limits.OnLSNWaitFull).
func (m *Metrics) LSNWaitFull() { m.lsnWaitsFull.Add(1) }

// floatGauge is a gauge's value in an atomic.
type floatGauge struct{ bits atomic.Uint64 }

func (g *floatGauge) set(v float64) { g.bits.Store(math.Float64bits(v)) }
func (g *floatGauge) get() float64  { return math.Float64frombits(g.bits.Load()) }
