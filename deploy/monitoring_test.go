package deploy

import (
	"flag"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	monv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

const monitoringFile = "kubernetes/pgdns-monitoring.yaml"

var update = flag.Bool("update", false, "rewrite "+monitoringFile+"'s PrometheusRule from "+rulesFile)

// ruleHeader opens the PrometheusRule document; its spec is the rule
// file, indented (promRuleDoc).
const ruleHeader = `# Generated from deploy/prometheus/pgdns-rules.yaml, the same groups: after
# changing that file, go test ./deploy -run TestPrometheusRule -update
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: pgdns
  namespace: pgdns
  labels:
    app.kubernetes.io/name: pgdns
spec:
`

// promRuleDoc is the PrometheusRule document built from the rule file:
// ruleHeader, then every line of the file indented under spec.
func promRuleDoc(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString(ruleHeader)
	for _, line := range strings.Split(strings.TrimRight(string(raw), "\n"), "\n") {
		if line != "" {
			b.WriteString("  " + line)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// monitoring is the monitoring manifest, decoded strictly into the
// Kubernetes and Prometheus Operator API types.
type monitoring struct {
	service *corev1.Service
	monitor *monv1.ServiceMonitor
	rule    *monv1.PrometheusRule
	ruleDoc string // the PrometheusRule document as written
}

func readMonitoring(t *testing.T) monitoring {
	t.Helper()
	raw, err := os.ReadFile(monitoringFile)
	if err != nil {
		t.Fatal(err)
	}
	var m monitoring
	docs := regexp.MustCompile(`(?m)^---\n`).Split(string(raw), -1)
	for i, doc := range docs {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatalf("%s document %d: %v", monitoringFile, i, err)
		}
		var obj interface{ GetNamespace() string }
		switch tm.APIVersion + " " + tm.Kind {
		case "v1 Service":
			m.service = &corev1.Service{}
			obj = m.service
		case "monitoring.coreos.com/v1 ServiceMonitor":
			m.monitor = &monv1.ServiceMonitor{}
			obj = m.monitor
		case "monitoring.coreos.com/v1 PrometheusRule":
			m.rule, m.ruleDoc = &monv1.PrometheusRule{}, doc
			obj = m.rule
		default:
			t.Fatalf("%s document %d: unexpected %s %s", monitoringFile, i, tm.APIVersion, tm.Kind)
		}
		if err := decodeStrict([]byte(doc), obj); err != nil {
			t.Fatalf("%s document %d: %s: %v", monitoringFile, i, tm.Kind, err)
		}
		if obj.GetNamespace() != "pgdns" {
			t.Errorf("%s: namespace %q, want pgdns", tm.Kind, obj.GetNamespace())
		}
	}
	if m.service == nil || m.monitor == nil || m.rule == nil {
		t.Fatalf("%s lacks a document: %+v", monitoringFile, m)
	}
	return m
}

// TestPrometheusRule: the PrometheusRule is the rule file's groups, line
// for line (-update rewrites it), and decodes into the operator's types
// as the rule file itself does, to the same groups.
func TestPrometheusRule(t *testing.T) {
	want := promRuleDoc(t)
	m := readMonitoring(t)
	if *update && m.ruleDoc != want {
		raw, err := os.ReadFile(monitoringFile)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(monitoringFile, []byte(strings.Replace(string(raw), m.ruleDoc, want, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		m = readMonitoring(t)
	}
	if m.ruleDoc != want {
		t.Fatalf("%s's PrometheusRule is not %s's groups: go test ./deploy -run TestPrometheusRule -update", monitoringFile, rulesFile)
	}
	raw, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var file monv1.PrometheusRuleSpec
	if err := decodeStrict(raw, &file); err != nil {
		t.Fatalf("%s as a PrometheusRule spec: %v", rulesFile, err)
	}
	if !reflect.DeepEqual(file.Groups, m.rule.Spec.Groups) {
		t.Fatalf("the PrometheusRule's groups differ from %s's", rulesFile)
	}
	alerts := 0
	for _, g := range m.rule.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" && r.Expr.String() != "" {
				alerts++
			}
		}
	}
	if alerts != len(readRules(t).Groups[0].Rules) || alerts < 8 {
		t.Fatalf("%d alerts in the PrometheusRule", alerts)
	}
}

// TestServiceMonitor: the ServiceMonitor scrapes the pgdns pods' HTTP
// port through the metrics Service, under job "pgdns" (PgdnsDown reads
// up{job="pgdns"}), at /metrics.
func TestServiceMonitor(t *testing.T) {
	m := readMonitoring(t)
	pods := readManifests(t)
	c := pods.container(t)
	svc, sm := m.service, m.monitor
	matches(t, "metrics Service selector", &metav1.LabelSelector{MatchLabels: svc.Spec.Selector}, pods.deployment.Spec.Template.Labels)
	matches(t, "ServiceMonitor selector", &sm.Spec.Selector, svc.Labels)
	if dns := pods.service; dns.Labels["app.kubernetes.io/component"] == svc.Labels["app.kubernetes.io/component"] {
		t.Errorf("the ServiceMonitor would select the DNS Service %s too", dns.Name)
	}
	if ns := sm.Spec.NamespaceSelector; ns.Any || (len(ns.MatchNames) > 0 && ns.MatchNames[0] != "pgdns") {
		t.Errorf("namespace selector %+v", ns)
	}
	if job := svc.Labels[sm.Spec.JobLabel]; job != "pgdns" {
		t.Errorf("job label %q gives job %q, want pgdns", sm.Spec.JobLabel, job)
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("%d endpoints", len(sm.Spec.Endpoints))
	}
	ep := sm.Spec.Endpoints[0]
	var port *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Name == ep.Port {
			port = &svc.Spec.Ports[i]
		}
	}
	if port == nil {
		t.Fatalf("the endpoint's port %q is not the metrics Service's", ep.Port)
	}
	_, httpPort := listenPort(t, "http.listen", pods.loadConfig(t).HTTP.Listen)
	if got := containerPort(t, c, port.TargetPort, corev1.ProtocolTCP); got != httpPort {
		t.Errorf("the metrics Service targets container port %d, want http.listen's %d", got, httpPort)
	}
	if port.TargetPort != intstr.FromString("http") {
		t.Errorf("target port %s, want the container's named port http", port.TargetPort.String())
	}
	if ep.Path != "/metrics" || ep.Interval == "" {
		t.Errorf("endpoint path %q, interval %q", ep.Path, ep.Interval)
	}
}
