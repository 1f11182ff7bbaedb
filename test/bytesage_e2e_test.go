package test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/pgdns/pgdns/zone"
)

// A byte lag bound is proven as of the primary's read that closes the
// replica's round (after the replica's sample ends), and no rate bounds
// what the primary writes after it: so the bound may be used for 1.5 probe
// intervals after the sample, no longer (review 5 F2b: through a 400 ms
// path, bytes-2mb answered a paused replica 2.69 MB behind). With replay
// paused on a replica reached through a proxy holding each query 800 ms,
// and the primary writing fast, bytes-64kb must never answer the replica
// at a moment when, 1.5 intervals (and a little) earlier, the primary was
// already more than 64 KiB past the replica's frozen replay position. The
// rule is a proof from the primary's positions and the clock, not a
// timing: it holds at any load.
func TestByteBoundAgesOutWithItsSample(t *testing.T) {
	t.Parallel()
	const (
		delay    = 800 * time.Millisecond
		interval = 100 * time.Millisecond
		maxBytes = 64 << 10
		slack    = 20 * time.Millisecond // the judge's own sampling of the primary's position
	)
	sr := startSlowReplica(t, delay, interval)
	e, primary, replica, proxied := sr.e, sr.primary, sr.replica, sr.proxied
	e.waitFor(t, "bytes-64kb.replica.db.local.", []string{proxied})
	writer := primary.Conn(t)
	if _, err := writer.Exec(context.Background(), "CREATE TABLE w (v text); ALTER TABLE w ALTER v SET STORAGE EXTERNAL"); err != nil {
		t.Fatal(err)
	}
	// The primary's insert position over time, read by the judge itself.
	type position struct {
		at  time.Time
		lsn zone.LSN
	}
	var (
		mu        sync.Mutex
		positions []position
	)
	reader := primary.Conn(t)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for began := time.Now(); time.Since(began) < 15*time.Second && ctx.Err() == nil; {
			// About 8 KB of WAL a row (EXTERNAL: stored uncompressed), four
			// rows a statement: the check below needs more than 256 KiB in
			// the second after replay stops, which one row a round trip
			// did not reach at load 30 (the writer's loop then took over
			// 30 ms).
			if _, err := writer.Exec(ctx, "INSERT INTO w SELECT repeat(md5(random()::text), 250) FROM generate_series(1, 4)"); err != nil {
				return
			}
			var s string
			if err := reader.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&s); err != nil {
				return
			}
			lsn, err := zone.ParseLSN(s)
			if err != nil {
				return
			}
			mu.Lock()
			positions = append(positions, position{time.Now(), lsn})
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { stop(); <-done })
	// positionBefore is a lower bound of the primary's position at at: the
	// last one read at or before it (positions only grow).
	positionBefore := func(at time.Time) (zone.LSN, bool) {
		mu.Lock()
		defer mu.Unlock()
		var best zone.LSN
		ok := false
		for _, p := range positions {
			if !p.at.After(at) {
				best, ok = p.lsn, true
			}
		}
		return best, ok
	}
	paused := sr.pauseReplay(t)
	var replayText string
	replica.Query(t, "SELECT pg_last_wal_replay_lsn()::text", &replayText)
	replay, err := zone.ParseLSN(replayText)
	if err != nil {
		t.Fatal(err)
	}

	lookups := sr.lookups(t, "bytes-64kb.replica.db.local.", paused)
	wrong, last := 0, time.Duration(0)
	for _, l := range lookups {
		if !l.answered {
			continue
		}
		last = l.sent.Sub(paused)
		at := l.sent.Add(-interval - interval/2 - slack)
		if p, ok := positionBefore(at); ok && p > replay && uint64(p-replay) > maxBytes {
			wrong++
			if wrong == 1 {
				t.Errorf("bytes-64kb.replica answered the paused replica %v after replay stopped, while %v before the lookup the primary was already %d bytes past its replay %s (evidence %q)",
					last.Round(time.Millisecond), l.sent.Sub(at).Round(time.Millisecond), uint64(p-replay), replay, e.txt(t, "any.db.local."))
			}
		}
	}
	if wrong > 0 {
		t.Errorf("%d of %d lookups answered the replica beyond 64 KiB + 1.5 probe intervals of missing WAL", wrong, len(lookups))
	}
	if p, ok := positionBefore(paused.Add(time.Second)); !ok || p <= replay || uint64(p-replay) <= 4*maxBytes {
		t.Fatalf("the primary wrote too little in the second after replay stopped (at %v, replay %s): nothing was tested", p, replay)
	}
	t.Logf("%d lookups; the paused replica was last answered by bytes-64kb %v after replay stopped", len(lookups), last.Round(time.Millisecond))
}
