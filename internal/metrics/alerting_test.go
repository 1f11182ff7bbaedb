package metrics

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/dnsserver"
	"github.com/pgdns/pgdns/probe"
	"github.com/pgdns/pgdns/zone"
	"github.com/pgdns/pgdns/zone/zonetest"
)

// sample returns the value of the series line that starts with series
// (name and labels as the text format writes them), failing when absent.
func sample(t *testing.T, out, series string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no series %s in:\n%s", series, out)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// The failure counters an alert takes rate() of exist at zero before the
// first failure: a series born at 1 hides that increment from rate() and
// increase(). (Before, none of these was exported until it counted one.)
func TestFailureCountersStartAtZero(t *testing.T) {
	m := New(zone.NewTable())
	m.SetClusters([]string{"main", "orders"})
	m.ProbeDone("main", "10.0.0.1:5432", time.Millisecond, nil)
	out := scrape(t, m)
	want := []string{
		`pgdns_probe_failures_total{cluster="main",host="10.0.0.1:5432"}`,
		`pgdns_dns_queries_total{rcode="SERVFAIL",role="primary"}`,
		`pgdns_dns_queries_total{rcode="SERVFAIL",role="replica"}`,
		`pgdns_dns_queries_total{rcode="SERVFAIL",role="cluster"}`,
		`pgdns_dns_rate_limited_total`,
		`pgdns_config_last_reload_successful`,
	}
	for _, c := range []string{"main", "orders"} {
		want = append(want,
			`pgdns_split_brain_total{cluster="`+c+`"}`,
			`pgdns_primary_changes_total{cluster="`+c+`"}`,
			`pgdns_flux_probes_total{cluster="`+c+`"}`,
			`pgdns_flux_episodes_total{cluster="`+c+`"}`,
			`pgdns_lsn_unreachable_total{cluster="`+c+`"}`,
			`pgdns_lsn_refresh_rounds_total{cluster="`+c+`"}`,
			`pgdns_lsn_refresh_coalesced_total{cluster="`+c+`",reason="min_gap"}`)
		for _, class := range probe.FailureClasses {
			want = append(want, `pgdns_probe_errors_total{class="`+class+`",cluster="`+c+`"}`)
		}
	}
	for _, series := range want {
		v := sample(t, out, series)
		if series == "pgdns_config_last_reload_successful" {
			v-- // 1 from the start: the configuration pgdns started with took
		}
		if v != 0 {
			t.Errorf("%s = %v at the start", series, v)
		}
	}
}

// Probe errors are counted by class as well as by host.
func TestProbeErrorsByClass(t *testing.T) {
	m := New(zone.NewTable())
	m.SetClusters([]string{"main"})
	m.ProbeDone("main", "10.0.0.1:5432", time.Millisecond, fmt.Errorf("probe query: %w", context.DeadlineExceeded))
	m.ProbeDone("main", "10.0.0.1:5432", time.Millisecond, fmt.Errorf("probe query: %w", context.DeadlineExceeded))
	m.ProbeDone("main", "10.0.0.2:5432", time.Millisecond, errors.New("something else"))
	out := scrape(t, m)
	for series, want := range map[string]float64{
		`pgdns_probe_errors_total{class="timeout",cluster="main"}`:        2,
		`pgdns_probe_errors_total{class="other",cluster="main"}`:          1,
		`pgdns_probe_errors_total{class="not_serving",cluster="main"}`:    0,
		`pgdns_probe_failures_total{cluster="main",host="10.0.0.1:5432"}`: 2,
		`pgdns_probe_failures_total{cluster="main",host="10.0.0.2:5432"}`: 1,
	} {
		if got := sample(t, out, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
}

// pgdns_build_info names the version set, and only that one.
func TestBuildInfo(t *testing.T) {
	m := New(zone.NewTable())
	if v := sample(t, scrape(t, m), `pgdns_build_info{goversion="`+runtime.Version()+`",version="dev"}`); v != 1 {
		t.Fatalf("build info %v", v)
	}
	m.SetVersion("v1.2.3")
	out := scrape(t, m)
	if v := sample(t, out, `pgdns_build_info{goversion="`+runtime.Version()+`",version="v1.2.3"}`); v != 1 {
		t.Fatalf("build info %v", v)
	}
	if strings.Count(out, "pgdns_build_info{") != 1 {
		t.Fatalf("more than one build info:\n%s", out)
	}
}

// A rejected reload sets pgdns_config_last_reload_successful to 0 and
// leaves the time of the last success; the next good one sets both.
func TestReloadOutcome(t *testing.T) {
	before := float64(time.Now().Add(-time.Second).Unix())
	m := New(zone.NewTable())
	out := scrape(t, m)
	started := sample(t, out, "pgdns_config_last_reload_success_timestamp_seconds")
	if sample(t, out, "pgdns_config_last_reload_successful") != 1 || started < before {
		t.Fatalf("at the start: %v at %v", sample(t, out, "pgdns_config_last_reload_successful"), started)
	}
	m.Reloaded(errors.New("clusters.main.hosts: empty"))
	out = scrape(t, m)
	if ok, at := sample(t, out, "pgdns_config_last_reload_successful"), sample(t, out, "pgdns_config_last_reload_success_timestamp_seconds"); ok != 0 || at != started {
		t.Fatalf("after a rejected reload: %v, at %v (started %v)", ok, at, started)
	}
	time.Sleep(10 * time.Millisecond)
	m.Reloaded(nil)
	out = scrape(t, m)
	if ok, at := sample(t, out, "pgdns_config_last_reload_successful"), sample(t, out, "pgdns_config_last_reload_success_timestamp_seconds"); ok != 1 || at <= started {
		t.Fatalf("after a good reload: %v, at %v (started %v)", ok, at, started)
	}
}

// Each host says since when it has its role; a change of a cluster's
// primary to another host is counted, the first primary and an old
// primary coming back are not.
func TestRoleSinceAndPrimaryChanges(t *testing.T) {
	now := time.Now()
	table := zone.NewTable()
	table.Store(zonetest.Ready(now, time.Minute, zonetest.Cluster("main",
		zonetest.Host("10.0.0.1", false, 0, now), zonetest.Host("10.0.0.2", true, 0, now))))
	m := New(table)
	m.SetClusters([]string{"main"})
	start := sample(t, scrape(t, m), `pgdns_host_role_since_timestamp_seconds{cluster="main",host="10.0.0.2:5432"}`)
	if start < float64(now.Add(-time.Second).Unix()) {
		t.Fatalf("since %v, before pgdns started", start)
	}
	time.Sleep(10 * time.Millisecond)
	m.RoleChanged("main", "10.0.0.1:5432", zone.RoleUnknown, zone.RolePrimary) // pgdns's first sight
	m.RoleChanged("main", "10.0.0.1:5432", zone.RolePrimary, zone.RoleDown)
	m.RoleChanged("main", "10.0.0.1:5432", zone.RoleDown, zone.RolePrimary) // it came back
	out := scrape(t, m)
	if n := sample(t, out, `pgdns_primary_changes_total{cluster="main"}`); n != 0 {
		t.Fatalf("%v primary changes before any failover", n)
	}
	if since := sample(t, out, `pgdns_host_role_since_timestamp_seconds{cluster="main",host="10.0.0.1:5432"}`); since <= start {
		t.Errorf("the primary's role since %v, not after its change (start %v)", since, start)
	}
	if since := sample(t, out, `pgdns_host_role_since_timestamp_seconds{cluster="main",host="10.0.0.2:5432"}`); since != start {
		t.Errorf("the replica's role since %v, want pgdns's start %v", since, start)
	}
	m.RoleChanged("main", "10.0.0.1:5432", zone.RolePrimary, zone.RoleDown)
	m.RoleChanged("main", "10.0.0.2:5432", zone.RoleReplica, zone.RolePrimary) // the failover
	if n := sample(t, scrape(t, m), `pgdns_primary_changes_total{cluster="main"}`); n != 1 {
		t.Fatalf("%v primary changes after one failover", n)
	}
}

// The cluster gauges follow the answers: how many hosts primary.<c> and
// replica.<c> answer, the hosts probed, split brain.
func TestClusterGauges(t *testing.T) {
	now := time.Now()
	table := zone.NewTable()
	m := New(table)
	table.Store(&zone.Snapshot{Clusters: []*zone.Cluster{zonetest.Cluster("main",
		zonetest.Host("10.0.0.1", false, 0, now), zonetest.Host("10.0.0.2", true, 0, now))}})
	out := scrape(t, m)
	if p, r := sample(t, out, `pgdns_cluster_primary_answered{cluster="main"}`), sample(t, out, `pgdns_cluster_replicas_answered{cluster="main"}`); p != 0 || r != 0 {
		t.Fatalf("not ready yet: primary %v, replicas %v answered", p, r)
	}
	down := zone.Host{Cluster: "main", Addr: "10.0.0.3:5432", Fails: 3}
	table.Store(zonetest.Ready(now, time.Minute, zonetest.Cluster("main",
		zonetest.Host("10.0.0.1", false, 0, now), zonetest.Host("10.0.0.2", true, 0, now), zonetest.Host("10.0.0.4", true, 0, now), down)))
	out = scrape(t, m)
	for series, want := range map[string]float64{
		`pgdns_cluster_hosts{cluster="main"}`:             4,
		`pgdns_cluster_primary_answered{cluster="main"}`:  1,
		`pgdns_cluster_replicas_answered{cluster="main"}`: 2,
		`pgdns_cluster_split_brain{cluster="main"}`:       0,
	} {
		if got := sample(t, out, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	split := zonetest.Cluster("main", zonetest.Host("10.0.0.1", false, 0, now), zonetest.Host("10.0.0.2", false, 0, now))
	table.Store(zonetest.Ready(now, time.Minute, split))
	out = scrape(t, m)
	if !split.SplitBrain {
		t.Fatal("two writable hosts on one timeline are not split brain")
	}
	if s, p := sample(t, out, `pgdns_cluster_split_brain{cluster="main"}`), sample(t, out, `pgdns_cluster_primary_answered{cluster="main"}`); s != 1 || p != 0 {
		t.Fatalf("split brain %v, primary answered %v", s, p)
	}
}

// Answer latency is recorded by path and rcode, without allocating once
// the series exists: DNSLatency runs on the allocation-free fast path, as
// DNSAnswer does.
func TestDNSLatency(t *testing.T) {
	m := New(zone.NewTable())
	m.DNSLatency(dnsserver.PathFast, 0, 3*time.Microsecond)
	m.DNSLatency(dnsserver.PathSlow, 2, 2*time.Millisecond)
	if n := testing.AllocsPerRun(1000, func() {
		m.DNSAnswer(dnsserver.AskedPrimary, 0)
		m.DNSLatency(dnsserver.PathFast, 0, 3*time.Microsecond)
	}); n != 0 {
		t.Errorf("%.1f allocations per answer counted and timed", n)
	}
	out := scrape(t, m)
	for series, want := range map[string]float64{
		`pgdns_dns_answer_duration_seconds_count{path="fast",rcode="NOERROR"}`:               1002, // one, then AllocsPerRun's warm-up and 1000 runs
		`pgdns_dns_answer_duration_seconds_bucket{path="fast",rcode="NOERROR",le="5e-06"}`:   1002,
		`pgdns_dns_answer_duration_seconds_bucket{path="slow",rcode="SERVFAIL",le="0.001"}`:  0,
		`pgdns_dns_answer_duration_seconds_bucket{path="slow",rcode="SERVFAIL",le="0.0025"}`: 1,
	} {
		if got := sample(t, out, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
}

// pgdns_dns_rate_limited_total reads the limiter's count of queries it
// turned away.
func TestRateLimitedCounted(t *testing.T) {
	m := New(zone.NewTable())
	r := dnsserver.NewRateLimiter(dnsserver.RateLimits{PerSecond: 1})
	m.TrackRateLimiter(r)
	src := netip.MustParseAddr("192.0.2.1")
	allowed := 0
	for range 5 {
		if r.Allow(src) {
			allowed++
		}
	}
	if got := sample(t, scrape(t, m), "pgdns_dns_rate_limited_total"); got != float64(5-allowed) || allowed == 5 {
		t.Fatalf("rate limited %v, with %d of 5 allowed", got, allowed)
	}
}

// BenchmarkDNSAnswerTimed: counting and timing one fast-path answer, as
// every such answer does.
func BenchmarkDNSAnswerTimed(b *testing.B) {
	m := New(zone.NewTable())
	b.ReportAllocs()
	for b.Loop() {
		began := time.Now()
		m.DNSAnswer(dnsserver.AskedPrimary, 0)
		m.DNSLatency(dnsserver.PathFast, 0, time.Since(began))
	}
}
