package deploy

import (
	"os"
	"os/exec"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/pgdns/pgdns/internal/testkit"
)

const (
	rulesFile     = "prometheus/pgdns-rules.yaml"
	rulesTestFile = "prometheus/pgdns-rules_test.yaml"
)

// ruleGroups is a Prometheus rule file, as far as these tests read it.
type ruleGroups struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// readRules decodes the shipped rule file.
func readRules(t *testing.T) ruleGroups {
	t.Helper()
	raw, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var g ruleGroups
	if err := yaml.UnmarshalStrict(raw, &g); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	return g
}

// TestAlertRules: promtool accepts the rule file, and its unit tests
// (one or more per alert) pass. Under CI=true a missing promtool fails.
func TestAlertRules(t *testing.T) {
	promtool := testkit.RequireTool(t, "promtool")
	for _, args := range [][]string{{"check", "rules", "pgdns-rules.yaml"}, {"test", "rules", "pgdns-rules_test.yaml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "prometheus"
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("promtool %v: %v\n%s", args, err, out)
		}
		t.Logf("promtool %v:\n%s", args, out)
	}
}

// TestEveryAlertUnitTested: each alert of the rule file has a unit test
// that expects it to fire, and every alert tested exists.
func TestEveryAlertUnitTested(t *testing.T) {
	raw, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(raw, &tests); err != nil {
		t.Fatal(err)
	}
	fires := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			fires[a.Alertname] = fires[a.Alertname] || len(a.ExpAlerts) > 0
		}
	}
	var alerts []string
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts = append(alerts, r.Alert)
			if !fires[r.Alert] {
				t.Errorf("%s: no unit test in %s expects it to fire", r.Alert, rulesTestFile)
			}
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: needs a severity label, a summary and a description", r.Alert)
			}
		}
	}
	for name := range fires {
		if !slices.Contains(alerts, name) {
			t.Errorf("%s tests %s, which %s does not have", rulesTestFile, name, rulesFile)
		}
	}
	if len(alerts) < 8 {
		t.Fatalf("only %d alerts in %s", len(alerts), rulesFile)
	}
}
