package metrics

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/pgdns/pgdns/dnsserver"
	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/probe"
	"github.com/pgdns/pgdns/zone"
)

// parsePage parses a page of the text format strictly: a family written
// twice, a malformed line or escape fails.
func parsePage(t *testing.T, page string) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(page))
	if err != nil {
		t.Fatalf("the page does not parse: %v", err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(page, "\n") {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, _, _ = strings.Cut(name, " ")
			if seen[name] {
				t.Fatalf("family %s written twice", name)
			}
			seen[name] = true
		}
	}
	return families
}

// series counts the series of a family as Prometheus stores them: a
// histogram's buckets, its sum and count each.
func series(f *dto.MetricFamily) int {
	n := 0
	for _, m := range f.Metric {
		if h := m.GetHistogram(); h != nil {
			n += len(h.Bucket) + 2 // the buckets, _sum, _count
			if b := h.Bucket; len(b) == 0 || !math.IsInf(b[len(b)-1].GetUpperBound(), 1) {
				n++ // +Inf, which the parser may leave implied
			}
			continue
		}
		n++
	}
	return n
}

// busy gives every per-cluster and per-host counter something to count:
// probes failing in every class, every role change, flux, split brain,
// refreshes of every kind.
func busy(m *Metrics, clusters []*zone.Cluster) {
	errs := []error{context.DeadlineExceeded, errors.New("other"), &net.DNSError{Err: "no such host", Name: "x", IsNotFound: true}}
	for _, cl := range clusters {
		for _, h := range cl.Hosts {
			for _, err := range errs {
				m.ProbeDone(cl.Name, h.Addr, time.Duration(len(h.Addr))*time.Millisecond, err)
			}
			for from := range zone.Role(numRoles) {
				for to := range zone.Role(numRoles) {
					m.RoleChanged(cl.Name, h.Addr, from, to)
				}
			}
		}
		for _, why := range probeCauses {
			m.Probes(cl.Name, why, 2)
		}
		m.FluxBegan(cl.Name)
		m.FluxProbes(cl.Name, len(cl.Hosts))
		m.SplitBrain(cl.Name)
		m.RefreshRound(cl.Name)
		m.LSNUnreachable(cl.Name)
		for _, r := range coalescedReasons {
			m.RefreshCoalesced(cl.Name, r)
		}
	}
	for a := range dnsserver.Asked(dnsserver.NumAsked) {
		for _, rcode := range []int{0, 2, 3, 5} {
			m.DNSAnswer(a, rcode)
		}
	}
}

// growth says how a family's series may grow with the fleet: by at most
// perHost series a host, perCluster a cluster, or not at all.
type growth struct{ perHost, perCluster int }

// fleetGrowth is every pgdns family that grows with the fleet, and how
// much at most. A family that is not listed must not grow at all: a new
// per-host or per-cluster metric is a decision, taken here.
var fleetGrowth = map[string]growth{
	// Per host: its state, from the snapshot at the scrape, and two
	// counters.
	"pgdns_host_up":                           {perHost: 1},
	"pgdns_host_role":                         {perHost: 4},
	"pgdns_host_lag_seconds":                  {perHost: 1},
	"pgdns_host_lag_bytes":                    {perHost: 1},
	"pgdns_host_probe_age_seconds":            {perHost: 1},
	"pgdns_host_stats_hidden":                 {perHost: 1},
	"pgdns_host_role_since_timestamp_seconds": {perHost: 1},
	"pgdns_host_probes_total":                 {perHost: 1},
	"pgdns_probe_failures_total":              {perHost: 1},
	// Per cluster.
	"pgdns_probe_duration_seconds":      {perCluster: len(probeBuckets) + 3},
	"pgdns_probe_errors_total":          {perCluster: len(probe.FailureClasses)},
	"pgdns_probes_total":                {perCluster: len(probeCauses)},
	"pgdns_role_changes_total":          {perCluster: numRoles * numRoles},
	"pgdns_lsn_refresh_coalesced_total": {perCluster: len(coalescedReasons)},
	"pgdns_split_brain_total":           {perCluster: 1},
	"pgdns_primary_changes_total":       {perCluster: 1},
	"pgdns_flux_episodes_total":         {perCluster: 1},
	"pgdns_flux_probes_total":           {perCluster: 1},
	"pgdns_lsn_refresh_rounds_total":    {perCluster: 1},
	"pgdns_lsn_unreachable_total":       {perCluster: 1},
	"pgdns_cluster_hosts":               {perCluster: 1},
	"pgdns_cluster_primary_answered":    {perCluster: 1},
	"pgdns_cluster_replicas_answered":   {perCluster: 1},
	"pgdns_cluster_split_brain":         {perCluster: 1},
}

