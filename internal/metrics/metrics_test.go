package metrics

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/dnsserver"
	"github.com/pgdns/pgdns/probe"
	"github.com/pgdns/pgdns/zone"
	"github.com/pgdns/pgdns/zone/zonetest"
)

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	return w.Body.String()
}

func TestMetrics(t *testing.T) {
	now := time.Now()
	table := zone.NewTable()
	primary := zonetest.Host("10.0.0.1", false, 0, now)
	primary.LagKnown, primary.BytesKnown = true, true
	replica := zonetest.Host("10.0.0.2", true, 0, now)
	replica.Lag, replica.LagBytes = 1500*time.Millisecond, 4096
	down := zone.Host{Cluster: "main", Addr: "10.0.0.3:5432", Fails: 3}
	table.Store(zonetest.Ready(now, time.Minute, zonetest.Cluster("main", primary, replica, down)))

	m := New(table)
	for range 3 {
		m.DNSAnswer(dnsserver.AskedReplica, 0)
	}
	m.DNSAnswer(dnsserver.AskedInvalid, 3)
	m.ProbeDone("main", "10.0.0.3:5432", 2*time.Millisecond, errors.New("refused"))
	m.RoleChanged("main", "10.0.0.3:5432", zone.RoleReplica, zone.RoleDown)
	m.SplitBrain("main")
	m.HTTPRequest("/master", 200)
	m.RefreshRound("main")
	m.RefreshCoalesced("main", probe.CoalescedRunning)
	m.RefreshCoalesced("main", probe.CoalescedMinGap)
	m.RefreshCoalesced("main", probe.CoalescedMinGap)
	m.DNSLocality(zone.Local)
	m.DNSLocality(zone.Local)
	m.DNSLocality(zone.Remote)
	m.HTTPEvicted(false)
	m.HTTPEvicted(false)
	m.HTTPEvicted(true)
	m.LSNWaitFull()

	out := scrape(t, m)
	for _, want := range []string{
		`pgdns_dns_queries_total{rcode="NOERROR",role="replica"} 3`,
		`pgdns_dns_queries_total{rcode="NXDOMAIN",role="invalid"} 1`,
		`pgdns_probe_failures_total{cluster="main",host="10.0.0.3:5432"} 1`,
		`pgdns_host_probes_total{cluster="main",host="10.0.0.3:5432"} 1`,
		`pgdns_probe_duration_seconds_count{cluster="main"} 1`,
		`pgdns_probe_duration_seconds_bucket{cluster="main",le="0.001"} 0`,
		`pgdns_probe_duration_seconds_bucket{cluster="main",le="0.0025"} 1`,
		`pgdns_probe_duration_seconds_bucket{cluster="main",le="+Inf"} 1`,
		`pgdns_probe_duration_seconds_sum{cluster="main"} 0.002`,
		`pgdns_role_changes_total{cluster="main",from="replica",to="down"} 1`,
		`pgdns_split_brain_total{cluster="main"} 1`,
		`pgdns_http_requests_total{code="200",route="/master"} 1`,
		`pgdns_lsn_refresh_rounds_total{cluster="main"} 1`,
		`pgdns_lsn_refresh_coalesced_total{cluster="main",reason="running"} 1`,
		`pgdns_lsn_refresh_coalesced_total{cluster="main",reason="min_gap"} 2`,
		`pgdns_host_up{cluster="main",host="10.0.0.1:5432"} 1`,
		`pgdns_host_up{cluster="main",host="10.0.0.3:5432"} 0`,
		`pgdns_host_role{cluster="main",host="10.0.0.2:5432",role="replica"} 1`,
		`pgdns_host_role{cluster="main",host="10.0.0.3:5432",role="down"} 1`,
		`pgdns_host_lag_seconds{cluster="main",host="10.0.0.2:5432"} 1.5`,
		`pgdns_host_lag_bytes{cluster="main",host="10.0.0.2:5432"} 4096`,
		`pgdns_ready 1`,
		`pgdns_dns_locality_total{answer="local"} 2`,
		`pgdns_dns_locality_total{answer="remote"} 1`,
		`pgdns_dns_locality_total{answer="unlocated"} 0`,
		`pgdns_http_conns_closed_total{reason="evicted_idle"} 2`,
		`pgdns_http_conns_closed_total{reason="refused_busy"} 1`,
		`pgdns_dns_lsn_waits_full_total 1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(out, `pgdns_host_lag_seconds{cluster="main",host="10.0.0.3:5432"}`) {
		t.Error("a down host reports a lag")
	}
}

// TestHostProbes: the function a host's loop keeps counts its probes in
// the counters ProbeDone finds by name, and allocates nothing.
func TestHostProbes(t *testing.T) {
	m := New(zone.NewTable())
	done := m.HostProbes("main", "10.0.0.1:5432")
	if out := scrape(t, m); !strings.Contains(out, `pgdns_host_probes_total{cluster="main",host="10.0.0.1:5432"} 0`+"\n") {
		t.Error("a host whose loop started is not on the page at zero")
	}
	done(2*time.Millisecond, nil)
	done(time.Second, errors.New("refused"))
	m.ProbeDone("main", "10.0.0.1:5432", time.Millisecond, nil)
	out := scrape(t, m)
	for _, want := range []string{
		`pgdns_host_probes_total{cluster="main",host="10.0.0.1:5432"} 3`,
		`pgdns_probe_failures_total{cluster="main",host="10.0.0.1:5432"} 1`,
		`pgdns_probe_duration_seconds_count{cluster="main"} 3`,
		`pgdns_probe_duration_seconds_bucket{cluster="main",le="0.0025"} 2`,
		`pgdns_probe_errors_total{class="other",cluster="main"} 1`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("no %s", want)
		}
	}
	if a := testing.AllocsPerRun(100, func() { done(time.Millisecond, nil) }); a != 0 {
		t.Errorf("a probe recorded allocates %v times", a)
	}
}

// BenchmarkProbeDone: recording one good probe of one of a thousand
// hosts, as every probe does, by the function the host's loop keeps
// (HostProbes).
func BenchmarkProbeDone(b *testing.B) {
	m := New(zone.NewTable())
	hosts := make([]func(time.Duration, error), 1000)
	for i := range hosts {
		hosts[i] = m.HostProbes("main", fmt.Sprintf("10.0.%d.%d:5432", i/250, i%250+1))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		hosts[i%len(hosts)](time.Millisecond, nil)
		i++
	}
}

// BenchmarkProbeDoneByName: ProbeDone, which finds the host by name.
func BenchmarkProbeDoneByName(b *testing.B) {
	m := New(zone.NewTable())
	hosts := make([]string, 1000)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("10.0.%d.%d:5432", i/250, i%250+1)
		m.ProbeDone("main", hosts[i], time.Millisecond, nil)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m.ProbeDone("main", hosts[i%len(hosts)], time.Millisecond, nil)
		i++
	}
}

// TestClusterProbes: the function the prober keeps for a cluster counts
// its probes in the counters Probes finds by name, and allocates
// nothing.
func TestClusterProbes(t *testing.T) {
	m := New(zone.NewTable())
	count := m.ClusterProbes("main")
	count(probe.ProbeRound, 2)
	count(probe.ProbeClosing, 1)
	m.Probes("main", probe.ProbeRound, 3)
	out := scrape(t, m)
	for _, want := range []string{
		`pgdns_probes_total{cluster="main",why="round"} 5`,
		`pgdns_probes_total{cluster="main",why="closing"} 1`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("no %s", want)
		}
	}
	if a := testing.AllocsPerRun(100, func() { count(probe.ProbeTick, 1) }); a != 0 {
		t.Errorf("a count allocates %v times", a)
	}
}

// BenchmarkClusterProbes: counting the probes of a round of one of 333
// clusters (its tick, its replicas', its closing probe) by the function
// the prober keeps for the cluster (ClusterProbes).
func BenchmarkClusterProbes(b *testing.B) {
	m := New(zone.NewTable())
	clusters := make([]func(probe.ProbeCause, int), 333)
	for i := range clusters {
		clusters[i] = m.ClusterProbes(fmt.Sprintf("c%d", i))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		count := clusters[i%len(clusters)]
		count(probe.ProbeTick, 1)
		count(probe.ProbeRound, 2)
		count(probe.ProbeClosing, 1)
		i++
	}
}

// BenchmarkClusterProbesByName: the same by Probes, which finds the
// cluster by name.
func BenchmarkClusterProbesByName(b *testing.B) {
	m := New(zone.NewTable())
	clusters := make([]string, 333)
	for i := range clusters {
		clusters[i] = fmt.Sprintf("c%d", i)
		m.Probes(clusters[i], probe.ProbeTick, 0)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		name := clusters[i%len(clusters)]
		m.Probes(name, probe.ProbeTick, 1)
		m.Probes(name, probe.ProbeRound, 2)
		m.Probes(name, probe.ProbeClosing, 1)
		i++
	}
}
