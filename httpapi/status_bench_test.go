package httpapi

import (
	"fmt"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/events"
	"github.com/pgdns/pgdns/zone"
	"github.com/pgdns/pgdns/zone/zonetest"
)

// The status page at size, for BENCHMARKS.md ("Status page"): figures, not
// assertions.
//
//	go test -run '^$' -bench 'StatusPage$' -benchmem -benchtime 100x ./httpapi
//	go test -run '^$' -bench 'StatusPageHour|LagHistoryMemory' -benchtime 1x ./httpapi

// benchFleet is clusters clusters of hosts hosts each (a primary, then
// replicas with lags of their own), all probed at now.
func benchFleet(now time.Time, clusters, hosts int) *zone.Snapshot {
	var cs []*zone.Cluster
	for c := range clusters {
		var hs []zone.Host
		for h := range hosts {
			ip := fmt.Sprintf("10.%d.%d.%d", c/250, c%250, h%250+1)
			host := zonetest.Host(ip, h > 0, 0x3000060, now)
			host.Addr = fmt.Sprintf("db-%d-%d.example.internal:5432", c, h)
			host.Cluster = fmt.Sprintf("c%d", c)
			host.Location = [...]string{"east", "west"}[h%2]
			if h > 0 {
				host.Lag = time.Duration(h%40) * time.Millisecond
				host.LagBytes = uint64(h%40) * 4096
			}
			hs = append(hs, host)
		}
		cs = append(cs, zonetest.Cluster(fmt.Sprintf("c%d", c), hs...))
	}
	return zonetest.Ready(now, 2*time.Second, cs...)
}

// benchAPI is an API over snap with a full lag history (LagSamples
// samples of every host) and a full events log.
func benchAPI(b *testing.B, clusters, hosts int) (*API, *zone.Table) {
	b.Helper()
	a, table := newTestAPI(benchFleet(t0, clusters, hosts))
	a.cfg.Lags = NewLagHistory()
	for i := range LagSamples {
		now := t0.Add(time.Duration(i-LagSamples+1) * LagStep)
		a.cfg.Lags.Record(zone.View{Snap: benchFleet(now, clusters, hosts), Now: now})
	}
	a.cfg.Events = events.New(0)
	for i := range events.Capacity {
		a.cfg.Events.Append(events.Event{Cluster: "c0", Host: "db-0-1.example.internal:5432", Reason: "host_down", Class: "not_serving",
			Detail: fmt.Sprintf("connect: connection refused (%d)", i)})
	}
	return a, table
}

// BenchmarkStatusPage serves the page of 200 hosts in one cluster and of
// 100 clusters of 3 hosts, gzipped as to a browser: time per refresh
// (ns/op: render and compress), its size as sent (gzip-bytes/page) and
// plain (bytes/page), and what one refresh allocates.
func BenchmarkStatusPage(b *testing.B) {
	for _, size := range []struct{ clusters, hosts int }{{1, 200}, {100, 3}} {
		b.Run(fmt.Sprintf("clusters=%d/hosts=%d", size.clusters, size.hosts), func(b *testing.B) {
			a, _ := benchAPI(b, size.clusters, size.hosts)
			var n int
			b.ReportAllocs()
			for b.Loop() {
				// As a browser asks: gzip accepted.
				w := httptest.NewRecorder()
				r := httptest.NewRequest("GET", "/", nil)
				r.Header.Set("Accept-Encoding", "gzip, deflate, br")
				a.ServeHTTP(w, r)
				if w.Code != 200 || w.Header().Get("Content-Encoding") != "gzip" {
					b.Fatalf("status %d, %q", w.Code, w.Header().Get("Content-Encoding"))
				}
				n = w.Body.Len()
			}
			b.ReportMetric(float64(n), "gzip-bytes/page")
			w := httptest.NewRecorder()
			a.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
			b.ReportMetric(float64(w.Body.Len()), "bytes/page")
		})
	}
}

// BenchmarkStatusPageHour is an hour of one browser keeping the page of
// 200 hosts open: 1,800 refreshes, each after a new snapshot and a lag
// sample, as pgdns takes one every 2 s. It reports the live heap before
// and after (after a GC each), and what the lag history holds.
func BenchmarkStatusPageHour(b *testing.B) {
	const hosts, refreshes = 200, 3600 / 2
	for b.Loop() {
		a, table := benchAPI(b, 1, hosts)
		heap := func() uint64 {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			return m.HeapAlloc
		}
		before := heap()
		start := t0
		for i := range refreshes {
			now := start.Add(time.Duration(i+1) * LagStep)
			table.Store(benchFleet(now, 1, hosts))
			a.now = func() time.Time { return now }
			a.cfg.Lags.Record(a.view())
			w := httptest.NewRecorder()
			r := httptest.NewRequest("GET", "/", nil)
			r.Header.Set("Accept-Encoding", "gzip")
			a.ServeHTTP(w, r)
			if w.Code != 200 {
				b.Fatalf("refresh %d: status %d", i, w.Code)
			}
		}
		after := heap()
		b.ReportMetric(float64(before)/(1<<20), "MiB-heap-at-start")
		b.ReportMetric(float64(after)/(1<<20), "MiB-heap-after-an-hour")
		b.ReportMetric((float64(after)-float64(before))/(1<<10), "KiB-growth")
	}
}

// BenchmarkLagHistoryMemory is what the lag history holds once full, for
// 200 hosts and for LagHosts (its cap), measured as live heap.
func BenchmarkLagHistoryMemory(b *testing.B) {
	for _, hosts := range []int{200, LagHosts} {
		b.Run(fmt.Sprintf("hosts=%d", hosts), func(b *testing.B) {
			snap := benchFleet(t0, 1, hosts)
			for b.Loop() {
				heap := func() uint64 {
					runtime.GC()
					var m runtime.MemStats
					runtime.ReadMemStats(&m)
					return m.HeapAlloc
				}
				before := heap()
				l := NewLagHistory()
				for i := range LagSamples {
					l.Record(zone.View{Snap: snap, Now: t0.Add(time.Duration(i) * LagStep)})
				}
				after := heap()
				runtime.KeepAlive(l)
				b.ReportMetric((float64(after)-float64(before))/(1<<10), "KiB-held")
			}
		})
	}
}
