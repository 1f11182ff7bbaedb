package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/pgdns/pgdns/internal/app"
	"github.com/pgdns/pgdns/internal/config"
)

const (
	manifestFile = "kubernetes/pgdns.yaml"
	corednsFile  = "kubernetes/coredns-pgdns.server"
)

// Measured footprint (BENCHMARKS.md, "Scale"): RSS at rest with 3 hosts,
// and while probing 1000 hosts; and (BENCHMARKS.md, "Hostile clients")
// the worst case under attack with the caps in place: at rest plus what
// each attack added at its peak, as if all ran at once, with
// http.max_conns at most hostileMaxConns.
var (
	restingRSS      = resource.MustParse("16Mi")
	largeRSS        = resource.MustParse("56Mi") // 55.6 MiB, rounded up
	hostileRSS      = resource.MustParse("73Mi") // 72.9 MiB, rounded up
	hostileMaxConns = 128
)

// manifests is every document of the manifest file, decoded.
type manifests struct {
	configMap  *corev1.ConfigMap
	deployment *appsv1.Deployment
	service    *corev1.Service
	pdb        *policyv1.PodDisruptionBudget
	policy     *networkingv1.NetworkPolicy
}

// decodeStrict decodes one YAML document into out as the API server does
// (sigs.k8s.io/json: field names match case-sensitively) and rejects what
// kubectl's strict field validation rejects: a field the type does not
// have, in any letter case, and a field given twice. So a typo or a field
// in the wrong place cannot pass. (encoding/json, under
// sigs.k8s.io/yaml.UnmarshalStrict, would match readOnlyRootFileSystem to
// readOnlyRootFilesystem.)
func decodeStrict(doc []byte, out any) error {
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strict, err := kjson.UnmarshalStrict(js, out)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

// readManifests decodes each document of the manifest file into its
// Kubernetes API type, by apiVersion and kind; any other is an error.
func readManifests(t *testing.T) manifests {
	t.Helper()
	raw, err := os.ReadFile(manifestFile)
	if err != nil {
		t.Fatal(err)
	}
	var m manifests
	for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(raw), -1) {
		if strings.TrimSpace(regexp.MustCompile(`(?m)^#.*$`).ReplaceAllString(doc, "")) == "" {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatalf("%s document %d: %v", manifestFile, i, err)
		}
		var obj interface{ GetNamespace() string }
		switch tm.APIVersion + " " + tm.Kind {
		case "v1 ConfigMap":
			m.configMap = &corev1.ConfigMap{}
			obj = m.configMap
		case "apps/v1 Deployment":
			m.deployment = &appsv1.Deployment{}
			obj = m.deployment
		case "v1 Service":
			m.service = &corev1.Service{}
			obj = m.service
		case "policy/v1 PodDisruptionBudget":
			m.pdb = &policyv1.PodDisruptionBudget{}
			obj = m.pdb
		case "networking.k8s.io/v1 NetworkPolicy":
			m.policy = &networkingv1.NetworkPolicy{}
			obj = m.policy
		default:
			// A Secret in particular: shipping one would ship a password
			// that kubectl apply puts over the real one.
			t.Fatalf("%s document %d: unexpected %s %s", manifestFile, i, tm.APIVersion, tm.Kind)
		}
		if err := decodeStrict([]byte(doc), obj); err != nil {
			t.Fatalf("%s document %d: %s: %v", manifestFile, i, tm.Kind, err)
		}
		if obj.GetNamespace() != "pgdns" {
			t.Errorf("%s %s: namespace %q, want pgdns", tm.Kind, tm.APIVersion, obj.GetNamespace())
		}
	}
	if m.configMap == nil || m.deployment == nil || m.service == nil || m.pdb == nil || m.policy == nil {
		t.Fatalf("%s lacks a document: %+v", manifestFile, m)
	}
	return m
}

// TestStrictDecoding: the decoding the other tests rely on rejects an
// unknown field, a known one in the wrong letter case, and a duplicate.
func TestStrictDecoding(t *testing.T) {
	for _, doc := range []string{
		"spec:\n  replica: 2\n",
		"spec:\n  template:\n    spec:\n      containers:\n        - securityContext: {readOnlyRootFileSystem: true}\n",
		"spec:\n  replicas: 2\n  replicas: 3\n",
	} {
		var d appsv1.Deployment
		if err := decodeStrict([]byte(doc), &d); err == nil {
			t.Errorf("decoded without error:\n%s", doc)
		}
	}
	var d appsv1.Deployment
	if err := decodeStrict([]byte("spec:\n  replicas: 2\n"), &d); err != nil || *d.Spec.Replicas != 2 {
		t.Fatalf("a valid document: %v", err)
	}
}

