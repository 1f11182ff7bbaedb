package state

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/pgdns/pgdns/probe"
	"github.com/pgdns/pgdns/zone"
)

// RetryEvery is how often a failed write is tried again while pgdns has
// something the file lacks.
const RetryEvery = 5 * time.Second

// Writer keeps the state file in step with what the probe learns: Offer
// hands it the newest knowledge without blocking (and without encoding it:
// that is Run's work, off the caller's goroutine), and Run writes it in
// the background. Knowledge changes rarely (a failover, a new cluster), so
// each change is written; a running writer's WAL positions are offered at
// most once a second (probe.Prober.positionsEvery); offers that arrive
// during a write are folded into one, and a write that took d is followed
// by the next no sooner than paceFactor×d (a fleet's file is megabytes:
// the writer's share of a core stays bounded). A write that fails leaves
// pgdns answering from memory: the failure is logged once, counted
// (OnResult) and shown in Status, and the write is tried again every
// RetryEvery until it succeeds.
type Writer struct {
	path     string
	log      *slog.Logger
	onResult func(err error) // after every write attempt, for metrics

	wake chan struct{}
	mu   sync.Mutex
	// offered is the newest knowledge offered and not encoded yet (nil:
	// none since the last encoding).
	offered map[string]probe.Remembered
	// paceUntil is when the next write may start (paceFactor); Run's.
	paceUntil time.Time
	next      []byte // encoded knowledge not yet in the file; nil: the file is current
	last      []byte // the newest knowledge, encoded: what the stop-time write writes
	disk      []byte // what the file holds, as far as this pgdns knows
	// nextM and diskM are next and disk decoded (nil: none), so that a
	// pending write that differs from the file only by serials the clock
	// has caught up with is dropped (needed).
	nextM, diskM map[string]probe.Remembered
	fail         Status
}

// Status is how the last write went.
type Status struct {
	OK       bool      // the file holds everything pgdns has learned
	Failures uint64    // failed writes since the start
	Err      string    // the last failure, while not OK
	Since    time.Time // when the file stopped being current, while not OK
}

// NewWriter returns a Writer for path. loaded is the file's contents as
// read at start-up (nil when there was none), so that handing back the
// same knowledge writes nothing. onResult, if not nil, is called after
// every attempt.
func NewWriter(path string, loaded map[string]probe.Remembered, log *slog.Logger, onResult func(err error)) *Writer {
	w := &Writer{path: path, log: log, onResult: onResult, wake: make(chan struct{}, 1), fail: Status{OK: true}}
	w.last = Encode(loaded)
	if loaded != nil {
		w.disk, w.diskM = w.last, loaded
	}
	return w
}

// needed reports whether m (encoded as data) holds anything the file
// lacks that a restart needs. A cluster's serial alone is needed only while
// it is ahead of the clock (docs/state.md): a restart starts at
// max(clock, remembered+1), so a serial the clock has reached is not
// lowered by one that reads the older serial from the file. Without this,
// every restart (whose first serial is never the file's) wrote the file,
// and on a read-only state folder /readyz warned for ever with nothing to
// save. Called with w.mu held.
func (w *Writer) needed(m map[string]probe.Remembered, data []byte, now time.Time) bool {
	if bytes.Equal(data, w.disk) {
		return false
	}
	if w.diskM == nil {
		return true
	}
	clock := uint32(now.Unix())
	same, caught := make(map[string]probe.Remembered, len(m)), false
	for name, r := range m {
		if d, ok := w.diskM[name]; ok && r.Serial != d.Serial && !zone.SerialLess(clock, r.Serial) {
			r.Serial, caught = d.Serial, true
		}
		same[name] = r
	}
	// No serial the clock caught up with: data differs from the file by
	// more (a second encoding, at a fleet's file, costs as much as the
	// first).
	return !caught || !bytes.Equal(Encode(same), w.disk)
}

// Path is the file written.
func (w *Writer) Path() string { return w.path }

