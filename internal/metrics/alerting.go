package metrics

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgdns/pgdns/dnsserver"
)

// alerting holds the metrics made for alerts and dashboards
// (deploy/prometheus, deploy/grafana): what runs, whether its
// configuration took, how fast it answers. The per-cluster failure
// counters they read are the fleet's (fleet.go), at zero before the
// first failure, since rate() and increase() cannot see the increment
// that creates a series.
type alerting struct {
	version    atomic.Pointer[string] // pgdns_build_info's version label
	reloadOK   atomic.Bool
	reloadOKAt floatGauge
	// latencies are pgdns_dns_answer_duration_seconds's series by
	// latencyKey; latencyByRcode caches those of every path and common
	// rcode in an array, for the fast path.
	latencies      sync.Map // latencyKey -> *latencyHist
	latencyByRcode [dnsserver.NumPaths][maxCachedRcode]atomic.Pointer[latencyHist]
	limiter        atomic.Pointer[dnsserver.RateLimiter]
}

// maxCachedRcode bounds the rcodes whose latency histogram is cached in
// an array: every rcode pgdns sends (BADVERS is 16) is below it.
const maxCachedRcode = 24

type latencyKey struct {
	path  dnsserver.Path
	rcode int
}

// latencyBuckets span the fast path's microseconds to an lsn- lookup
// that waited for a re-probe.
var latencyBuckets = []float64{.000005, .00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}

// latencyHist is one series of pgdns_dns_answer_duration_seconds: a
// count per bucket of latencyBuckets (the last is +Inf) and the sum.
type latencyHist struct {
	counts  [18]atomic.Uint64 // len(latencyBuckets)+1
	sumBits atomic.Uint64
}

func (m *Metrics) newAlerting() {
	m.SetVersion("dev")
	m.reloadOK.Store(true)
	m.reloadOKAt.set(float64(time.Now().UnixNano()) / 1e9)
}

// SetVersion sets pgdns_build_info's version label (cmd/pgdns's
// -ldflags version); "dev" until it is called.
func (m *Metrics) SetVersion(version string) { m.version.Store(&version) }

// Reloaded records the outcome of one configuration reload: nil, it was
// applied.
func (m *Metrics) Reloaded(err error) {
	if err != nil {
		m.reloadOK.Store(false)
		return
	}
	m.reloadOK.Store(true)
	m.reloadOKAt.set(float64(time.Now().UnixNano()) / 1e9)
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
	var h *latencyHist
	if int(path) >= dnsserver.NumPaths || rcode < 0 || rcode >= maxCachedRcode {
		h = m.latency(latencyKey{path, rcode})
	} else if slot := &m.latencyByRcode[path][rcode]; slot.Load() != nil {
		h = slot.Load()
	} else {
		h = m.latency(latencyKey{path, rcode})
		slot.Store(h) // a racing store holds the same histogram
	}
	observe(h.counts[:], &h.sumBits, latencyBuckets, took.Seconds())
}

// latency returns the histogram of k, made when it is new.
func (m *Metrics) latency(k latencyKey) *latencyHist {
	if h, ok := m.latencies.Load(k); ok {
		return h.(*latencyHist)
	}
	h, _ := m.latencies.LoadOrStore(k, new(latencyHist))
	return h.(*latencyHist)
}

// goVersion is pgdns_build_info's goversion label.
var goVersion = runtime.Version()
