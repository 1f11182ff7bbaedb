package test

// The Grafana dashboard (deploy/grafana/pgdns.json) against what a real
// pgdns serves and a real Prometheus runs (issue 27 item 3).

import (
	"net/url"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/pgdns/pgdns/deploy/grafana"
)

// servedNames are the series names a scrape of families holds: a
// histogram's _bucket, _sum and _count, every other family's own name.
func servedNames(families map[string]*dto.MetricFamily) map[string]bool {
	names := map[string]bool{}
	for name, f := range families {
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			names[name], names[name+"_sum"], names[name+"_count"] = true, true, true
		default:
			names[name] = true
		}
	}
	return names
}

// dashboardQueries are the dashboard's PromQL expressions.
func dashboardQueries(t *testing.T) []grafana.Query {
	t.Helper()
	d, err := grafana.Load()
	if err != nil {
		t.Fatal(err)
	}
	queries, err := d.Queries()
	if err != nil {
		t.Fatal(err)
	}
	if len(queries) < 15 {
		t.Fatalf("only %d queries in the dashboard", len(queries))
	}
	return queries
}

// checkDashboardMetrics: every metric the dashboard names is one a real
// pgdns serves (a state file set, so its metrics are served too).
func checkDashboardMetrics(t *testing.T, scraped map[string]*dto.MetricFamily) {
	served := servedNames(scraped)
	for _, q := range dashboardQueries(t) {
		names, err := grafana.Parse(q.Expr)
		if err != nil {
			t.Errorf("%s: %v", q.Where, err)
		}
		for _, n := range names {
			if !served[n] {
				t.Errorf("%s names %s, which pgdns's /metrics does not serve", q.Where, n)
			}
		}
	}
}

// checkDashboardRuns: every query of the dashboard, its variables set as
// Grafana sets them for "All", runs in a real Prometheus scraping pgdns.
func checkDashboardRuns(t *testing.T, p *promServer) {
	for _, q := range dashboardQueries(t) {
		var data struct {
			ResultType string `json:"resultType"`
		}
		p.api(t, "/api/v1/query", url.Values{"query": {grafana.Expand(q.Expr)}}, &data) // fails the test on an error
		if data.ResultType != "vector" {
			t.Errorf("%s: result type %q", q.Where, data.ResultType)
		}
	}
}
