// Package metrics exposes pgdns's Prometheus metrics: counters fed by
// hooks of the DNS server, the probe and the HTTP API, and gauges read
// from the current zone snapshot at scrape time.
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pgdns/pgdns/dnsserver"
	"github.com/pgdns/pgdns/probe"
	"github.com/pgdns/pgdns/zone"
)

// Metrics owns a registry and the pgdns metrics in it.
type Metrics struct {
	registry      *prometheus.Registry
	dnsQueries    *prometheus.CounterVec
	probeDuration *prometheus.HistogramVec
	probeFailures *prometheus.CounterVec
	roleChanges   *prometheus.CounterVec
	splitBrains   *prometheus.CounterVec
	httpRequests  *prometheus.CounterVec

	refreshRounds    *prometheus.CounterVec
	refreshCoalesced *prometheus.CounterVec
	lsnUnreachable   *prometheus.CounterVec
	fluxProbes       *prometheus.CounterVec
	probesAsked      *prometheus.CounterVec

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

	// probes caches each host's probe duration histogram the same way:
	// ProbeDone runs on every probe of every host, thousands a second
	// with a thousand hosts (issue 17); and its failure counter, made at
	// zero on the host's first probe so that rate() sees the first failure.
	probes sync.Map // probeKey -> *hostProbes

	alerting // the metrics made to alert on (alerting.go)
}