// container returns the Deployment's pgdns container.
func (m manifests) container(t *testing.T) corev1.Container {
	t.Helper()
	cs := m.deployment.Spec.Template.Spec.Containers
	if len(cs) != 1 || cs[0].Name != "pgdns" {
		t.Fatalf("want one container named pgdns, got %d", len(cs))
	}
	return cs[0]
}

// containerPort resolves a probe's or Service's target port (a name or a
// number) to the container's port of that protocol.
func containerPort(t *testing.T, c corev1.Container, target intstr.IntOrString, proto corev1.Protocol) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Protocol != proto {
			continue
		}
		if (target.Type == intstr.String && p.Name == target.StrVal) || (target.Type == intstr.Int && p.ContainerPort == target.IntVal) {
			return p.ContainerPort
		}
	}
	t.Fatalf("container has no %s port %s", proto, target.String())
	return 0
}

// loadConfig loads the ConfigMap's pgdns.yaml the way the container does:
// pgdns's own loader, with the container's plain environment on top, then
// the checks pgdns -check runs.
func (m manifests) loadConfig(t *testing.T) *config.Config {
	t.Helper()
	c := m.container(t)
	idx := slices.Index(c.Command, "-config")
	if idx < 0 || idx+1 >= len(c.Command) {
		t.Fatalf("command %q has no -config", c.Command)
	}
	path := c.Command[idx+1]
	// The file is the ConfigMap's key, mounted where -config points.
	var key string
	for _, vm := range c.VolumeMounts {
		if filepath.Dir(path) != vm.MountPath {
			continue
		}
		for _, v := range m.deployment.Spec.Template.Spec.Volumes {
			if v.Name == vm.Name && v.ConfigMap != nil && v.ConfigMap.Name == m.configMap.Name {
				key = filepath.Base(path)
			}
		}
	}
	yamlText, ok := m.configMap.Data[key]
	if key == "" || !ok {
		t.Fatalf("-config %s is not a key of ConfigMap %s mounted at %s", path, m.configMap.Name, filepath.Dir(path))
	}
	var environ []string
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			environ = append(environ, e.Name+"="+e.Value)
		}
	}
	file := filepath.Join(t.TempDir(), key)
	if err := os.WriteFile(file, []byte(yamlText), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file, environ)
	if err == nil {
		err = app.Check(cfg)
	}
	if err != nil {
		t.Fatalf("ConfigMap %s: %v", m.configMap.Name, err)
	}
	return cfg
}

func listenPort(t *testing.T, key, addr string) (netip.Addr, int32) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s %q: %v", key, addr, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		t.Fatalf("%s %q: not an IP", key, addr)
	}
	n, _ := strconv.Atoi(port)
	return ip, int32(n)
}

func matches(t *testing.T, what string, sel *metav1.LabelSelector, podLabels map[string]string) {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if s.Empty() || !s.Matches(labels.Set(podLabels)) {
		t.Errorf("%s %q does not select the pods (labels %v)", what, s, podLabels)
	}
}

