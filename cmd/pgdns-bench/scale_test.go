package main

import (
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseScaleSizes(t *testing.T) {
	got, err := parseScaleSizes(defaultScaleSizes, 3)
	if err != nil {
		t.Fatal(err)
	}
	q := 250 * time.Millisecond
	want := []scaleSize{{100, q}, {1000, q}, {3000, q}, {10000, time.Second}}
	if len(got) != len(want) {
		t.Fatalf("%v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("size %d: %v, want %v", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"", "3", "100,x", "100@1", "100@5ms", "70000", "-5"} {
		if _, err := parseScaleSizes(bad, 3); err == nil {
			t.Errorf("parseScaleSizes(%q): no error", bad)
		}
	}
}

// A point's figures are its measurements over the probes done in its
// windows.
func TestScalePointFigures(t *testing.T) {
	p := scalePoint{hosts: 1000, interval: 250 * time.Millisecond, probesPerSec: 3960, fluxPerSec: 10,
		span: 30 * time.Second, cpu: 3 * time.Second, mallocs: 1188000, fakeCPU: 1500 * time.Millisecond}
	if got := p.configured(); got != 4000 {
		t.Errorf("configured %v, want 4000", got)
	}
	if got, want := p.perProbe(), 25252*time.Nanosecond; got != want { // 3 s over 118,800 probes
		t.Errorf("perProbe %v, want %v", got, want)
	}
	if got := p.share(); got != 10 {
		t.Errorf("share %v, want 10", got)
	}
	if got := p.fakeShare(); got != 5 {
		t.Errorf("fakeShare %v, want 5", got)
	}
	if got := p.allocsPerProbe(); got != 10 {
		t.Errorf("allocsPerProbe %v, want 10", got)
	}
	if got := p.intervalRate(); got != 3950 {
		t.Errorf("intervalRate %v, want 3950", got)
	}
	if (scalePoint{}).perProbe() != 0 || (scalePoint{}).allocsPerProbe() != 0 || (scalePoint{}).share() != 0 {
		t.Error("a point without probes or time has figures")
	}
}

// Each target of the series is stated against its size's figure, met or
// missed; a size without targets has none.
func TestScaleTargetsTable(t *testing.T) {
	q := 250 * time.Millisecond
	s := &scaleResult{realHosts: 3, rss3Idle: 19 * 1024, points: []scalePoint{
		{hosts: 100, fakes: 97, interval: q, probesPerSec: 400, span: 10 * time.Second, cpu: time.Second, rss: 30 * 1024},
		// 36 µs per probe, 14.4% of a core, 47 MiB, 3,940 of 4,000 probes/s: the rate misses
		{hosts: 1000, interval: q, probesPerSec: 3940, span: 10 * time.Second, cpu: time.Duration(36e-6 * 3940 * 10 * float64(time.Second)), rss: 47 * 1024},
		// 60% of a core, 200 MiB, the rate kept
		{hosts: 10000, interval: time.Second, probesPerSec: 10100, fluxPerSec: 100, span: 10 * time.Second, cpu: 6 * time.Second, rss: 200 * 1024},
	}}
	got := s.targetsTable()
	for _, want := range []string{
		"| 3 (real), serving and probing, at rest before any load | RSS | 19.00 MiB | ≤ 20.0 MiB | met |",
		"| 1,000 every 250ms | CPU per probe | 36.0 µs | ≤ 37.0 µs | met |",
		"| 1,000 every 250ms | share of a core | 14.2% | ≤ 15% | met |",
		"| 1,000 every 250ms | RSS | 47.00 MiB | ≤ 48.0 MiB | met |",
		"| 1,000 every 250ms | probes/s on the interval (done less flux) | 3940 (98.5% of 4000) | within 2% | met |",
		"| 10,000 every 1s | share of a core | 60.0% | ≤ 50% | **missed** |",
		"| 10,000 every 1s | RSS | 200.00 MiB | ≤ 256.0 MiB | met |",
		"| 10,000 every 1s | probes/s on the interval (done less flux) | 10000 (100.0% of 10000) | within 2% | met |",
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("no line %q in\n%s", want, got)
		}
	}
	if strings.Contains(got, "| 100 every") {
		t.Errorf("a size without targets has a row:\n%s", got)
	}
	s.points[2].why = map[string]float64{"tick": 100, "round": 9700, "closing": 300}
	if !strings.Contains(s.targetsTable(), "| 10,000 every 1s | probes/s on the interval (tick + round) | 9800 (98.0% of 10000) | within 2% | met |") {
		t.Errorf("the interval's probes are not tick and round's:\n%s", s.targetsTable())
	}
	s.points[1].probesPerSec = 3900 // 97.5%
	if !strings.Contains(s.targetsTable(), "| 1,000 every 250ms | probes/s on the interval (done less flux) | 3900 (97.5% of 4000) | within 2% | **missed** |") {
		t.Errorf("a rate 2.5%% short is not missed:\n%s", s.targetsTable())
	}
}

// The section has a row per size, the plot, and the DNS comparison.
func TestScaleMarkdown(t *testing.T) {
	q := 250 * time.Millisecond
	s := &scaleResult{realHosts: 3, windows: 3, window: 10 * time.Second, rss3Idle: 19 * 1024, plot: "scale.png", points: []scalePoint{
		{hosts: 100, fakes: 97, interval: q, probesPerSec: 400, span: 30 * time.Second, cpu: 600 * time.Millisecond, cpuTicks: 610 * time.Millisecond, shares: []float64{2, 2, 2}, rss: 20 * 1024, mallocs: 120000,
			readyIn: 1234 * time.Millisecond, liveAfter: 100},
		{hosts: 3000, fakes: 2997, interval: q, probesPerSec: 12000, span: 30 * time.Second, cpu: 18 * time.Second, shares: []float64{60, 60, 60}, rss: 100 * 1024,
			why: map[string]float64{"tick": 10, "round": 11990, "closing": 30, "other": 1}, notReady: "2,000 of 3,000 live after 2m0s", liveAfter: 2500},
	}, dns: &scaleDNS{hosts: 3000, interval: q, duration: 8 * time.Second, small: []float64{50000, 52000}, large: []float64{40000, 42000}, probesPerSec: 11900, configuredPer: 12000,
		answers: []mixAnswer{{name: "primary.db.local", rcode: "NOERROR", records: 1}, {name: "replica.db.local", rcode: "NOERROR", records: 2},
			{name: "lsn-0-3000060.replica.db.local", rcode: "NOERROR", records: 2}}}}
	md := s.markdown()
	if strings.Contains(md, "truncated (TC), as a client gets them") {
		t.Errorf("the section says replica answers are truncated, which no answer read was:\n%s", md)
	}
	for _, want := range []string{
		"| 100 every 250ms | 400 (400) | flux 0 | 50.0 µs | 2.0% (2.0, 2.0, 2.0) | 20.0 MiB |",
		"(100 hosts: 31 clusters of 3 and one of 4; 3,000 hosts: 999 clusters of 3)",
		"| 10.0 |", // allocations per probe: 120,000 over 12,000 probes
		"| 1.2s |",
		"| **not all**: 2,000 of 3,000 live after 2m0s; 2,500 live after the windows |",
		"| 3,000 every 250ms | 12000 (12000) | tick 10, round 11990, closing 30, tick_driven 0, flux 0, refresh 0, other 1 |",
		"give 50.8 µs, 0.0 µs per probe",
		"![pgdns's CPU time per probe and its resident set against the hosts it probes](scale.png)",
		"| 3 hosts | 52000 (50000, 52000) |",
		"| 3,000 hosts | 42000 (40000, 42000) |",
		"0.81× the queries/s of 3",
		"the large one answered them, asked once each over UDP before the rounds: `primary` 1 record, `replica` 2 records, `lsn-….replica` 2 records; none truncated.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("no %q in\n%s", want, md)
		}
	}
}

