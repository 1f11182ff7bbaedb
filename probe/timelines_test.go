package probe

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/pgdns/pgdns/zone"
)

// newAggregator returns a prober whose aggregator functions (record,
// publish) the test drives by hand, one host "h:1" in cluster "main".
func newAggregator(t *testing.T) (*Prober, *zone.Table) {
	t.Helper()
	table := zone.NewTable()
	cfg := Config{Interval: 100 * time.Millisecond, Timeout: time.Second, MaxFails: 3,
		Clusters: []ClusterConfig{{Name: "main", Hosts: []string{"h:1"}}}}
	return New(cfg, table, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), "main"), table
}

var run1 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func replicaSample(tl, ckpt uint32, replay zone.LSN) Sample {
	return Sample{Start: time.Now(), End: time.Now(), InRecovery: true, Timeline: tl, CheckpointTimeline: ckpt,
		ReplayLSN: replay, SystemID: 7, StartedAt: run1}
}

func feed(p *Prober, s Sample, err error) *zone.Host {
	p.record(result{cluster: 0, host: 0, started: time.Now(), sample: s, err: err})
	p.publish()
	return &p.last.Clusters[0].Hosts[0]
}

// Item 4(a): a replica without a WAL receiver was put on its last
// restartpoint's timeline, which lags a switch by up to a checkpoint
// interval, and passed a -t1 token while replaying timeline 2. Its
// timeline is now only a lower bound, which vouches for no token.
func TestNoWALReceiverMeansNoExactTimeline(t *testing.T) {
	p, _ := newAggregator(t)
	h := feed(p, replicaSample(0, 1, 0x9000), nil)
	if h.TimelineExact || h.Timeline != 1 {
		t.Fatalf("no receiver: timeline %d exact %v, want lower bound 1", h.Timeline, h.TimelineExact)
	}
	h = feed(p, replicaSample(2, 1, 0x9100), nil)
	if !h.TimelineExact || h.Timeline != 2 {
		t.Fatalf("with a receiver: timeline %d exact %v", h.Timeline, h.TimelineExact)
	}
	// The receiver goes away again: the lower bound keeps what this run
	// of the server already replayed.
	h = feed(p, replicaSample(0, 1, 0x9200), nil)
	if h.TimelineExact || h.Timeline != 2 {
		t.Fatalf("receiver gone: timeline %d exact %v, want lower bound 2", h.Timeline, h.TimelineExact)
	}
}

// Item 4(b): a watched switch is evidence only from a host seen in
// recovery on an exact timeline, in the same server run, with no failed
// probe between; an old primary re-cloned onto the new timeline proves
// nothing, and of two lower bounds the smaller is kept.
func TestWatchedTimelineSwitches(t *testing.T) {
	p, _ := newAggregator(t)
	w := Sample{Start: time.Now(), End: time.Now(), InsertLSN: 0x9000, ReplayLSN: 0x9000, Timeline: 1, CheckpointTimeline: 1, SystemID: 7, StartedAt: run1}
	feed(p, w, nil)                                   // the old primary, writable on timeline 1 past the fork
	feed(p, Sample{}, errors.New("connect: refused")) // stopped, re-cloned
	recloned := replicaSample(2, 2, 0xA000)
	recloned.StartedAt = run1.Add(time.Hour)
	if h := feed(p, recloned, nil); len(h.History) != 0 {
		t.Fatalf("a re-cloned old primary taught timeline 2's history: %v", h.History)
	}

	p, _ = newAggregator(t)
	feed(p, replicaSample(1, 1, 0x5000), nil)
	feed(p, replicaSample(0, 1, 0x5100), nil) // its receiver reconnects to the new primary
	h := feed(p, replicaSample(2, 1, 0x5200), nil)
	if want := []zone.TimelineEnd{{Timeline: 1, End: 0x5000}}; len(h.History) != 1 || h.History[0] != want[0] {
		t.Fatalf("watched switch: history %v, want %v", h.History, want)
	}
	if got := mergeLowerBounds([]zone.TimelineEnd{{Timeline: 1, End: 0x5000}}, []zone.TimelineEnd{{Timeline: 1, End: 0x4000}}); got[0].End != 0x4000 {
		t.Fatalf("merge kept %v, want the smaller bound", got)
	}
	// A history file is the truth.
	withFile := replicaSample(2, 2, 0x5300)
	withFile.History = []zone.TimelineEnd{{Timeline: 1, End: 0x5080}}
	if h := feed(p, withFile, nil); h.History[0].End != 0x5080 {
		t.Fatalf("history file not preferred: %v", h.History)
	}
}
