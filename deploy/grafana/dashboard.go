// Package grafana reads the Grafana dashboard next to it (pgdns.json) for
// the tests that keep it from rotting: deploy's offline one and the end-to-end
// one that holds its metrics to a real scrape and runs its queries in a
// real Prometheus. pgdns itself never imports it.
package grafana

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"

	"github.com/prometheus/prometheus/promql/parser"
)

// Dashboard is the part of a Grafana dashboard these tests read.
type Dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []Panel `json:"panels"`
	Templating struct {
		List []Variable `json:"list"`
	} `json:"templating"`
}

// Panel is one panel; a row holds none of its own targets.
type Panel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		Expr   string `json:"expr"`
		RefID  string `json:"refId"`
		Legend string `json:"legendFormat"`
	} `json:"targets"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
}

// Variable is one template variable.
type Variable struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Query any    `json:"query"` // a string, or {"query": ...} for a query variable
}

// Query is one PromQL expression of the dashboard and where it is.
type Query struct {
	Where string // panel title and refId, or the variable
	Expr  string // as in the file, Grafana's variables included
}

// Path is the dashboard file's path.
func Path() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "pgdns.json")
}

// Load decodes the dashboard, rejecting a field Dashboard does not know
// only where it reads one (Grafana's model has many more).
func Load() (*Dashboard, error) {
	raw, err := os.ReadFile(Path())
	if err != nil {
		return nil, err
	}
	var d Dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", Path(), err)
	}
	return &d, nil
}

// labelValues is Grafana's label_values(selector, label) of a query
// variable: the selector is PromQL.
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// Queries are every PromQL expression of d: each panel target's, and the
// selector of each label_values query variable.
func (d *Dashboard) Queries() ([]Query, error) {
	var out []Query
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			out = append(out, Query{Where: fmt.Sprintf("panel %q %s", p.Title, t.RefID), Expr: t.Expr})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		if m, ok := v.Query.(map[string]any); ok {
			q, _ = m["query"].(string)
		}
		m := labelValues.FindStringSubmatch(q)
		if m == nil {
			return nil, fmt.Errorf("variable %s: %q is not label_values(selector, label)", v.Name, q)
		}
		out = append(out, Query{Where: "variable " + v.Name, Expr: m[1]})
	}
	return out, nil
}

// grafanaRanges are the range variables Grafana fills in before a query
// reaches Prometheus.
var grafanaRanges = strings.NewReplacer("$__rate_interval", "1m", "$__range", "1m", "$__interval", "1m")

// Expand is expr as Grafana sends it with each selection variable set to
// all (".*") and every range variable to 1m.
func Expand(expr string) string {
	return strings.NewReplacer("$instance", ".*", "$cluster", ".*").Replace(grafanaRanges.Replace(expr))
}

// Parse parses expr with Prometheus's own parser after Expand, and
// returns the metric names its selectors name.
func Parse(expr string) ([]string, error) {
	e, err := parser.ParseExpr(Expand(expr))
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			names = append(names, vs.Name)
		}
		return nil
	})
	return names, nil
}
