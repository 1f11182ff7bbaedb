package metrics

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgdns/pgdns/dnsserver"
	"github.com/pgdns/pgdns/probe"
	"github.com/pgdns/pgdns/zone"
)

// alerting holds the metrics made for alerts and dashboards
// (deploy/prometheus, deploy/grafana): what runs, whether its
// configuration took, how fast it answers, and failure counters that
// exist at zero before the first failure, since rate() and increase()
// cannot see the increment that creates a series.
type alerting struct {
	buildInfo       *prometheus.GaugeVec
	reloadOK        prometheus.Gauge
	reloadOKAt      prometheus.Gauge
	latency         *prometheus.HistogramVec
	probeErrors     *prometheus.CounterVec
	primaryChanges  *prometheus.CounterVec
	fluxEpisodes    *prometheus.CounterVec
	latencyByRcode  [dnsserver.NumPaths][maxCachedRcode]atomic.Pointer[observer]
	limiter         atomic.Pointer[dnsserver.RateLimiter]
	roleSince       roleSince
	clusterCounters []*prometheus.CounterVec // by cluster alone: made at zero for each configured cluster
}

// maxCachedRcode bounds the rcodes whose latency histogram is cached in
// an array: every rcode pgdns sends (BADVERS is 16) is below it.
const maxCachedRcode = 24

// observer is one latency histogram, behind an atomic pointer.
type observer struct{ prometheus.Observer }

// latencyBuckets span the fast path's microseconds to an lsn- lookup
// that waited for a re-probe.
var latencyBuckets = []float64{.000005, .00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}

func (m *Metrics) newAlerting() {
	a := &m.alerting
	a.buildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pgdns_build_info",
		Help: "Always 1; its labels say which pgdns runs: its version (pgdns -version) and the Go version it was built with.",
	}, []string{"version", "goversion"})
	a.reloadOK = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "pgdns_config_last_reload_successful",
		Help: "1 when the last configuration reload (SIGHUP) was applied, 0 when it was rejected and the configuration before it still runs; 1 from the start.",
	})
	a.reloadOKAt = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "pgdns_config_last_reload_success_timestamp_seconds",
		Help: "Unix time of the last configuration applied: pgdns's start, or the last reload that succeeded.",
	})
	a.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "pgdns_dns_answer_duration_seconds",
		Help:    "Time to answer one DNS query, from the query in hand to the reply built (sending excluded), by path (fast: UDP A/AAAA of a role name, allocation-free; slow: the rest, TCP included) and rcode. An lsn- lookup that waited for a re-probe includes the wait.",
		Buckets: latencyBuckets,
	}, []string{"path", "rcode"})
	a.probeErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pgdns_probe_errors_total",
		Help: "Failed probes by cluster and class: not_serving (refused, reset, shut down or starting up), timeout, auth (the server refused the probe role), server_error, dns (the host name did not resolve), other. Each class starts at zero.",
	}, []string{"cluster", "class"})
	a.primaryChanges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pgdns_primary_changes_total",
		Help: "Times a cluster's primary became a host other than the last one pgdns saw as its primary: failovers and switchovers (the first primary pgdns sees, and an old primary coming back, are not counted).",
	}, []string{"cluster"})
	a.fluxEpisodes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pgdns_flux_episodes_total",
		Help: "Times a cluster entered flux (its role answer changed: its primary went down or changed, a host changed role), when pgdns probes it every probe.flux_interval for up to probe.flux_duration.",
	}, []string{"cluster"})
	rateLimited := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "pgdns_dns_rate_limited_total",
		Help: "UDP queries over dns.rate_limit, answered with an empty truncated reply (TC) instead of their answer; 0 without a limit.",
	}, func() float64 { return float64(a.limiter.Load().Limited()) })
	a.reloadOK.Set(1)
	a.reloadOKAt.Set(float64(time.Now().UnixNano()) / 1e9)
	a.roleSince = roleSince{start: time.Now(), hosts: map[probeKey]time.Time{}, primary: map[string]string{}}
	a.clusterCounters = []*prometheus.CounterVec{m.splitBrains, m.fluxProbes, m.lsnUnreachable, m.refreshRounds, a.primaryChanges, a.fluxEpisodes}
	m.SetVersion("dev")
	m.registry.MustRegister(a.buildInfo, a.reloadOK, a.reloadOKAt, a.latency, a.probeErrors, a.primaryChanges, a.fluxEpisodes, rateLimited)
}

// SetVersion sets pgdns_build_info's version label (cmd/pgdns's
// -ldflags version); "dev" until it is called.
func (m *Metrics) SetVersion(version string) {
	m.buildInfo.Reset()
	m.buildInfo.WithLabelValues(version, runtime.Version()).Set(1)
}

// Reloaded records the outcome of one configuration reload: nil, it was
// applied.
func (m *Metrics) Reloaded(err error) {
	if err != nil {
		m.reloadOK.Set(0)
		return
	}
	m.reloadOK.Set(1)
	m.reloadOKAt.Set(float64(time.Now().UnixNano()) / 1e9)
}

