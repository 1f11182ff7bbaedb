package state

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/pgdns/pgdns/probe"
)

// RetryEvery is how often a failed write is tried again while pgdns has
// something the file lacks.
const RetryEvery = 5 * time.Second

// Writer keeps the state file in step with what the probe learns: Offer
// hands it the newest knowledge without blocking, and Run writes it in
// the background. Knowledge changes rarely (a failover, a new cluster), so
// each change is written; offers that arrive during a write are folded
// into one. A write that fails leaves pgdns answering from memory: the
// failure is logged once, counted (OnResult) and shown in Status, and the
// write is tried again every RetryEvery until it succeeds.
type Writer struct {
	path     string
	log      *slog.Logger
	onResult func(err error) // after every write attempt, for metrics

	wake chan struct{}
	mu   sync.Mutex
	next []byte // encoded knowledge not yet in the file; nil: the file is current
	last []byte // the newest knowledge, encoded: what the stop-time write writes
	disk []byte // what the file holds, as far as this pgdns knows
	fail Status
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
		w.disk = w.last
	}
	return w
}

// Path is the file written.
func (w *Writer) Path() string { return w.path }

// Offer hands the writer what the probe now remembers (probe.Hooks.Learned).
// It never blocks.
func (w *Writer) Offer(m map[string]probe.Remembered) {
	data := Encode(m)
	w.mu.Lock()
	w.last = data
	if bytes.Equal(data, w.disk) {
		w.next = nil
	} else {
		w.next = data
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

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
			w.mu.Lock()
			if w.next == nil {
				w.next = w.last
			}
			w.mu.Unlock()
			w.Flush()
			return
		case <-w.wake:
		case <-retry.C:
		}
		w.Flush()
	}
}

// Flush writes what is pending, if anything, and returns the write's error.
func (w *Writer) Flush() error {
	w.mu.Lock()
	data := w.next
	w.mu.Unlock()
	if data == nil {
		return nil
	}
	err := WriteFile(w.path, data)
	w.mu.Lock()
	if err == nil {
		w.disk = data
		if bytes.Equal(w.next, data) {
			w.next = nil
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
