package events

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Capacity is how many events a Log made by New holds: the oldest is
// dropped when a newer one arrives past it. 1,000 events of a few hundred
// bytes each: well under a megabyte.
const Capacity = 1000

// DefaultMaxWaiters is the most Wait calls a Log made with maxWaiters 0
// lets block at once.
const DefaultMaxWaiters = 64

// Event is one change pgdns noticed. Index and Time are given by the Log.
type Event struct {
	// Index grows by one with each event. A pgdns process numbers its
	// first event one past the time it started, in microseconds since
	// 1970, so the indexes of a later process are above every index of
	// an earlier one (as long as no process logs a million events a
	// second): an index from before a restart reads as "everything this
	// run holds".
	Index uint64    `json:"index"`
	Time  time.Time `json:"time"`
	// Cluster and Host are the cluster and host ("host:port" as
	// configured) it is about; either is "" when it is about neither
	// (a reload, say).
	Cluster string `json:"cluster,omitempty"`
	Host    string `json:"host,omitempty"`
	// Reason says what happened, one of the words listed in zone.Reason
	// (host_down, primary_moved, reload_applied...).
	Reason string `json:"reason"`
	// Class, on host_down, is the class of the failure that took the
	// host out (not_serving, timeout, auth, server_error, ... or stale:
	// no successful probe for too long).
	Class string `json:"class,omitempty"`
	// From and To are what changed, when it has a value: the previous
	// and new primary's address, the superseded and new timeline, the
	// system identifier settled.
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	// Detail says it for people: the host's note, the error, the reload's
	// outcome.
	Detail string `json:"detail,omitempty"`
}

// ErrTooManyWaiters is returned by Wait when maxWaiters calls are already
// blocked: the caller should answer at once (HTTP 503) rather than queue.
var ErrTooManyWaiters = errors.New("too many requests are waiting for events")

// ErrClosed is returned by Wait once the Log is closed (pgdns is shutting
// down): waiting would hold the shutdown up.
var ErrClosed = errors.New("pgdns is shutting down")

// Log is a ring of the last events and the requests waiting for newer
// ones. Its methods are safe for concurrent use; Append never blocks on a
// waiter.
type Log struct {
	now        func() time.Time
	maxWaiters int

	mu      sync.Mutex
	ring    []Event // len ≤ cap; ring[(head+i)%cap] is the i-th oldest
	head    int
	base    uint64        // the index before the first event of this Log
	newest  uint64        // the index of the last event appended, base before any
	wake    chan struct{} // closed, and replaced, by each Append
	closed  chan struct{} // closed by Close
	waiters int
}

// New returns an empty Log holding the last Capacity events and letting
// at most maxWaiters Wait calls block at once (0: DefaultMaxWaiters). Its
// first event's index is one past the current time in microseconds (Event.Index).
func New(maxWaiters int) *Log {
	return newLog(Capacity, maxWaiters, time.Now, uint64(time.Now().UnixMicro()))
}

// NewFrom is New with the first event's index base+1: for tests that
// number events from 1 (base 0).
func NewFrom(maxWaiters int, base uint64) *Log {
	return newLog(Capacity, maxWaiters, time.Now, base)
}

func newLog(capacity, maxWaiters int, now func() time.Time, base uint64) *Log {
	if maxWaiters <= 0 {
		maxWaiters = DefaultMaxWaiters
	}
	return &Log{now: now, maxWaiters: maxWaiters, ring: make([]Event, 0, capacity), base: base, newest: base,
		wake: make(chan struct{}), closed: make(chan struct{})}
}

// Append records evs in order, giving each the next index and, when its
// Time is zero, the current time, and wakes every waiter. It returns the
// newest index.
func (l *Log) Append(evs ...Event) uint64 {
	if len(evs) == 0 {
		return l.Newest()
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range evs {
		l.newest++
		e.Index = l.newest
		if e.Time.IsZero() {
			e.Time = now
		}
		if len(l.ring) < cap(l.ring) {
			l.ring = append(l.ring, e)
		} else {
			l.ring[l.head] = e
			l.head = (l.head + 1) % len(l.ring)
		}
	}
	close(l.wake)
	l.wake = make(chan struct{})
	return l.newest
}

// Newest returns the index of the newest event; before any, the index
// before this Log's first.
func (l *Log) Newest() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.newest
}

// Since returns the events held whose index is above after, oldest first,
// and the newest index. An after below this Log's first index (0, or an
// index of an earlier pgdns process: a client resuming across a restart)
// or above its newest (a clock set back between two runs) is taken as
// the index before its first: every event held comes back, so the client
// starts over. Missed counts the events of this Log above after that are
// no longer held.
func (l *Log) Since(after uint64) (evs []Event, newest uint64, missed uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.since(after)
}

func (l *Log) since(after uint64) ([]Event, uint64, uint64) {
	after = l.clamp(after)
	n := len(l.ring)
	oldest := l.newest - uint64(n) + 1 // index of the oldest held (when n > 0)
	skip := 0
	var missed uint64
	switch {
	case n == 0:
		return nil, l.newest, 0
	case after+1 < oldest:
		missed = oldest - after - 1
	default:
		skip = int(after + 1 - oldest)
	}
	out := make([]Event, 0, n-skip)
	for i := skip; i < n; i++ {
		out = append(out, l.ring[(l.head+i)%n])
	}
	return out, l.newest, missed
}

// Wait blocks until an event with an index above after is held, then
// returns what Since(after) does. It returns early, with the same values
// (no newer events), when ctx is done (the caller's wait has passed, or
// its client went away: ctx's error), or when the Log is closed
// (ErrClosed). When maxWaiters calls are already blocked it returns
// ErrTooManyWaiters at once. err is nil whenever evs holds a newer
// event. A waiting call holds no goroutine of its
// own and polls nothing: Append wakes it.
func (l *Log) Wait(ctx context.Context, after uint64) (evs []Event, newest, missed uint64, err error) {
	l.mu.Lock()
	after = l.clamp(after) // as Since: the client starts over
	if l.newest > after {
		defer l.mu.Unlock()
		evs, newest, missed = l.since(after)
		return evs, newest, missed, nil
	}
	select {
	case <-l.closed:
		l.mu.Unlock()
		return nil, after, 0, ErrClosed
	default:
	}
	if l.waiters >= l.maxWaiters {
		l.mu.Unlock()
		return nil, after, 0, ErrTooManyWaiters
	}
	l.waiters++
	wake := l.wake
	l.mu.Unlock()

	select {
	case <-wake:
	case <-ctx.Done():
		err = ctx.Err()
	case <-l.closed:
		err = ErrClosed
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waiters--
	evs, newest, missed = l.since(after)
	if len(evs) > 0 {
		err = nil // an event came in as the wait ended: it is an answer
	}
	return evs, newest, missed, err
}

// clamp is after, or this Log's base when after is none of its indexes
// (an earlier run's, or above its newest).
func (l *Log) clamp(after uint64) uint64 {
	if after < l.base || after > l.newest {
		return l.base
	}
	return after
}

// Waiters returns how many Wait calls are blocked now.
func (l *Log) Waiters() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waiters
}

// Close ends every Wait, now and later, with ErrClosed, so that a
// shutdown is not held up by clients waiting for events. Events may still
// be appended and read. Closing twice does nothing.
func (l *Log) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.closed:
	default:
		close(l.closed)
	}
}