// SetClusters makes every per-cluster failure counter of each of names
// at zero, so that rate() and increase() see its first increment. A
// cluster dropped by a reload keeps its series until pgdns restarts.
func (m *Metrics) SetClusters(names []string) {
	for _, name := range names {
		for _, v := range m.clusterCounters {
			v.WithLabelValues(name)
		}
		for _, why := range []probe.Coalesced{probe.CoalescedRunning, probe.CoalescedMinGap} {
			m.refreshCoalesced.WithLabelValues(name, string(why))
		}
		for _, class := range probe.FailureClasses {
			m.probeErrors.WithLabelValues(name, class)
		}
	}
}

// FluxBegan counts one flux episode of cluster (probe.Hooks.FluxBegan).
func (m *Metrics) FluxBegan(cluster string) { m.fluxEpisodes.WithLabelValues(cluster).Inc() }

// TrackRateLimiter makes pgdns_dns_rate_limited_total read r (nil: no
// limit, the counter stays 0).
func (m *Metrics) TrackRateLimiter(r *dnsserver.RateLimiter) { m.limiter.Store(r) }

// DNSLatency records how long one answer took (dnsserver.Config.OnLatency).
// It allocates nothing once the histogram of (path, rcode) exists: it
// runs on the fast path.
func (m *Metrics) DNSLatency(path dnsserver.Path, rcode int, took time.Duration) {
	if int(path) >= dnsserver.NumPaths || rcode < 0 || rcode >= maxCachedRcode {
		m.latency.WithLabelValues(path.String(), rcodeName(rcode)).Observe(took.Seconds())
		return
	}
	slot := &m.latencyByRcode[path][rcode]
	o := slot.Load()
	if o == nil {
		o = &observer{m.latency.WithLabelValues(path.String(), rcodeName(rcode))}
		slot.Store(o) // a racing store holds the same child
	}
	o.Observe(took.Seconds())
}

// roleSince remembers when each host took its current role, and each
// cluster's last primary, from RoleChanged.
type roleSince struct {
	start   time.Time // a host not reported yet has had its role since pgdns started
	mu      sync.Mutex
	hosts   map[probeKey]time.Time
	primary map[string]string // cluster -> address of the last host seen becoming its primary
}

// changed notes that host took role to at now; it reports whether the
// cluster's primary changed to another host than the last one.
func (r *roleSince) changed(cluster, host string, to zone.Role, now time.Time) (newPrimary bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hosts[probeKey{cluster, host}] = now
	if to != zone.RolePrimary {
		return false
	}
	last := r.primary[cluster]
	r.primary[cluster] = host
	return last != "" && last != host
}

// of is the Unix time host took its current role.
func (r *roleSince) of(cluster, host string) float64 {
	r.mu.Lock()
	t, ok := r.hosts[probeKey{cluster, host}]
	r.mu.Unlock()
	if !ok {
		t = r.start
	}
	return float64(t.UnixNano()) / 1e9
}

var (
	hostRoleSince = prometheus.NewDesc("pgdns_host_role_since_timestamp_seconds",
		"Unix time the host took its current role (pgdns_host_role), or pgdns's start when it has had it since then.", []string{"cluster", "host"}, nil)
	clusterHosts = prometheus.NewDesc("pgdns_cluster_hosts",
		"Hosts of the cluster pgdns probes (configured and read from Patroni).", []string{"cluster"}, nil)
	clusterPrimary = prometheus.NewDesc("pgdns_cluster_primary_answered",
		"1 when primary.<cluster>'s A/AAAA answer holds a host now, 0 when it holds none (no primary, a stale one, split brain, a primary answered by SRV only, or pgdns not ready yet).", []string{"cluster"}, nil)
	clusterReplicas = prometheus.NewDesc("pgdns_cluster_replicas_answered",
		"How many hosts replica.<cluster>'s A/AAAA answer holds now (no lag filter).", []string{"cluster"}, nil)
	clusterSplitBrain = prometheus.NewDesc("pgdns_cluster_split_brain",
		"1 while the cluster has two writable hosts on its newest timeline (no primary answered), else 0.", []string{"cluster"}, nil)
)

// collectCluster reports cl's gauges from v, by the rules of the answers.
func (hostCollector) collectCluster(ch chan<- prometheus.Metric, v zone.View, cl *zone.Cluster) {
	ch <- prometheus.MustNewConstMetric(clusterHosts, prometheus.GaugeValue, float64(len(cl.Hosts)), cl.Name)
	ch <- prometheus.MustNewConstMetric(clusterPrimary, prometheus.GaugeValue, boolValue(v.AnsweredPrimary(cl) != nil), cl.Name)
	replicas, err := v.Select(&zone.Query{Kind: zone.KindHosts, Target: zone.TargetReplica, Cluster: cl.Name}, nil)
	if err != nil {
		replicas = nil // not ready: none is answered
	}
	ch <- prometheus.MustNewConstMetric(clusterReplicas, prometheus.GaugeValue, float64(len(replicas)), cl.Name)
	ch <- prometheus.MustNewConstMetric(clusterSplitBrain, prometheus.GaugeValue, boolValue(cl.SplitBrain), cl.Name)
}
