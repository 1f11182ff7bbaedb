package zone

import (
	"fmt"
	"testing"
	"time"
)

func BenchmarkParse(b *testing.B) {
	for _, name := range []string{"primary.db.local.", "lag-50ms.replica.db.local.", "lsn-0-3000060.bytes-1mb.replica.orders.db.local."} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse(name, origin); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func benchSnapshot(replicas int) *Snapshot {
	hosts := []Host{seen("10.0.0.1", false, 0x5000)}
	for i := range replicas {
		h := seen(fmt.Sprintf("10.0.%d.%d", (i+2)/250, (i+2)%250+1), true, 0x5000)
		h.Lag = time.Duration(i) * time.Millisecond
		hosts = append(hosts, h)
	}
	return cluster(hosts...)
}

func BenchmarkSelect(b *testing.B) {
	for _, n := range []int{2, 100, 999} {
		s := benchSnapshot(n)
		q, _ := Parse("lag-50ms.replica.db.local.", origin)
		buf := make([]*Host, 0, n+1)
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			turn := uint64(0)
			for b.Loop() {
				turn++
				buf, _ = View{Snap: s, Now: t0, Turn: turn}.Select(&q, buf[:0])
			}
		})
	}
}

// BenchmarkSelectLocalFirst is BenchmarkSelect for a client in a location
// that holds every other replica, against one in no location.
func BenchmarkSelectLocalFirst(b *testing.B) {
	for _, n := range []int{2, 100, 999} {
		s := benchSnapshot(n)
		for i := range s.Clusters[0].Hosts {
			s.Clusters[0].Hosts[i].Location = [2]string{"east", "west"}[i%2]
		}
		buf := make([]*Host, 0, n+1)
		for _, from := range []string{"", "west"} {
			q, _ := Parse("lag-50ms.replica.db.local.", origin)
			q.From = from
			b.Run(fmt.Sprintf("replicas=%d/from=%q", n, from), func(b *testing.B) {
				b.ReportAllocs()
				turn := uint64(0)
				for b.Loop() {
					turn++
					buf, _ = View{Snap: s, Now: t0, Turn: turn}.Select(&q, buf[:0])
				}
			})
		}
	}
}
