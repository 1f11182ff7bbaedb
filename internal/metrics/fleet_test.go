package metrics

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/pgdns/pgdns/probe"
	"github.com/pgdns/pgdns/zone"
	"github.com/pgdns/pgdns/zone/zonetest"
)

// fleet returns metrics over a fleet of hosts in clusters of 3 (a primary
// and two replicas; the last cluster takes what is left over), the shape
// of the scale bench's fleet, with every series the probe makes for a
// host in steady state already made: each host probed (one of them
// failing), its first role seen, each cluster's probes counted by why.
func fleet(tb testing.TB, hosts int) (*Metrics, *zone.Table, []*zone.Cluster) {
	m, table, clusters, _ := fleetHeld(tb, hosts)
	return m, table, clusters
}

// fleetHeld is fleet, with the heap its metrics hold (the snapshot's
// not counted).
func fleetHeld(tb testing.TB, hosts int) (*Metrics, *zone.Table, []*zone.Cluster, uint64) {
	tb.Helper()
	now := time.Now()
	var clusters []*zone.Cluster
	var names []string
	for i := 0; i < hosts; i += 3 {
		n := min(3, hosts-i)
		if hosts-i == 4 {
			n = 4
		}
		name := fmt.Sprintf("c%05d", len(clusters))
		var hs []zone.Host
		for j := range n {
			k := i + j
			h := zonetest.Host(fmt.Sprintf("10.%d.%d.%d", k>>16&255, k>>8&255, k&255), j > 0, 0x3000060, now)
			if j > 0 {
				h.Lag, h.LagBytes = 3*time.Millisecond, 4096
			} else {
				h.LagKnown, h.BytesKnown = true, true // as TestMetrics's primary: its replicas' byte lag vouched for
			}
			hs = append(hs, h)
		}
		clusters = append(clusters, zonetest.Cluster(name, hs...))
		names = append(names, name)
		if n == 4 {
			break
		}
	}
	table := zone.NewTable()
	table.Store(zonetest.Ready(now, time.Minute, clusters...))
	before := heapInUse()
	m := New(table)
	m.SetClusters(names)
	for _, cl := range clusters {
		for i, h := range cl.Hosts {
			m.ProbeDone(cl.Name, h.Addr, time.Millisecond, nil)
			to := zone.RoleReplica
			if i == 0 {
				to = zone.RolePrimary
			}
			m.RoleChanged(cl.Name, h.Addr, zone.RoleUnknown, to)
		}
		for _, why := range []probe.ProbeCause{probe.ProbeTick, probe.ProbeRound, probe.ProbeClosing} {
			m.Probes(cl.Name, why, 1)
		}
	}
	return m, table, clusters, heapInUse() - before
}

// heapInUse is the heap in use after a collection.
func heapInUse() uint64 {
	var s runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&s)
	return s.HeapInuse
}

// cpuTime is the CPU time the process has used (user and system): on a
// loaded machine a scrape's CPU time says more than its wall time.
func cpuTime(tb testing.TB) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// pageCounter is a ResponseWriter that counts the page's bytes and
// lines, and keeps nothing.
type pageCounter struct {
	header       http.Header
	bytes, lines int
}

func (w *pageCounter) Header() http.Header { return w.header }
func (w *pageCounter) WriteHeader(int)     {}
func (w *pageCounter) Write(p []byte) (int, error) {
	w.bytes += len(p)
	w.lines += bytes.Count(p, []byte{'\n'})
	return len(p), nil
}

// BenchmarkScrape: serving /metrics over 1,000 and 10,000 hosts in
// clusters of 3 (the time per op is one page written, uncompressed), with
// the page's size (page-MiB, gzipped-MiB as Prometheus gets it), its
// lines and the heap the fleet's metrics hold (metrics-heap-MiB, the
// snapshot's not counted).
func BenchmarkScrape(b *testing.B) {
	for _, hosts := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("hosts=%d", hosts), func(b *testing.B) {
			m, _, _, held := fleetHeld(b, hosts)
			h := m.Handler()
			req := httptest.NewRequest("GET", "/metrics", nil)
			var page *pageCounter
			b.ReportAllocs()
			cpu := cpuTime(b)
			for b.Loop() {
				page = &pageCounter{header: http.Header{}}
				h.ServeHTTP(page, req)
			}
			b.ReportMetric(float64(cpuTime(b)-cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
			gz := &pageCounter{header: http.Header{}}
			gzReq := httptest.NewRequest("GET", "/metrics", nil)
			gzReq.Header.Set("Accept-Encoding", "gzip")
			h.ServeHTTP(gz, gzReq)
			b.ReportMetric(float64(gz.bytes)/(1<<20), "gzipped-MiB")
			b.ReportMetric(float64(page.bytes)/(1<<20), "page-MiB")
			b.ReportMetric(float64(page.lines), "lines")
			b.ReportMetric(float64(held)/(1<<20), "metrics-heap-MiB")
			runtime.KeepAlive(m)
		})
	}
}

// BenchmarkScrapeGzip: the page of 10,000 hosts as Prometheus asks for
// it, gzipped.
func BenchmarkScrapeGzip(b *testing.B) {
	m, _, _ := fleet(b, 10000)
	h := m.Handler()
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	b.ReportAllocs()
	cpu := cpuTime(b)
	for b.Loop() {
		h.ServeHTTP(&pageCounter{header: http.Header{}}, req)
	}
	b.ReportMetric(float64(cpuTime(b)-cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}

// BenchmarkProbeDoneFleet: recording one good probe of one of 10,000
// hosts, as every probe does.
func BenchmarkProbeDoneFleet(b *testing.B) {
	m, _, clusters := fleet(b, 10000)
	type hc struct{ c, h string }
	var all []hc
	for _, cl := range clusters {
		for _, h := range cl.Hosts {
			all = append(all, hc{cl.Name, h.Addr})
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		x := all[i%len(all)]
		m.ProbeDone(x.c, x.h, time.Millisecond, nil)
		i++
	}
}