// The page's series grow with the fleet only as fleetGrowth allows: a
// host adds at most 12 series (its state and two counters; no histogram
// per host), a cluster at most its counters and gauges, and everything
// else (DNS, HTTP, the process) not at all, however busy the hosts.
// Read from the real registry's page, at two sizes of a fleet in
// clusters of 3, every counter given something to count.
func TestSeriesGrowOnlyWithTheFleet(t *testing.T) {
	type size struct{ hosts, clusters int }
	pages := map[size]map[string]*dto.MetricFamily{}
	for _, hosts := range []int{30, 300} {
		m, _, clusters := fleet(t, hosts)
		busy(m, clusters)
		pages[size{hosts, len(clusters)}] = parsePage(t, scrape(t, m))
	}
	perHost := 0
	for _, g := range fleetGrowth {
		perHost += g.perHost
	}
	if perHost > 12 {
		t.Errorf("%d series per host allowed", perHost)
	}
	var small, large size
	for s := range pages {
		if s.hosts == 30 {
			small = s
		} else {
			large = s
		}
	}
	for name, f := range pages[large] {
		got := series(f)
		before := 0
		if g := pages[small][name]; g != nil {
			before = series(g)
		}
		g, grows := fleetGrowth[name]
		if !grows {
			if got != before && !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") {
				t.Errorf("%s: %d series at %d hosts, %d at %d: it grows with the fleet, and fleetGrowth does not say it may", name, got, large.hosts, before, small.hosts)
			}
			continue
		}
		if bound := g.perHost*large.hosts + g.perCluster*large.clusters; got > bound {
			t.Errorf("%s: %d series for %d hosts in %d clusters, more than %d", name, got, large.hosts, large.clusters, bound)
		}
		if got <= before {
			t.Errorf("%s: %d series at %d hosts, %d at %d: fleetGrowth says it grows", name, got, large.hosts, before, small.hosts)
		}
	}
	for name := range fleetGrowth {
		if pages[large][name] == nil {
			t.Errorf("%s: not on the page", name)
		}
	}
}

// The page is one text page whatever the scraper prefers (protobuf,
// OpenMetrics), gzipped when asked, parses, and escapes label values.
func TestPageFormat(t *testing.T) {
	m, _, _ := fleet(t, 6)
	m.ProbeDone("main", "odd\"host\\name\n:5432", time.Millisecond, nil)
	for _, accept := range []string{"", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3", "application/openmetrics-text;version=1.0.0"} {
		for _, gz := range []bool{false, true} {
			req := httptest.NewRequest("GET", "/metrics", nil)
			if accept != "" {
				req.Header.Set("Accept", accept)
			}
			if gz {
				req.Header.Set("Accept-Encoding", "gzip")
			}
			w := httptest.NewRecorder()
			m.Handler().ServeHTTP(w, req)
			if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
				t.Fatalf("Accept %q: Content-Type %q", accept, ct)
			}
			body := w.Body.String()
			if gz {
				if w.Header().Get("Content-Encoding") != "gzip" {
					t.Fatal("gzip asked for, not given")
				}
				r, err := gzip.NewReader(w.Body)
				if err != nil {
					t.Fatal(err)
				}
				var b strings.Builder
				if _, err := io.Copy(&b, r); err != nil {
					t.Fatal(err)
				}
				body = b.String()
			}
			families := parsePage(t, body)
			found := false
			for _, s := range families["pgdns_host_probes_total"].GetMetric() {
				for _, l := range s.Label {
					found = found || (l.GetName() == "host" && l.GetValue() == "odd\"host\\name\n:5432")
				}
			}
			if !found {
				t.Fatalf("the odd host name did not come back as it was")
			}
		}
	}
	for header, want := range map[string]bool{"gzip": true, "deflate, gzip;q=0.5": true, "gzip;q=0": false, "identity": false, "x-gzip": false} {
		if got := acceptsGzip([]string{header}); got != want {
			t.Errorf("Accept-Encoding %q: gzip %v", header, got)
		}
	}
}

