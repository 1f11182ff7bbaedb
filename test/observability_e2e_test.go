package test

// What an operator watches pgdns with (issue 27, items 3 to 6): the
// metrics made to alert on, against one real cluster that the subtests
// share, in order.

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// scrapeMetrics reads pgdns's /metrics as Prometheus would.
func scrapeMetrics(t *testing.T, httpAddr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return families
}

// metricValue is the value of the series of name whose labels include
// want; ok false when there is none.
func metricValue(families map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := families[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			match = match && labels[k] == v
		}
		if !match {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		}
	}
	return 0, false
}

// mustMetric is metricValue, failing the test when the series is absent.
func mustMetric(t *testing.T, families map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	v, ok := metricValue(families, name, labels)
	if !ok {
		t.Fatalf("/metrics has no %s%v", name, labels)
	}
	return v
}

// TestObservability runs pgdns with a state file on a real primary and
// replica, and checks what an operator's alerts and dashboard read, and
// the shipped alert rules in a real Prometheus through a failover.
func TestObservability(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(2)})
	started := time.Now()
	e := attach(t, pg, envOptions{State: filepath.Join(t.TempDir(), "state.json")})
	e.waitFor(t, "replica.db.local.", []string{pg.Nodes[1].IP})
	primary, replica := pg.Nodes[0].Addr(), pg.Nodes[1].Addr()

	t.Run("metrics", func(t *testing.T) { checkAlertingMetrics(t, e, started, primary, replica) })
	t.Run("metrics table", func(t *testing.T) { checkMetricsTable(t, scrapeMetrics(t, e.app.HTTPAddr())) })
	t.Run("dashboard metrics", func(t *testing.T) { checkDashboardMetrics(t, scrapeMetrics(t, e.app.HTTPAddr())) })
	// Last: it stops the primary.
	t.Run("no-primary alert", func(t *testing.T) { checkNoPrimaryAlert(t, e, pg) })
}

