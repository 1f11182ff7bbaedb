package deploy

import (
	"strings"
	"testing"

	"github.com/pgdns/pgdns/deploy/grafana"
)

// TestDashboard: the Grafana dashboard decodes, its panels have unique
// ids and sit on the 24-column grid, every panel but a row queries
// something, every expression parses with Prometheus's own parser and
// names only pgdns metrics, and the panels issue 27 asks for are there.
// (test/'s TestObservability holds the names to a real scrape and runs
// every query in a real Prometheus.)
func TestDashboard(t *testing.T) {
	d, err := grafana.Load()
	if err != nil {
		t.Fatal(err)
	}
	if d.UID != "pgdns" || d.Title != "pgdns" {
		t.Errorf("uid %q, title %q", d.UID, d.Title)
	}
	ids := map[int]bool{}
	var titles []string
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if g := p.GridPos; g.W < 1 || g.X < 0 || g.X+g.W > 24 || g.H < 1 {
			t.Errorf("panel %q: gridPos %+v off the 24-column grid", p.Title, g)
		}
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		titles = append(titles, strings.ToLower(p.Title))
	}
	queries, err := d.Queries()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range queries {
		names, err := grafana.Parse(q.Expr)
		if err != nil {
			t.Errorf("%s: %q does not parse: %v", q.Where, q.Expr, err)
			continue
		}
		if len(names) == 0 {
			t.Errorf("%s: %q names no metric", q.Where, q.Expr)
		}
		for _, n := range names {
			if !strings.HasPrefix(n, "pgdns_") {
				t.Errorf("%s: %s is not a pgdns metric", q.Where, n)
			}
		}
	}
	all := strings.Join(titles, "\n")
	for _, want := range []string{"by rcode", "by name kind", "answer latency", "primary answered", "replicas answered",
		"lag (time)", "lag (bytes)", "probe errors by class", "failovers", "flux episodes", "locality", "servfail", "rate-limited"} {
		if !strings.Contains(all, want) {
			t.Errorf("no panel titled with %q", want)
		}
	}
	// A parse failure is caught: the check above is not vacuous.
	if _, err := grafana.Parse(`sum by (rcode) (rate(pgdns_dns_queries_total[$__rate_interval])`); err == nil {
		t.Fatal("an unbalanced expression parsed")
	}
}
