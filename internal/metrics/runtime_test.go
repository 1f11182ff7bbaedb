package metrics

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/zone"
)

// runtimeFamilies are the go_* and process_* families client_golang's Go
// and process collectors wrote on Linux, and their types: the page keeps
// every one of them, under the same name and type.
var runtimeFamilies = map[string]dto.MetricType{
	"go_gc_duration_seconds":               dto.MetricType_SUMMARY,
	"go_gc_gogc_percent":                   dto.MetricType_GAUGE,
	"go_gc_gomemlimit_bytes":               dto.MetricType_GAUGE,
	"go_goroutines":                        dto.MetricType_GAUGE,
	"go_info":                              dto.MetricType_GAUGE,
	"go_memstats_alloc_bytes":              dto.MetricType_GAUGE,
	"go_memstats_alloc_bytes_total":        dto.MetricType_COUNTER,
	"go_memstats_buck_hash_sys_bytes":      dto.MetricType_GAUGE,
	"go_memstats_frees_total":              dto.MetricType_COUNTER,
	"go_memstats_gc_sys_bytes":             dto.MetricType_GAUGE,
	"go_memstats_heap_alloc_bytes":         dto.MetricType_GAUGE,
	"go_memstats_heap_idle_bytes":          dto.MetricType_GAUGE,
	"go_memstats_heap_inuse_bytes":         dto.MetricType_GAUGE,
	"go_memstats_heap_objects":             dto.MetricType_GAUGE,
	"go_memstats_heap_released_bytes":      dto.MetricType_GAUGE,
	"go_memstats_heap_sys_bytes":           dto.MetricType_GAUGE,
	"go_memstats_last_gc_time_seconds":     dto.MetricType_GAUGE,
	"go_memstats_mallocs_total":            dto.MetricType_COUNTER,
	"go_memstats_mcache_inuse_bytes":       dto.MetricType_GAUGE,
	"go_memstats_mcache_sys_bytes":         dto.MetricType_GAUGE,
	"go_memstats_mspan_inuse_bytes":        dto.MetricType_GAUGE,
	"go_memstats_mspan_sys_bytes":          dto.MetricType_GAUGE,
	"go_memstats_next_gc_bytes":            dto.MetricType_GAUGE,
	"go_memstats_other_sys_bytes":          dto.MetricType_GAUGE,
	"go_memstats_stack_inuse_bytes":        dto.MetricType_GAUGE,
	"go_memstats_stack_sys_bytes":          dto.MetricType_GAUGE,
	"go_memstats_sys_bytes":                dto.MetricType_GAUGE,
	"go_sched_gomaxprocs_threads":          dto.MetricType_GAUGE,
	"go_threads":                           dto.MetricType_GAUGE,
	"process_cpu_seconds_total":            dto.MetricType_COUNTER,
	"process_max_fds":                      dto.MetricType_GAUGE,
	"process_network_receive_bytes_total":  dto.MetricType_COUNTER,
	"process_network_transmit_bytes_total": dto.MetricType_COUNTER,
	"process_open_fds":                     dto.MetricType_GAUGE,
	"process_resident_memory_bytes":        dto.MetricType_GAUGE,
	"process_start_time_seconds":           dto.MetricType_GAUGE,
	"process_virtual_memory_bytes":         dto.MetricType_GAUGE,
	"process_virtual_memory_max_bytes":     dto.MetricType_GAUGE,
}

// The page has every family of the Go runtime and the process that
// client_golang's collectors wrote, with values read from this process.
func TestRuntimeFamilies(t *testing.T) {
	runtime.GC() // a pause to summarize
	families := parsePage(t, scrape(t, New(zone.NewTable())))
	for name, typ := range runtimeFamilies {
		f := families[name]
		if f == nil {
			t.Errorf("no %s", name)
			continue
		}
		if f.GetType() != typ {
			t.Errorf("%s is a %v, not a %v", name, f.GetType(), typ)
		}
	}
	for name := range families {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			if _, ok := runtimeFamilies[name]; !ok {
				t.Errorf("%s is not a family client_golang wrote", name)
			}
		}
	}
	value := func(name string) float64 {
		f := families[name]
		if f == nil || len(f.Metric) != 1 {
			t.Fatalf("%s: not one series", name)
		}
		m := f.Metric[0]
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Counter != nil:
			return m.Counter.GetValue()
		}
		return m.GetSummary().GetSampleSum()
	}
	if v := value("go_goroutines"); v < 1 {
		t.Errorf("go_goroutines %v", v)
	}
	if v := value("go_sched_gomaxprocs_threads"); v != float64(runtime.GOMAXPROCS(0)) {
		t.Errorf("go_sched_gomaxprocs_threads %v, GOMAXPROCS %d", v, runtime.GOMAXPROCS(0))
	}
	if l := families["go_info"].Metric[0].Label; len(l) != 1 || l[0].GetName() != "version" || l[0].GetValue() != runtime.Version() {
		t.Errorf("go_info's labels %v", l)
	}
	if q := families["go_gc_duration_seconds"].Metric[0].GetSummary(); len(q.Quantile) != 5 || q.GetSampleCount() < 1 {
		t.Errorf("go_gc_duration_seconds %v", q)
	}
	if v := value("go_memstats_heap_inuse_bytes"); v <= 0 {
		t.Errorf("go_memstats_heap_inuse_bytes %v", v)
	}
	if v := value("process_resident_memory_bytes"); v < 1<<20 {
		t.Errorf("process_resident_memory_bytes %v", v)
	}
	if v := value("process_open_fds"); v < 3 || v > value("process_max_fds") {
		t.Errorf("process_open_fds %v, process_max_fds %v", v, value("process_max_fds"))
	}
	if v := value("process_virtual_memory_bytes"); v < value("process_resident_memory_bytes") {
		t.Errorf("process_virtual_memory_bytes %v", v)
	}
	started := value("process_start_time_seconds")
	if now := float64(time.Now().Unix()); started > now+2 || started < now-24*3600 {
		t.Errorf("process_start_time_seconds %v, now %v", started, now)
	}
	if v := value("process_cpu_seconds_total"); v < 0 {
		t.Errorf("process_cpu_seconds_total %v", v)
	}
}

// promtool, the linter Prometheus ships, accepts the whole page of a
// busy fleet.
func TestPromtoolChecksThePage(t *testing.T) {
	promtool := testkit.RequireTool(t, "promtool")
	m, _, clusters := fleet(t, 30)
	busy(m, clusters)
	m.TrackState()
	m.HTTPRequest("/v1/hosts", 200)
	file := t.TempDir() + "/page.txt"
	if err := os.WriteFile(file, []byte(scrape(t, m)), 0o644); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = in
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}