// The plot's data is one line per size in order of hosts, and the script
// draws CPU per probe and RSS against hosts from it.
func TestScalePlot(t *testing.T) {
	q := 250 * time.Millisecond
	pts := []scalePoint{
		{hosts: 1000, interval: time.Second, probesPerSec: 4000, span: 10 * time.Second, cpu: 1200 * time.Millisecond, rss: 48 * 1024},
		{hosts: 100, fakes: 97, interval: q, probesPerSec: 400, span: 10 * time.Second, cpu: 160 * time.Millisecond, rss: 20 * 1024},
	}
	if got, want := scalePlotData(pts), "# hosts cpu_us_per_probe rss_mib core_pct interval\n100 40.00 20.00 1.60 \"\"\n1000 30.00 48.00 12.00 \"every 1s\"\n"; got != want {
		t.Errorf("data %q, want %q", got, want)
	}
	if got, want := scaleTargetData(), "# hosts cpu_us_per_probe rss_mib\n1000 37.00 48.00\n10000 NaN 256.00\n"; got != want {
		t.Errorf("targets %q, want %q", got, want)
	}
	sc := scalePlotScript("/d/scale.png", "/d/scale.dat", "/d/t.dat", "pgdns at abc")
	for _, want := range []string{`set output "/d/scale.png"`, `plot "/d/scale.dat" using 1:2 `, `"/d/t.dat" using 1:2 `, `plot "/d/scale.dat" using 1:3 `, `"/d/t.dat" using 1:3 `} {
		if !strings.Contains(sc, want) {
			t.Errorf("no %q in the script:\n%s", want, sc)
		}
	}
	if _, err := exec.LookPath("gnuplot"); err == nil {
		dir := t.TempDir()
		res := &scaleResult{points: pts}
		if _, err := plotScale(dir, res); err != nil {
			t.Errorf("plotScale: %v", err)
		}
	}
}

