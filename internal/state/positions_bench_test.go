package state

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/pgdns/pgdns/probe"
	"github.com/pgdns/pgdns/zone"
)

// What writing a running writer's positions costs (docs/state.md): pgdns
// offers them at most once a second (or a probe interval), and each offer
// that reaches the file is a write of all of it. A fleet of clusters of 3
// with a history, each primary writing: every cluster's positions move
// between two offers. offer is what the prober's aggregator pays; encode
// the writer's goroutine turning an offer into the file's bytes (and
// comparing them with the file's); flush all of a write: encoded, the
// file replaced and synced, its folder synced. cpu-ns/op is the process's
// CPU time (user and system, GC included) per operation, which a loaded
// machine inflates less than the wall clock.
func BenchmarkPositionsWrite(b *testing.B) {
	for _, n := range []int{1, 100, 3334} {
		fleet := func(pos zone.LSN) map[string]probe.Remembered {
			m := make(map[string]probe.Remembered, n)
			for i := range n {
				m[fmt.Sprintf("c%04d", i)] = probe.Remembered{Identity: uint64(7_000_000_000_000_000_000 + i), NewestTimeline: 3,
					Timelines: map[uint32]probe.TimelineHistory{3: {FromFile: true, Ends: []zone.TimelineEnd{{Timeline: 1, End: 0x3000060}, {Timeline: 2, End: 0x5000060}}}},
					Serial:    1796139375,
					Branches: map[uint32]probe.Branch{
						2: {Writer: fmt.Sprintf("10.%d.%d.2:5432", i/250, i%250), Run: time.Unix(1_796_000_000, 0), At: 0x3000108, Last: 0x5000060, Insert: 0x5000060},
						3: {Writer: fmt.Sprintf("10.%d.%d.1:5432", i/250, i%250), Run: time.Unix(1_796_100_000, 123456000), At: 0x5000108, Last: pos, Insert: pos + 0x88},
					}}
			}
			return m
		}
		ms := []map[string]probe.Remembered{fleet(0x6000100), fleet(0x6000200)}
		for _, op := range []string{"offer", "encode", "flush"} {
			b.Run(fmt.Sprintf("clusters=%d/%s", n, op), func(b *testing.B) {
				w := NewWriter(filepath.Join(b.TempDir(), "state.json"), fleet(0x6000000), slog.New(slog.DiscardHandler), nil)
				cpu0 := cpuTime()
				for i := 0; b.Loop(); i++ {
					w.Offer(ms[i%2])
					switch op {
					case "encode":
						w.encodeOffered()
					case "flush":
						if err := w.Flush(); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
				if op == "flush" {
					b.ReportMetric(float64(len(Encode(ms[0]))), "file-bytes")
				}
			})
		}
	}
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