// A probe's duration lands in the bucket whose bound it does not exceed,
// and the count is the buckets' total.
func TestProbeDurationBuckets(t *testing.T) {
	if len(histogram{}.counts) != len(probeBuckets)+1 {
		t.Fatalf("%d counts for %d buckets", len(histogram{}.counts), len(probeBuckets))
	}
	m := New(zone.NewTable())
	m.ProbeDone("main", "10.0.0.1:5432", time.Millisecond, nil)          // on the bound of 0.001
	m.ProbeDone("main", "10.0.0.1:5432", 1001*time.Microsecond, nil)     // just past it
	m.ProbeDone("main", "10.0.0.2:5432", 6*time.Second, errors.New("x")) // past every bound
	out := scrape(t, m)
	for series, want := range map[string]float64{
		`pgdns_probe_duration_seconds_bucket{cluster="main",le="0.0005"}`: 0,
		`pgdns_probe_duration_seconds_bucket{cluster="main",le="0.001"}`:  1,
		`pgdns_probe_duration_seconds_bucket{cluster="main",le="0.0025"}`: 2,
		`pgdns_probe_duration_seconds_bucket{cluster="main",le="5"}`:      2,
		`pgdns_probe_duration_seconds_bucket{cluster="main",le="+Inf"}`:   3,
		`pgdns_probe_duration_seconds_count{cluster="main"}`:              3,
		`pgdns_probe_duration_seconds_sum{cluster="main"}`:                6.002001,
		`pgdns_host_probes_total{cluster="main",host="10.0.0.1:5432"}`:    2,
		`pgdns_probe_failures_total{cluster="main",host="10.0.0.1:5432"}`: 0,
		`pgdns_probe_failures_total{cluster="main",host="10.0.0.2:5432"}`: 1,
	} {
		if got := sample(t, out, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
}

// stalledWriter is a client that reads nothing: its first Write blocks
// until release is closed.
type stalledWriter struct {
	header   http.Header
	writing  chan struct{}
	release  chan struct{}
	once     bool
	received int
}

func (w *stalledWriter) Header() http.Header { return w.header }
func (w *stalledWriter) WriteHeader(int)     {}
func (w *stalledWriter) Write(p []byte) (int, error) {
	if !w.once {
		w.once = true
		close(w.writing)
		<-w.release
	}
	w.received += len(p)
	return len(p), nil
}

// A scrape stalled by its client, in the middle of the fleet's families,
// holds nothing the probe's hooks wait on: probes of hosts already seen
// and of new hosts, role changes and new clusters are all recorded
// meanwhile.
func TestStalledScrapeDoesNotStallTheProbe(t *testing.T) {
	m, _, clusters := fleet(t, 3000) // a page larger than the writer's buffer
	w := &stalledWriter{header: http.Header{}, writing: make(chan struct{}), release: make(chan struct{})}
	scraped := make(chan struct{})
	go func() {
		defer close(scraped)
		m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	}()
	<-w.writing
	hooks := make(chan struct{})
	go func() {
		defer close(hooks)
		for i, cl := range clusters {
			m.ProbeDone(cl.Name, cl.Hosts[0].Addr, time.Millisecond, nil)
			m.ProbeDone(cl.Name, fmt.Sprintf("new%d:5432", i), time.Millisecond, errors.New("x"))
			m.RoleChanged(cl.Name, cl.Hosts[0].Addr, zone.RolePrimary, zone.RoleDown)
		}
		m.SetClusters([]string{"new"})
	}()
	testkit.Eventually(t, 30*time.Second, 10*time.Millisecond, "the hooks done while a scrape is stalled", func() (string, bool) {
		select {
		case <-hooks:
			return "done", true
		default:
			return "still waiting", false
		}
	})
	close(w.release)
	<-scraped
	if w.received == 0 {
		t.Fatal("the stalled scrape wrote nothing")
	}
	if got := sample(t, scrape(t, m), `pgdns_probe_failures_total{cluster="c00000",host="new0:5432"}`); got != 1 {
		t.Fatalf("the new host's failure counted %v", got)
	}
}