func TestProbesByWhy(t *testing.T) {
	page := "# HELP pgdns_probes_total x\npgdns_probes_total{cluster=\"a\",why=\"tick\"} 5\npgdns_probes_total{cluster=\"b\",why=\"tick\"} 2\npgdns_probes_total{cluster=\"a\",why=\"round\"} 40\npgdns_probes_totalx 1\n"
	got, err := probesByWhy(page)
	if err != nil || len(got) != 2 || got["tick"] != 7 || got["round"] != 40 {
		t.Errorf("probesByWhy = %v, %v", got, err)
	}
	if got, err := probesByWhy("go_goroutines 5\n"); err != nil || got != nil {
		t.Errorf("without the metric: %v, %v", got, err)
	}
}

func TestParseSchedstat(t *testing.T) {
	if d, err := parseSchedstat("1837798 52 3\n"); err != nil || d != 1837798 {
		t.Errorf("parseSchedstat = %v, %v", d, err)
	}
	for _, bad := range []string{"", "1 2", "x 1 2"} {
		if _, err := parseSchedstat(bad); err == nil {
			t.Errorf("parseSchedstat(%q): no error", bad)
		}
	}
	// This process has run: its threads' time is above 0 and grows.
	a, err := cpuTime(syscall.Getpid())
	if err != nil || a <= 0 {
		t.Fatalf("cpuTime = %v, %v", a, err)
	}
	for end := time.Now().Add(20 * time.Millisecond); time.Now().Before(end); {
	}
	if b, _ := cpuTime(syscall.Getpid()); b <= a {
		t.Errorf("cpuTime %v, then %v after spinning", a, b)
	}
}

func TestParseMemStats(t *testing.T) {
	profile := "heap profile: 1: 2 [3: 4] @ heap/1048576\n\n# runtime.MemStats\n# Alloc = 100\n# HeapInuse = 4096\n# Mallocs = 123456\n# Frees = 1\n"
	if ms, err := parseMemStats(profile); err != nil || ms.mallocs != 123456 || ms.heapInuse != 4096 {
		t.Errorf("parseMemStats = %+v, %v", ms, err)
	}
	if _, err := parseMemStats("heap profile: 1\n# Mallocs = 5\n"); err == nil {
		t.Error("no error without a HeapInuse line")
	}
}

// A raised RLIMIT_NOFILE is what the processes the bench starts get.
func TestRaiseNoFileInherited(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if err := raiseNoFile(lim.Max); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("sh", "-c", "ulimit -n").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != strconv.FormatUint(lim.Max, 10) {
		t.Errorf("a child's ulimit -n is %s, want %d", got, lim.Max)
	}
}

// The fakes form clusters of 3, a leftover fake or two joining the last
// as replicas; fleetWrong passes only such a fleet, every host answered.
func TestFakeClusters(t *testing.T) {
	for n, want := range map[int]string{1: "[[0]]", 3: "[[0 1 2]]", 4: "[[0 1 2 3]]", 6: "[[0 1 2] [3 4 5]]", 8: "[[0 1 2] [3 4 5 6 7]]"} {
		if got := fmt.Sprint(fakeClusters(n)); got != want {
			t.Errorf("fakeClusters(%d) = %s, want %s", n, got, want)
		}
	}
	lag := int64(0)
	hosts := []fleetHost{{Cluster: "main", Role: "primary", Alive: true},
		{Cluster: "fake0000", Role: "primary", Alive: true}, {Cluster: "fake0000", Role: "replica", Alive: true, LagMS: &lag}, {Cluster: "fake0000", Role: "replica", Alive: true, LagMS: &lag}}
	if why := fleetWrong(hosts, 1, 3); why != "" {
		t.Errorf("a good fleet: %s", why)
	}
	for name, h := range map[string]fleetHost{
		"set aside":   {Cluster: "fake0000", Role: "replica", Alive: true, LagMS: &lag, Aside: "foreign"},
		"no lag":      {Cluster: "fake0000", Role: "replica", Alive: true},
		"two primary": {Cluster: "fake0000", Role: "primary", Alive: true},
	} {
		bad := append(slices.Clone(hosts[:3]), h)
		if why := fleetWrong(bad, 1, 3); why == "" {
			t.Errorf("%s: passed", name)
		}
	}
	if why := fleetWrong(hosts, 2, 6); why == "" {
		t.Error("a missing cluster passed")
	}
}

// -pprof profiles 1,000 hosts when the series has it, and otherwise the
// largest size asked: -scale-hosts 10000@1s profiled nothing before.
func TestPprofSize(t *testing.T) {
	for _, c := range []struct {
		hosts string
		want  int
	}{{defaultScaleSizes, 1000}, {"10000@1s", 10000}, {"100,3000", 3000}} {
		sizes, err := parseScaleSizes(c.hosts, 3)
		if err != nil {
			t.Fatal(err)
		}
		if got := pprofSize(sizes); got != c.want {
			t.Errorf("-scale-hosts %s profiles %d hosts, want %d", c.hosts, got, c.want)
		}
	}
}