// TestKubernetesManifests checks what the manifests must keep true: two
// replicas on different nodes, probes on the right paths and port, a
// sandboxed non-root container, DNS over UDP and TCP from the Service to
// the port pgdns listens on, a disruption budget and a network policy
// that select the pods, the password from a Secret, and a ConfigMap that
// pgdns itself accepts.
func TestKubernetesManifests(t *testing.T) {
	m := readManifests(t)
	d := m.deployment
	pod := d.Spec.Template
	c := m.container(t)
	cfg := m.loadConfig(t)

	// Replicas on different nodes.
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
		t.Errorf("replicas %v, want at least 2", d.Spec.Replicas)
	}
	matches(t, "Deployment selector", d.Spec.Selector, pod.Labels)
	anti := pod.Spec.Affinity
	if anti == nil || anti.PodAntiAffinity == nil || len(anti.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) == 0 {
		t.Fatal("no required pod anti-affinity")
	}
	term := anti.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0]
	if term.TopologyKey != "kubernetes.io/hostname" {
		t.Errorf("anti-affinity topology %q, want kubernetes.io/hostname", term.TopologyKey)
	}
	matches(t, "anti-affinity selector", term.LabelSelector, pod.Labels)

	// Listeners: on the pod IP (the kubelet and the Service reach it
	// there), on the ports the container declares.
	dnsIP, dnsPort := listenPort(t, "dns.listen", cfg.DNS.Listen)
	httpIP, httpPort := listenPort(t, "http.listen", cfg.HTTP.Listen)
	if !dnsIP.IsUnspecified() || !httpIP.IsUnspecified() {
		t.Errorf("dns.listen %s, http.listen %s: the pod IP must be reachable", cfg.DNS.Listen, cfg.HTTP.Listen)
	}
	for _, proto := range []corev1.Protocol{corev1.ProtocolUDP, corev1.ProtocolTCP} {
		if got := containerPort(t, c, intstr.FromInt32(dnsPort), proto); got != dnsPort {
			t.Errorf("no %s container port %d", proto, dnsPort)
		}
	}
	for name, p := range map[string]*corev1.Probe{"/readyz": c.ReadinessProbe, "/healthz": c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("no HTTP probe on %s", name)
			continue
		}
		if p.HTTPGet.Path != name || containerPort(t, c, p.HTTPGet.Port, corev1.ProtocolTCP) != httpPort {
			t.Errorf("probe %s:%s, want %s on http.listen's port %d", p.HTTPGet.Path, p.HTTPGet.Port.String(), name, httpPort)
		}
	}

	// Non-root, read-only, no capability unless it binds a port below 1024.
	ps, cs := pod.Spec.SecurityContext, c.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.RunAsUser == nil || *ps.RunAsUser == 0 {
		t.Error("the pod may run as root")
	}
	if cs == nil || cs.ReadOnlyRootFilesystem == nil || !*cs.ReadOnlyRootFilesystem {
		t.Error("the root file system is writable")
	}
	if cs == nil || cs.AllowPrivilegeEscalation == nil || *cs.AllowPrivilegeEscalation {
		t.Error("privilege escalation is allowed")
	}
	if cs == nil || cs.Capabilities == nil || !slices.Equal(cs.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Error("capabilities are not all dropped")
	} else {
		var want []corev1.Capability
		if dnsPort < 1024 || httpPort < 1024 {
			want = []corev1.Capability{"NET_BIND_SERVICE"}
		}
		if !slices.Equal(cs.Capabilities.Add, want) {
			t.Errorf("capabilities added %v, want %v (listening on %d and %d)", cs.Capabilities.Add, want, dnsPort, httpPort)
		}
	}

	// The state file on a volume that outlives the container, writable
	// under the read-only root.
	stateVolume(t, m, c, cfg.State.Path)

	// Resources fit the measured footprint; GOMEMLIMIT sits below the limit.
	req, lim := c.Resources.Requests[corev1.ResourceMemory], c.Resources.Limits[corev1.ResourceMemory]
	if req.Cmp(restingRSS) < 0 || lim.Cmp(largeRSS) < 0 || req.Cmp(lim) > 0 {
		t.Errorf("memory request %s, limit %s: want request ≥ %s (resting RSS), limit ≥ %s (1000 hosts)", &req, &lim, &restingRSS, &largeRSS)
	}
	if lim.Cmp(hostileRSS) < 0 {
		t.Errorf("memory limit %s is below the worst case measured under attack, %s", &lim, &hostileRSS)
	}
	if cfg.HTTP.MaxConns > hostileMaxConns {
		t.Errorf("http.max_conns %d: the memory limit was measured with at most %d", cfg.HTTP.MaxConns, hostileMaxConns)
	}
	if _, ok := c.Resources.Requests[corev1.ResourceCPU]; !ok {
		t.Error("no CPU request")
	}
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" {
			gl, err := resource.ParseQuantity(strings.TrimSuffix(e.Value, "B"))
			if err != nil || gl.Cmp(lim) >= 0 || gl.Cmp(hostileRSS) < 0 {
				t.Errorf("GOMEMLIMIT %q must be below the memory limit %s and above the worst case under attack %s", e.Value, &lim, &hostileRSS)
			}
		}
	}

	// The password: PGPASSWORD from a Secret, never in the DSN.
	var fromSecret bool
	for _, e := range c.Env {
		if e.Name == "PGPASSWORD" {
			ref := e.ValueFrom
			fromSecret = e.Value == "" && ref != nil && ref.SecretKeyRef != nil && ref.SecretKeyRef.Name != "" && ref.SecretKeyRef.Key != "" &&
				(ref.SecretKeyRef.Optional == nil || !*ref.SecretKeyRef.Optional)
		}
	}
	if !fromSecret {
		t.Error("PGPASSWORD does not come from a (required) Secret")
	}
	if strings.Contains(strings.ToLower(cfg.Probe.DSN), "password") {
		t.Error("the DSN in the ConfigMap holds a password")
	}

	// The Service: DNS over UDP and TCP on port 53 to the port pgdns
	// listens on, at the fixed ClusterIP the NS record names.
	s := m.service
	matches(t, "Service selector", &metav1.LabelSelector{MatchLabels: s.Spec.Selector}, pod.Labels)
	protos := map[corev1.Protocol]bool{}
	for _, p := range s.Spec.Ports {
		if containerPort(t, c, p.TargetPort, p.Protocol) == dnsPort && p.Port == 53 {
			protos[p.Protocol] = true
		}
	}
	if !protos[corev1.ProtocolUDP] || !protos[corev1.ProtocolTCP] {
		t.Errorf("Service ports %+v: want 53 over UDP and TCP to container port %d", s.Spec.Ports, dnsPort)
	}
	clusterIP, err := netip.ParseAddr(s.Spec.ClusterIP)
	if err != nil {
		t.Fatalf("Service clusterIP %q: %v", s.Spec.ClusterIP, err)
	}
	var named bool
	for _, ns := range cfg.DNS.NameServers {
		named = named || slices.Contains(ns.Addrs, clusterIP)
	}
	if !named {
		t.Errorf("dns.nameservers %+v does not name the Service's ClusterIP %s", cfg.DNS.NameServers, clusterIP)
	}

	// The disruption budget selects the pods and always leaves one.
	matches(t, "PodDisruptionBudget selector", m.pdb.Spec.Selector, pod.Labels)
	switch b := m.pdb.Spec; {
	case b.MaxUnavailable != nil && b.MaxUnavailable.Type == intstr.Int:
		if b.MaxUnavailable.IntVal < 1 || b.MaxUnavailable.IntVal >= *d.Spec.Replicas {
			t.Errorf("maxUnavailable %d of %d replicas", b.MaxUnavailable.IntVal, *d.Spec.Replicas)
		}
	case b.MinAvailable != nil && b.MinAvailable.Type == intstr.Int:
		if b.MinAvailable.IntVal < 1 || b.MinAvailable.IntVal >= *d.Spec.Replicas {
			t.Errorf("minAvailable %d of %d replicas", b.MinAvailable.IntVal, *d.Spec.Replicas)
		}
	default:
		t.Error("the PodDisruptionBudget sets no whole-number budget")
	}

	// The network policy selects the pods and lets DNS in from anywhere.
	np := m.policy
	matches(t, "NetworkPolicy podSelector", &np.Spec.PodSelector, pod.Labels)
	open := map[corev1.Protocol]bool{}
	for _, rule := range np.Spec.Ingress {
		if len(rule.From) > 0 {
			continue
		}
		for _, p := range rule.Ports {
			if p.Port != nil && p.Protocol != nil && containerPort(t, c, *p.Port, *p.Protocol) == dnsPort {
				open[*p.Protocol] = true
			}
		}
	}
	if !open[corev1.ProtocolUDP] || !open[corev1.ProtocolTCP] {
		t.Error("the NetworkPolicy does not let DNS in over UDP and TCP")
	}
}

