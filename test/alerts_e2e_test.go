package test

// The shipped alert rules (deploy/prometheus/pgdns-rules.yaml) in a real
// Prometheus scraping a real pgdns through a failover (issue 27 item 4).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// testNoPrimaryFor is the for: of PgdnsNoPrimary in the rules this test
// loads: a copy of the shipped file with that one value shortened from
// its production 1m, so that the test waits seconds, not a minute.
const testNoPrimaryFor = "3s"

// promServer is a Prometheus started by a test.
type promServer struct {
	url string // http://addr
}

// startPrometheus runs Debian's prometheus on a loopback address of the
// allocator, scraping pgdns at target every second and evaluating rules
// (a rule file's content) every second, its storage in a temp dir. It is
// stopped when the test ends.
func startPrometheus(t *testing.T, target string, rules []byte) *promServer {
	t.Helper()
	bin := testkit.RequireTool(t, "prometheus")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: pgdns
    static_configs:
      - targets: [%q]
`, filepath.Join(dir, "rules.yaml"), target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	// Not Prometheus's 9090: Debian's package starts one on every address
	// there, and the allocator's block has a port of its own.
	bl := pgtest.Addrs(t)
	listen := bl.Addr(1, bl.Port())
	logs := &testkit.Buffer{}
	// The storage directory is the test's own, made by and owned by the
	// user the test (and so Prometheus) runs as.
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+listen,
		"--storage.tsdb.retention.time=1h", "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlives the test binary
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("prometheus output:\n%s", logs.String())
		}
	})
	p := &promServer{url: "http://" + listen}
	testkit.Eventually(t, 30*time.Second, 100*time.Millisecond, "prometheus ready", func() (string, bool) {
		select {
		case <-done:
			t.Fatalf("prometheus exited:\n%s", logs.String())
		default:
		}
		resp, err := http.Get(p.url + "/-/ready")
		if err != nil {
			return err.Error(), false
		}
		resp.Body.Close()
		return resp.Status, resp.StatusCode == http.StatusOK
	})
	return p
}

// api GETs path of Prometheus's HTTP API and decodes its data into out.
func (p *promServer) api(t *testing.T, path string, query url.Values, out any) {
	t.Helper()
	resp, err := http.Get(p.url + path + "?" + query.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.Status != "success" {
		t.Fatalf("%s %v: %s %v %s", path, query, resp.Status, err, body)
	}
	if err := json.Unmarshal(r.Data, out); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// value is the one sample of an instant query, ok false when it returns
// no series.
func (p *promServer) value(t *testing.T, expr string) (float64, bool) {
	t.Helper()
	var data struct {
		Result []struct {
			Value [2]any `json:"value"`
		} `json:"result"`
	}
	p.api(t, "/api/v1/query", url.Values{"query": {expr}}, &data)
	if len(data.Result) == 0 {
		return 0, false
	}
	s, _ := data.Result[0].Value[1].(string)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v, true
}

// alertState is the state of alert name for cluster in Prometheus
// (pending, firing), "" when it is inactive.
func (p *promServer) alertState(t *testing.T, name, cluster string) string {
	t.Helper()
	var data struct {
		Alerts []struct {
			Labels map[string]string `json:"labels"`
			State  string            `json:"state"`
		} `json:"alerts"`
	}
	p.api(t, "/api/v1/alerts", nil, &data)
	for _, a := range data.Alerts {
		if a.Labels["alertname"] == name && a.Labels["cluster"] == cluster {
			return a.State
		}
	}
	return ""
}

// rulesForTest is the shipped rule file with PgdnsNoPrimary's for: set to
// testNoPrimaryFor; every other rule as shipped.
func rulesForTest(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile("../deploy/prometheus/pgdns-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]any
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	found := false
	groups, _ := file["groups"].([]any)
	for _, g := range groups {
		rules, _ := g.(map[string]any)["rules"].([]any)
		for _, r := range rules {
			if rule := r.(map[string]any); rule["alert"] == "PgdnsNoPrimary" {
				rule["for"], found = testNoPrimaryFor, true
			}
		}
	}
	if !found {
		t.Fatal("the shipped rules have no PgdnsNoPrimary")
	}
	out, err := yaml.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkNoPrimaryAlert: a real Prometheus with the shipped rules scrapes
// pgdns; stopping the primary makes PgdnsNoPrimary pending, then firing;
// promoting the replica resolves it, and the failover and its flux
// episode are counted where increase() sees them. Before the failover,
// every query of the Grafana dashboard runs in it. It stops e's primary: it runs last.
func checkNoPrimaryAlert(t *testing.T, e *env, pg *pgtest.Cluster) {
	p := startPrometheus(t, e.app.HTTPAddr(), rulesForTest(t))
	// Scraped, and the rule evaluated, before anything changes.
	testkit.Eventually(t, 30*time.Second, 200*time.Millisecond, "pgdns scraped with a primary", func() (float64, bool) {
		v, ok := p.value(t, `pgdns_cluster_primary_answered{cluster="main"} and on (instance) up{job="pgdns"} == 1`)
		return v, ok && v == 1
	})
	var rules struct {
		Groups []struct {
			Rules []struct {
				Name     string  `json:"name"`
				Duration float64 `json:"duration"`
				Health   string  `json:"health"`
			} `json:"rules"`
		} `json:"groups"`
	}
	p.api(t, "/api/v1/rules", nil, &rules)
	loaded := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			loaded++
			if r.Name == "PgdnsNoPrimary" && r.Duration != 3 {
				t.Fatalf("PgdnsNoPrimary loaded with for %vs, want %s", r.Duration, testNoPrimaryFor)
			}
		}
	}
	if loaded < 8 {
		t.Fatalf("Prometheus loaded %d rules: %+v", loaded, rules)
	}
	if s := p.alertState(t, "PgdnsNoPrimary", "main"); s != "" {
		t.Fatalf("PgdnsNoPrimary is %s with the primary up", s)
	}
	t.Run("dashboard queries run", func(t *testing.T) { checkDashboardRuns(t, p) })

	ctx := context.Background()
	if err := pg.Nodes[0].Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	testkit.Eventually(t, 60*time.Second, 200*time.Millisecond, "PgdnsNoPrimary firing", func() (string, bool) {
		s := p.alertState(t, "PgdnsNoPrimary", "main")
		seen[s] = true
		return s, s == "firing"
	})
	if !seen["pending"] {
		t.Logf("PgdnsNoPrimary was not seen pending (its %s passed between two looks)", testNoPrimaryFor)
	}

	if err := pg.Nodes[1].Promote(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", []string{pg.Nodes[1].IP})
	testkit.Eventually(t, 60*time.Second, 200*time.Millisecond, "PgdnsNoPrimary resolved", func() (string, bool) {
		s := p.alertState(t, "PgdnsNoPrimary", "main")
		return s, s == ""
	})
	// The failover, and the flux episode it began, counted from series
	// that were there at 0 before them.
	for _, expr := range []string{`increase(pgdns_primary_changes_total{cluster="main"}[5m])`, `increase(pgdns_flux_episodes_total{cluster="main"}[5m])`} {
		testkit.Eventually(t, 30*time.Second, 200*time.Millisecond, expr, func() (float64, bool) {
			v, ok := p.value(t, expr)
			return v, ok && v > 0
		})
	}
	t.Logf("PgdnsNoPrimary states seen: %v", seen)
}
