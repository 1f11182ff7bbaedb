// Package metrics exposes pgdns's Prometheus metrics: counters fed by
// hooks of the DNS server, the probe and the HTTP API, and gauges read
// from the current zone snapshot at scrape time.
package metrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/pgdns/pgdns/dnsserver"
	"github.com/pgdns/pgdns/probe"
	"github.com/pgdns/pgdns/zone"
)

// Metrics owns a registry and the pgdns metrics in it, and the fleet's
// counters (fleet.go), written to the page beside the registry's.
type Metrics struct {
	registry     *prometheus.Registry
	table        *zone.Table
	start        time.Time // a host not reported yet has had its role since pgdns started
	fleet        fleetStats
	dnsQueries   *prometheus.CounterVec
	httpRequests *prometheus.CounterVec

	httpClosed   [2]prometheus.Counter // by refused: connections the HTTP cap closed
	lsnWaitsFull prometheus.Counter

	// localities counts replica answers by zone.Locality, resolved once:
	// DNSLocality runs on every such answer.
	localities [3]prometheus.Counter

	// answers caches the counter of each (asked, rcode): DNSAnswer runs on
	// every query, and a label lookup hashes and locks.
	answers sync.Map // answerKey -> prometheus.Counter

	// The state file's, once TrackState has registered them.
	stateOnce     sync.Once
	stateFailures prometheus.Counter
	stateOK       prometheus.Gauge

	alerting // the metrics made to alert on (alerting.go)
}

type probeKey struct{ cluster, host string }

type answerKey struct {
	asked dnsserver.Asked
	rcode int
}

// New registers the metrics, with host gauges read from table.
func New(table *zone.Table) *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		table:    table,
		start:    time.Now(),
		dnsQueries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pgdns_dns_queries_total",
			Help: "DNS queries answered, by what was asked (a role, apex, cluster, ns, invalid, outside, transfer, malformed) and rcode.",
		}, []string{"role", "rcode"}),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pgdns_http_requests_total",
			Help: "HTTP API requests, by route and status code.",
		}, []string{"route", "code"}),
	}
	locality := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pgdns_dns_locality_total",
		Help: "Answers to replica names (replica, prefer-replica, any) that held a host, by where the first host is: in the client's location (local), elsewhere (remote), or the client's location unknown (unlocated: no dns.locations network contains it).",
	}, []string{"answer"})
	for _, l := range []zone.Locality{zone.Unlocated, zone.Local, zone.Remote} {
		m.localities[l] = locality.WithLabelValues(l.String())
	}
	closed := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pgdns_http_conns_closed_total",
		Help: "HTTP connections closed by http.max_conns: the one idle longest, to make room for a new one (reason evicted_idle), or a new one while every connection was inside a request (reason refused_busy).",
	}, []string{"reason"})
	m.httpClosed[0], m.httpClosed[1] = closed.WithLabelValues("evicted_idle"), closed.WithLabelValues("refused_busy")
	m.lsnWaitsFull = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pgdns_dns_lsn_waits_full_total",
		Help: "UDP lsn- lookups that could have waited dns.lsn_wait for a re-probe but were answered at once, as with lsn_wait 0, because the most lookups allowed to wait at once (1024) were waiting.",
	})
	m.registry.MustRegister(locality, closed, m.lsnWaitsFull)
	m.registry.MustRegister(m.dnsQueries, m.httpRequests,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.newAlerting()
	// Every query kind's SERVFAIL exists from the start, at zero: an alert
	// on its rate sees the first one.
	for a := range dnsserver.Asked(dnsserver.NumAsked) {
		m.answerCounter(answerKey{a, dns.RcodeServerFailure})
	}
	return m
}

// DNSAnswer counts one DNS answer (dnsserver.Config.OnAnswer).
func (m *Metrics) DNSAnswer(asked dnsserver.Asked, rcode int) {
	key := answerKey{asked, rcode}
	if c, ok := m.answers.Load(key); ok {
		c.(prometheus.Counter).Inc()
		return
	}
	m.answerCounter(key).Inc()
}

// answerCounter returns the counter of key, made (at zero) and cached
// when it is new.
func (m *Metrics) answerCounter(key answerKey) prometheus.Counter {
	c := m.dnsQueries.WithLabelValues(key.asked.String(), rcodeName(key.rcode))
	m.answers.Store(key, c)
	return c
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
		m.localities[l].Inc()
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
	for i, c := range probeCauses {
		if c == why {
			m.fleet.cluster(cluster).probes[i].Add(uint64(max(n, 0)))
		}
	}
}

// TrackState registers the state file's metrics; pgdns calls it when
// state.path is set, so that without one they are absent rather than
// saying all is well.
func (m *Metrics) TrackState() {
	m.stateOnce.Do(func() {
		m.stateFailures = prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pgdns_state_write_failures_total",
			Help: "Writes of the state file (state.path) that failed; pgdns kept answering from memory and retries.",
		})
		m.stateOK = prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pgdns_state_write_ok",
			Help: "1 when the state file holds what pgdns has learned (its last write succeeded), 0 while writing it fails.",
		})
		m.stateOK.Set(1)
		m.registry.MustRegister(m.stateFailures, m.stateOK)
	})
}

// StateWritten records one attempt to write the state file; TrackState
// must have been called.
func (m *Metrics) StateWritten(err error) {
	if err != nil {
		m.stateFailures.Inc()
		m.stateOK.Set(0)
		return
	}
	m.stateOK.Set(1)
}

// HTTPRequest counts one HTTP request.
func (m *Metrics) HTTPRequest(route string, code int) {
	m.httpRequests.WithLabelValues(route, strconv.Itoa(code)).Inc()
}

// HTTPEvicted counts one connection closed by the HTTP connection cap
// (httpapi.ServerConfig.OnEvict).
func (m *Metrics) HTTPEvicted(refused bool) {
	if refused {
		m.httpClosed[1].Inc()
	} else {
		m.httpClosed[0].Inc()
	}
}

// LSNWaitFull counts one lsn- lookup answered at once because every
// waiting slot was taken (dnsserver.Limits.OnLSNWaitFull).
func (m *Metrics) LSNWaitFull() { m.lsnWaitsFull.Inc() }