// TestCoreDNSStanza: the server block for the cluster's CoreDNS forwards
// the zone pgdns serves to the Service's ClusterIP, and caps its cache at
// 1 s with no minimum and no SERVFAIL caching. A real CoreDNS runs it in
// test/ (TestKubernetesCoreDNSStanza).
func TestCoreDNSStanza(t *testing.T) {
	m := readManifests(t)
	cfg := m.loadConfig(t)
	raw, err := os.ReadFile(corednsFile)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(raw), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	text := strings.Join(lines, "\n")
	for _, want := range []string{
		fmt.Sprintf("%s:53 {", cfg.DNS.Zone),
		"forward . " + m.service.Spec.ClusterIP + " {",
		"cache 1 {",
		"success 9984 1 0",
		"denial 9984 1 0",
		"servfail 0",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("%s lacks %q:\n%s", corednsFile, want, text)
		}
	}
	if bytes.Count(raw, []byte("{")) != bytes.Count(raw, []byte("}")) {
		t.Errorf("%s: unbalanced braces", corednsFile)
	}
}

// stateVolume checks that state.path lies on a writable volume of the pod
// that survives a restart of the container (an emptyDir or a claim; the
// root file system is read-only and a container's own files go with it).
func stateVolume(t *testing.T, m manifests, c corev1.Container, path string) {
	t.Helper()
	if path == "" {
		t.Fatal("the ConfigMap sets no state.path: a restarted pod forgets what pgdns learned")
	}
	for _, vm := range c.VolumeMounts {
		if filepath.Dir(path) != vm.MountPath {
			continue
		}
		for _, v := range m.deployment.Spec.Template.Spec.Volumes {
			if v.Name != vm.Name {
				continue
			}
			if vm.ReadOnly || (v.EmptyDir == nil && v.PersistentVolumeClaim == nil) {
				t.Errorf("state.path %s is on volume %s, which is read-only or not an emptyDir or a claim", path, v.Name)
			}
			return
		}
	}
	t.Errorf("state.path %s is not in a folder a volume is mounted at: it would be on the read-only root", path)
}