// Offer hands the writer what the probe now remembers (probe.Hooks.Learned).
// It never blocks, and leaves the encoding to the writer's goroutine: at a
// fleet of thousands of clusters an encoding takes tens of milliseconds,
// which the prober's aggregator would otherwise spend at every offer.
func (w *Writer) Offer(m map[string]probe.Remembered) {
	w.mu.Lock()
	w.offered = m
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// encodeOffered encodes the newest offer, if any, into last and, when the
// file lacks something in it, next.
func (w *Writer) encodeOffered() {
	w.mu.Lock()
	m := w.offered
	w.offered = nil
	w.mu.Unlock()
	if m == nil {
		return
	}
	data := Encode(m)
	w.mu.Lock()
	w.last = data
	if w.needed(m, data, time.Now()) {
		w.next, w.nextM = data, m
	} else {
		w.next, w.nextM = nil, nil
	}
	w.mu.Unlock()
}

// paceFactor is how many times the last write's duration (encoding it,
// writing and syncing the file and its folder) pass before the next write
// starts: the writer spends at most about 1/paceFactor of a core. A file
// of a few clusters takes milliseconds (the sync), so this delays nothing
// that matters; a fleet's file of megabytes is written every few seconds
// at most while its primaries write.
const paceFactor = 10

// Status reports how the last write went.
func (w *Writer) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fail
}

// Run writes what is offered until ctx ends, then writes the newest
// knowledge once more, pending or not: a stopping pgdns leaves it behind
// even if the file was changed behind its back (by hand, or by a process
// that ignored the lock).
func (w *Writer) Run(ctx context.Context) {
	retry := time.NewTicker(RetryEvery)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			w.encodeOffered()
			w.mu.Lock()
			if w.next == nil {
				w.next, w.nextM = w.last, nil
			}
			w.mu.Unlock()
			w.Flush()
			return
		case <-w.wake:
			if !w.pace(ctx) {
				continue // stopping: the case above writes
			}
		case <-retry.C:
			w.dropUnneeded()
		}
		start := time.Now()
		w.Flush()
		w.paceUntil = start.Add(paceFactor * time.Since(start))
	}
}

// pace waits until the next write may start (paceFactor), and reports
// false when ctx ends first.
func (w *Writer) pace(ctx context.Context) bool {
	d := time.Until(w.paceUntil)
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// dropUnneeded forgets a pending write that holds nothing a restart needs
// any more (a serial the clock has caught up with), and says the file is
// current again if a failed write left it marked otherwise: a read-only
// folder then stops warning once nothing is lost by not writing.
func (w *Writer) dropUnneeded() {
	w.encodeOffered()
	w.mu.Lock()
	if w.next != nil && w.nextM != nil && !w.needed(w.nextM, w.next, time.Now()) {
		w.next, w.nextM = nil, nil
	}
	recovered := w.next == nil && !w.fail.OK
	if recovered {
		w.fail.OK, w.fail.Err, w.fail.Since = true, "", time.Time{}
	}
	w.mu.Unlock()
	if recovered {
		w.log.Info("state file current again: what it lacked needs no write any more (a serial the clock has caught up with)", "file", w.path)
		if w.onResult != nil {
			w.onResult(nil)
		}
	}
}

// Flush writes what is pending, if anything, and returns the write's error.
func (w *Writer) Flush() error {
	w.encodeOffered()
	w.mu.Lock()
	data, dataM := w.next, w.nextM
	w.mu.Unlock()
	if data == nil {
		return nil
	}
	err := WriteFile(w.path, data)
	w.mu.Lock()
	if err == nil {
		w.disk, w.diskM = data, dataM
		if bytes.Equal(w.next, data) {
			w.next, w.nextM = nil, nil
		}
	}
	was := w.fail
	if err != nil {
		w.fail.Failures++
		if w.fail.OK {
			w.fail.Since = time.Now()
		}
		w.fail.OK, w.fail.Err = false, err.Error()
	} else {
		w.fail.OK, w.fail.Err, w.fail.Since = true, "", time.Time{}
	}
	w.mu.Unlock()
	switch {
	case err != nil && (was.OK || was.Err != err.Error()):
		w.log.Error("state file not written; pgdns keeps answering from what it knows in memory, and retries",
			"file", w.path, "error", err, "retry", RetryEvery.String())
	case err == nil && !was.OK:
		w.log.Info("state file written again", "file", w.path, "failed_writes", was.Failures)
	}
	if w.onResult != nil {
		w.onResult(err)
	}
	return err
}
