package metrics

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgdns/pgdns/dnsserver"
)

// alerting holds the metrics made for alerts and dashboards
// (deploy/prometheus, deploy/grafana): what runs, whether its
// configuration took, how fast it answers. The per-cluster failure
// counters they read are the fleet's (fleet.go), at zero before the
// first failure, since rate() and increase() cannot see the increment
// that creates a series.
type alerting struct {
	buildInfo      *prometheus.GaugeVec
	reloadOK       prometheus.Gauge
	reloadOKAt     prometheus.Gauge
	latency        *prometheus.HistogramVec
	latencyByRcode [dnsserver.NumPaths][maxCachedRcode]atomic.Pointer[observer]
	limiter        atomic.Pointer[dnsserver.RateLimiter]
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
	rateLimited := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "pgdns_dns_rate_limited_total",
		Help: "UDP queries over dns.rate_limit, answered with an empty truncated reply (TC) instead of their answer; 0 without a limit.",
	}, func() float64 { return float64(a.limiter.Load().Limited()) })
	a.reloadOK.Set(1)
	a.reloadOKAt.Set(float64(time.Now().UnixNano()) / 1e9)
	m.SetVersion("dev")
	m.registry.MustRegister(a.buildInfo, a.reloadOK, a.reloadOKAt, a.latency, rateLimited)
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

// SetClusters puts every per-cluster counter of each of names on the
// page, at zero, so that rate() and increase() see its first increment.
// A cluster dropped by a reload keeps its series until pgdns restarts.
func (m *Metrics) SetClusters(names []string) {
	for _, name := range names {
		m.fleet.cluster(name)
	}
}

// FluxBegan counts one flux episode of cluster (probe.Hooks.FluxBegan).
func (m *Metrics) FluxBegan(cluster string) { m.fleet.cluster(cluster).fluxEpisodes.Add(1) }

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