// hostProbes are the probe metrics of one host.
type hostProbes struct {
	duration prometheus.Observer
	failures prometheus.Counter
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
		dnsQueries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pgdns_dns_queries_total",
			Help: "DNS queries answered, by what was asked (a role, apex, cluster, ns, invalid, outside, transfer, malformed) and rcode.",
		}, []string{"role", "rcode"}),
		probeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pgdns_probe_duration_seconds",
			Help:    "Duration of one probe of one host, connecting included.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"cluster", "host"}),
		probeFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pgdns_probe_failures_total",
			Help: "Failed probes, by host.",
		}, []string{"cluster", "host"}),
		roleChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pgdns_role_changes_total",
			Help: "Changes of a host's role (primary, replica, down, unknown).",
		}, []string{"cluster", "host", "from", "to"}),
		splitBrains: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pgdns_split_brain_total",
			Help: "Times a cluster had two writable hosts on its highest timeline (no primary answered meanwhile).",
		}, []string{"cluster"}),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pgdns_http_requests_total",
			Help: "HTTP API requests, by route and status code.",
		}, []string{"route", "code"}),
	}
	m.refreshRounds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pgdns_lsn_refresh_rounds_total",
		Help: "Refresh rounds started for lsn- lookups no replica satisfied: each probes the cluster's primary and replicas once.",
	}, []string{"cluster"})
	m.refreshCoalesced = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pgdns_lsn_refresh_coalesced_total",
		Help: "Refreshes asked for by lsn- lookups that started no round: they shared the round running (reason running) or waited for the one due at the end of dns.lsn_refresh_min_gap (reason min_gap).",
	}, []string{"cluster", "reason"})
	m.lsnUnreachable = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pgdns_lsn_unreachable_total",
		Help: "lsn- lookups answered at once, without a refresh round, because their LSN is beyond any position the cluster's primary can have reached (forged, another cluster's, or lost in a failover).",
	}, []string{"cluster"})
	m.fluxProbes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pgdns_flux_probes_total",
		Help: "Probes asked for beyond the interval while a cluster was in flux (its primary went down or changed, a host changed role): the extra load of fast failover.",
	}, []string{"cluster"})
	m.probesAsked = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pgdns_probes_total",
		Help: "Probes by why they were made then: tick (a host's own probe.interval tick: a primary's opens a probe round, a host without a primary probes alone), tick_driven (a replica's own tick while its cluster has a primary, whose rounds did not drive it then), round (kicked by its primary's probe round), closing (the primary probed again to close a round: its replicas' byte lag bounds), flux, refresh (lsn- lookups).",
	}, []string{"cluster", "why"})
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
	m.registry.MustRegister(m.refreshRounds, m.refreshCoalesced, m.lsnUnreachable, m.fluxProbes, m.probesAsked, locality, closed, m.lsnWaitsFull)
	m.registry.MustRegister(m.dnsQueries, m.probeDuration, m.probeFailures, m.roleChanges, m.splitBrains, m.httpRequests,
		hostCollector{table: table, since: &m.roleSince},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.newAlerting()
	// Every query kind's SERVFAIL exists from the start, at zero: an alert
	// on its rate sees the first one.
	for a := range dnsserver.Asked(dnsserver.NumAsked) {
		m.answerCounter(answerKey{a, dns.RcodeServerFailure})
	}
	return m
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
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

// ProbeDone records one probe.
func (m *Metrics) ProbeDone(cluster, host string, took time.Duration, err error) {
	key := probeKey{cluster, host}
	v, ok := m.probes.Load(key)
	if !ok {
		v, _ = m.probes.LoadOrStore(key, &hostProbes{
			duration: m.probeDuration.WithLabelValues(cluster, host),
			failures: m.probeFailures.WithLabelValues(cluster, host),
		})
	}
	p := v.(*hostProbes)
	p.duration.Observe(took.Seconds())
	if err != nil {
		p.failures.Inc()
		m.probeErrors.WithLabelValues(cluster, probe.FailureClass(err)).Inc()
	}
}

// RoleChanged counts one change of a host's role, notes when the host
// took it (pgdns_host_role_since_timestamp_seconds), and counts a change
// of the cluster's primary (pgdns_primary_changes_total).
func (m *Metrics) RoleChanged(cluster, host string, from, to zone.Role) {
	m.roleChanges.WithLabelValues(cluster, host, from.String(), to.String()).Inc()
	if m.roleSince.changed(cluster, host, to, time.Now()) {
		m.primaryChanges.WithLabelValues(cluster).Inc()
	}
}

// SplitBrain counts one cluster entering split brain.
func (m *Metrics) SplitBrain(cluster string) {
	m.splitBrains.WithLabelValues(cluster).Inc()
}

// RefreshRound counts one refresh round started.
func (m *Metrics) RefreshRound(cluster string) {
	m.refreshRounds.WithLabelValues(cluster).Inc()
}

// LSNUnreachable counts one lsn- lookup answered without a refresh because
// its LSN is beyond the primary's reach (dnsserver.Config.OnLSNUnreachable).
func (m *Metrics) LSNUnreachable(cluster string) {
	m.lsnUnreachable.WithLabelValues(cluster).Inc()
}

// RefreshCoalesced counts one refresh asked for that started no round,
// with why (probe.Hooks.RefreshCoalesced).
func (m *Metrics) RefreshCoalesced(cluster string, why probe.Coalesced) {
	m.refreshCoalesced.WithLabelValues(cluster, string(why)).Inc()
}

// FluxProbes counts the probes of one flux round of a cluster.
func (m *Metrics) FluxProbes(cluster string, hosts int) {
	m.fluxProbes.WithLabelValues(cluster).Add(float64(hosts))
}

// Probes counts n probes of cluster made for why (probe.Hooks.Probes).
func (m *Metrics) Probes(cluster string, why probe.ProbeCause, n int) {
	m.probesAsked.WithLabelValues(cluster, string(why)).Add(float64(n))
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

// hostCollector reports the state of every host from the snapshot current
// at scrape time, so the gauges can never disagree with the answers.
type hostCollector struct {
	table *zone.Table
	since *roleSince
}

var (
	hostUp = prometheus.NewDesc("pgdns_host_up",
		"1 when the host may be answered (a live primary or replica), else 0.", []string{"cluster", "host"}, nil)
	hostRole = prometheus.NewDesc("pgdns_host_role",
		"1 for the host's current role.", []string{"cluster", "host", "role"}, nil)
	hostLag = prometheus.NewDesc("pgdns_host_lag_seconds",
		"Time lag of a replica (docs/probe.md); absent when it cannot be vouched for.", []string{"cluster", "host"}, nil)
	hostLagBytes = prometheus.NewDesc("pgdns_host_lag_bytes",
		"WAL byte lag of a replica; absent when it cannot be vouched for.", []string{"cluster", "host"}, nil)
	hostProbeAge = prometheus.NewDesc("pgdns_host_probe_age_seconds",
		"Time since the host's last successful probe.", []string{"cluster", "host"}, nil)
	hostStatsHidden = prometheus.NewDesc("pgdns_host_stats_hidden",
		"1 when the probe role cannot read the host's replication statistics (it lacks pg_monitor): pgdns then fails closed on what they decide (docs/operating.md).",
		[]string{"cluster", "host"}, nil)
	ready = prometheus.NewDesc("pgdns_ready",
		"1 once every host has been probed at least once.", nil, nil)
)

func (hostCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{hostUp, hostRole, hostLag, hostLagBytes, hostProbeAge, hostStatsHidden, ready,
		hostRoleSince, clusterHosts, clusterPrimary, clusterReplicas, clusterSplitBrain} {
		ch <- d
	}
}

// Collect reads one view of the table, at the moment of the scrape: host
// up and lags by the same rules as the answers.
func (c hostCollector) Collect(ch chan<- prometheus.Metric) {
	v := c.table.View(time.Now())
	ch <- prometheus.MustNewConstMetric(ready, prometheus.GaugeValue, boolValue(v.Snap.Ready))
	for _, cl := range v.Snap.Clusters {
		c.collectCluster(ch, v, cl)
		for i := range cl.Hosts {
			h := &cl.Hosts[i]
			ch <- prometheus.MustNewConstMetric(hostRoleSince, prometheus.GaugeValue, c.since.of(cl.Name, h.Addr), cl.Name, h.Addr)
			ch <- prometheus.MustNewConstMetric(hostUp, prometheus.GaugeValue, boolValue(v.Live(h)), cl.Name, h.Addr)
			for _, r := range []zone.Role{zone.RolePrimary, zone.RoleReplica, zone.RoleDown, zone.RoleUnknown} {
				ch <- prometheus.MustNewConstMetric(hostRole, prometheus.GaugeValue, boolValue(h.Role == r), cl.Name, h.Addr, r.String())
			}
			if lag, ok := v.Lag(cl, h); ok {
				ch <- prometheus.MustNewConstMetric(hostLag, prometheus.GaugeValue, lag.Seconds(), cl.Name, h.Addr)
			}
			if b, ok := v.LagBytes(cl, h); ok {
				ch <- prometheus.MustNewConstMetric(hostLagBytes, prometheus.GaugeValue, float64(b), cl.Name, h.Addr)
			}
			if h.Seen {
				ch <- prometheus.MustNewConstMetric(hostProbeAge, prometheus.GaugeValue, h.Age(v.Now).Seconds(), cl.Name, h.Addr)
				ch <- prometheus.MustNewConstMetric(hostStatsHidden, prometheus.GaugeValue, boolValue(h.StatsHidden), cl.Name, h.Addr)
			}
		}
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