// checkAlertingMetrics: build info, the reload outcome, answer latency by
// path, the cluster gauges, role since, and failure counters at zero.
func checkAlertingMetrics(t *testing.T, e *env, started time.Time, primary, replica string) {
	e.query(t, "udp", "primary.db.local.", dns.TypeA) // the fast path
	e.query(t, "tcp", "primary.db.local.", dns.TypeA) // the slow path
	m := scrapeMetrics(t, e.app.HTTPAddr())
	if v := mustMetric(t, m, "pgdns_build_info", map[string]string{"version": "dev", "goversion": runtime.Version()}); v != 1 {
		t.Errorf("pgdns_build_info = %v", v)
	}
	for _, path := range []string{"fast", "slow"} {
		if n := mustMetric(t, m, "pgdns_dns_answer_duration_seconds", map[string]string{"path": path, "rcode": "NOERROR"}); n < 1 {
			t.Errorf("%s path: %v answers timed", path, n)
		}
	}
	main := map[string]string{"cluster": "main"}
	for name, want := range map[string]float64{
		"pgdns_cluster_hosts": 2, "pgdns_cluster_primary_answered": 1, "pgdns_cluster_replicas_answered": 1,
		"pgdns_cluster_split_brain": 0, "pgdns_primary_changes_total": 0, "pgdns_split_brain_total": 0,
	} {
		if got := mustMetric(t, m, name, main); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	for _, class := range []string{"not_serving", "timeout", "auth", "server_error", "dns", "other"} {
		if got := mustMetric(t, m, "pgdns_probe_errors_total", map[string]string{"cluster": "main", "class": class}); got != 0 {
			t.Errorf("pgdns_probe_errors_total{class=%q} = %v on a healthy cluster", class, got)
		}
	}
	for _, host := range []string{primary, replica} {
		if got := mustMetric(t, m, "pgdns_probe_failures_total", map[string]string{"host": host}); got != 0 {
			t.Errorf("%s: %v probe failures", host, got)
		}
	}
	for _, name := range []string{"pgdns_dns_rate_limited_total", "pgdns_state_write_failures_total"} {
		if got := mustMetric(t, m, name, nil); got != 0 {
			t.Errorf("%s = %v", name, got)
		}
	}
	// Served whatever its count (waitFor asked before pgdns was ready, and
	// got SERVFAIL); prefer-replica, never asked, at 0.
	mustMetric(t, m, "pgdns_dns_queries_total", map[string]string{"role": "primary", "rcode": "SERVFAIL"})
	if got := mustMetric(t, m, "pgdns_dns_queries_total", map[string]string{"role": "prefer-replica", "rcode": "SERVFAIL"}); got != 0 {
		t.Errorf("SERVFAIL for prefer-replica, never asked: %v", got)
	}
	since := map[string]float64{}
	for _, host := range []string{primary, replica} {
		since[host] = mustMetric(t, m, "pgdns_host_role_since_timestamp_seconds", map[string]string{"host": host})
		if at := time.Unix(0, int64(since[host]*1e9)); at.Before(started.Add(-time.Second)) || at.After(time.Now()) {
			t.Errorf("%s has had its role since %v, not since pgdns started (%v)", host, at, started)
		}
	}

	// A reload that is rejected is counted as failed; the next good one
	// as applied, and changes no host's role since.
	ok := func() (float64, float64) {
		m := scrapeMetrics(t, e.app.HTTPAddr())
		return mustMetric(t, m, "pgdns_config_last_reload_successful", nil), mustMetric(t, m, "pgdns_config_last_reload_success_timestamp_seconds", nil)
	}
	good, at := ok()
	if good != 1 || at < float64(started.Add(-time.Second).Unix()) {
		t.Fatalf("at the start: reload successful %v at %v", good, at)
	}
	bad := *e.cfg
	bad.Probe.DSN = "port=notaport"
	if err := e.app.Reload(&bad); err == nil {
		t.Fatal("a probe DSN that does not parse reloaded")
	}
	if now, nowAt := ok(); now != 0 || nowAt != at {
		t.Fatalf("after a rejected reload: successful %v at %v, want 0 at %v", now, nowAt, at)
	}
	next := *e.cfg
	if err := e.app.Reload(&next); err != nil {
		t.Fatal(err)
	}
	if now, nowAt := ok(); now != 1 || nowAt <= at {
		t.Fatalf("after a good reload: successful %v at %v, want 1 after %v", now, nowAt, at)
	}
	m = scrapeMetrics(t, e.app.HTTPAddr())
	for host, was := range since {
		if now := mustMetric(t, m, "pgdns_host_role_since_timestamp_seconds", map[string]string{"host": host}); now != was {
			t.Errorf("%s: role since %v after a reload that changed nothing, was %v", host, now, was)
		}
	}
}

// checkMetricsTable holds docs/http-api.md's metrics table to a real
// scrape: every pgdns metric served has a row with its labels, and every
// row names a metric served with those labels (a state file is set, so
// its metrics are served too).
func checkMetricsTable(t *testing.T, scraped map[string]*dto.MetricFamily) {
	page, err := os.ReadFile("../docs/http-api.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(page), "\n## Metrics\n")
	table, _, _ = strings.Cut(table, "\n## ")
	rows := map[string][]string{} // metric -> its labels as the table gives them
	for _, m := range regexp.MustCompile("`(pgdns_[a-z_]+)(?:\\{([a-z_,]*)\\})?`").FindAllStringSubmatch(table, -1) {
		var labels []string
		if m[2] != "" {
			labels = strings.Split(m[2], ",")
		}
		slices.Sort(labels)
		rows[m[1]] = labels
	}
	for name, f := range scraped {
		if !strings.HasPrefix(name, "pgdns_") {
			continue
		}
		want, ok := rows[name]
		if !ok {
			t.Errorf("docs/http-api.md, Metrics: no row for %s, which /metrics serves", name)
			continue
		}
		for _, m := range f.Metric {
			var got []string
			for _, l := range m.Label {
				got = append(got, l.GetName())
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("docs/http-api.md, Metrics: %s{%s}, but /metrics serves it with {%s}", name, strings.Join(want, ","), strings.Join(got, ","))
				break
			}
		}
	}
	for name := range rows {
		if scraped[name] == nil {
			t.Errorf("docs/http-api.md, Metrics: %s is not served by /metrics", name)
		}
	}
}
