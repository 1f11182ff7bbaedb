package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/zone"
)

// LSN is a WAL position, as PostgreSQL prints it "HI/LO".
type LSN uint64

// ParseLSN reads "HI/LO" (hex).
func ParseLSN(s string) (LSN, error) {
	hi, lo, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return 0, fmt.Errorf("bad LSN %q", s)
	}
	h, err1 := strconv.ParseUint(hi, 16, 32)
	l, err2 := strconv.ParseUint(lo, 16, 32)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad LSN %q", s)
	}
	return LSN(h<<32 | l), nil
}

func (l LSN) String() string { return fmt.Sprintf("%X/%X", uint64(l)>>32, uint64(l)&0xffffffff) }

// Label is the LSN as an lsn- name carries it: "hi-lo", lower-case.
func (l LSN) Label() string { return zone.LSN(l).Label() }

// ack is one acknowledged write: a heartbeat or a client's row.
type ack struct {
	id   int64
	node string    // address it committed on
	tl   int       // that node's timeline
	lsn  LSN       // position after the commit (see commitAndPosition); 0 unknown
	at   time.Time // when the commit returned
	// posAt is when the position was read: the primary was at lsn by
	// then (not necessarily at at).
	posAt time.Time
	// asked is when the write's session began (a client's DNS question,
	// the heartbeat's connection): a write may commit on a killed
	// primary's backend after the kill, but only in a session begun
	// before it.
	asked time.Time
}

// evidence is a primary answer seen checked: pgdns named a writable host
// on timeline tl, so from then on it has seen tl.
type evidence struct {
	gen int // pgdns incarnation
	at  time.Time
	tl  int
}

// world is the harness's ground truth. The fault injector changes it; the
// checking workers read it.
type world struct {
	mu sync.Mutex

	pg      *pgtest.Cluster
	foreign *pgtest.Cluster // nil without a foreign host
	sysid   string          // the cluster's system identifier

	primary  *pgtest.Node      // nil between a kill and a promote
	timeline int               // newest timeline of the cluster
	forks    map[int]LSN       // where timeline T ended (switch to T+1)
	born     map[int]time.Time // timeline → when its promotion returned

	promotedAt map[string]time.Time // node addr → when it last became primary (pg_ctl promote returned)
	promoting  map[string]bool      // node addr → a promotion was asked for and has not returned
	demotedAt  map[string]time.Time // node addr → when it last stopped being primary
	killedAt   map[string]time.Time // node addr → when it was last killed as primary (a lossy failover)
	// restartedAt: node addr → when it was last stopped to be restarted or
	// re-cloned. A replica's replay position may go back across a restart
	// (it reopens at its consistent point), so what pgdns saw before it
	// need not hold after it.
	restartedAt map[string]time.Time

	hb     []ack // heartbeats in seq order
	writes []ack // clients' acknowledged rows

	gen      int // pgdns incarnation, +1 on restart
	genStart time.Time
	known    []evidence

	// drainingAt: node addr → when a smart shutdown of it began (absent
	// when none runs).
	drainingAt map[string]time.Time
	// epochs of pgdns's host list, oldest first.
	epochs []epoch
	prev   *pgtest.Node // the primary before the current one (or the current)
}

// epoch is one host list pgdns ran with: applied from (the reload began)
// until to (the next reload returned; zero while current).
type epoch struct {
	from, to time.Time
	hosts    map[string]bool // IPs
}

func newWorld(pg *pgtest.Cluster, foreign *pgtest.Cluster, sysid string) *world {
	now := time.Now()
	w := &world{pg: pg, foreign: foreign, sysid: sysid, primary: pg.Nodes[0], timeline: 1,
		forks: map[int]LSN{}, born: map[int]time.Time{1: now.Add(-time.Hour)}, promotedAt: map[string]time.Time{pg.Nodes[0].Addr(): now.Add(-time.Hour)},
		demotedAt: map[string]time.Time{}, killedAt: map[string]time.Time{}, restartedAt: map[string]time.Time{}, promoting: map[string]bool{}, genStart: now,
		drainingAt: map[string]time.Time{}, prev: pg.Nodes[0]}
	return w
}

// reloading records that a reload to hosts (host:port) begins now: until
// it returns, pgdns may answer from the old list or the new one. done
// says whether it applied: then the old list ends when it returned,
// otherwise the new one never was.
func (w *world) reloading(hosts []string) (done func(applied bool)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	prev := len(w.epochs) - 1
	e := epoch{from: time.Now(), hosts: map[string]bool{}}
	for _, hp := range hosts {
		host, _, _ := strings.Cut(hp, ":")
		e.hosts[host] = true
	}
	w.epochs = append(w.epochs, e)
	next := len(w.epochs) - 1
	return func(applied bool) {
		w.mu.Lock()
		defer w.mu.Unlock()
		switch {
		case !applied:
			w.epochs[next].hosts = map[string]bool{}
		case prev >= 0:
			w.epochs[prev].to = time.Now()
		}
	}
}

// configuredFor reports whether ip was a configured host at some moment
// between a question's sending and its answer.
func (w *world) configuredFor(ip string, sent, recv time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range w.epochs {
		if e.hosts[ip] && !e.from.After(recv) && (e.to.IsZero() || !e.to.Before(sent)) {
			return true
		}
	}
	return false
}

// drain marks a smart shutdown of n as begun (on) or over.
func (w *world) drain(n *pgtest.Node, on bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if on {
		w.drainingAt[n.Addr()] = time.Now()
	} else {
		delete(w.drainingAt, n.Addr())
	}
}

// draining reports whether a smart shutdown of n runs.
func (w *world) draining(n *pgtest.Node) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.drainingAt[n.Addr()]
	return ok
}

// lastPrimary is the current primary, or between a primary's loss and the
// promotion of its successor, the one lost.
func (w *world) lastPrimary() *pgtest.Node {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.primary != nil {
		return w.primary
	}
	return w.prev
}

// restarting records that n is about to be stopped and started again.
func (w *world) restarting(n *pgtest.Node) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.restartedAt[n.Addr()] = time.Now()
}

// restartedSince reports whether the node at addr was restarted after t.
func (w *world) restartedSince(addr string, t time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.restartedAt[addr]
	return ok && r.After(t)
}

func (w *world) currentPrimary() *pgtest.Node {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.primary
}

// replicas are the nodes that are not the primary, in node order.
func (w *world) replicas() []*pgtest.Node {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*pgtest.Node
	for _, n := range w.pg.Nodes {
		if n != w.primary {
			out = append(out, n)
		}
	}
	return out
}

// surviving reports whether a write acknowledged on timeline tl at lsn is
// in the history of the newest timeline: on it, or before the point where
// its own timeline ended.
func (w *world) surviving(a ack) bool {
	if a.tl == w.timeline {
		return true
	}
	end, ok := w.forks[a.tl]
	return ok && a.lsn != 0 && a.lsn <= end
}

// lostWithKill reports whether a write may have been lost by the harness's
// own doing: it was not replicated before its primary was killed (async
// replication loses that tail). Such a write is excused; any other missing
// write is a violation.
func (w *world) lostWithKill(a ack) bool {
	if w.surviving(a) || a.tl >= w.timeline {
		return false
	}
	k, ok := w.killedAt[a.node]
	return ok && a.asked.Before(k)
}

// settled reports whether heartbeat a is known to be in the history of
// the newest timeline. Between a primary's kill or stop and the promotion
// of its successor, the tail of the current timeline is undecided: it may
// be lost with the old primary, so a replica lacking it proves nothing.
func (w *world) settled(a ack) bool {
	return w.surviving(a) && !(a.tl == w.timeline && w.primary == nil)
}

// seen reports whether pgdns must have seen heartbeat a's timeline by t:
// its primary was promoted more than SeeGrace before (until then pgdns may
// still judge replicas by the WAL clock of a primary it superseded, as in
// an unfenced failover).
func (w *world) seen(a ack, t time.Time) bool {
	return w.born[a.tl].Add(SeeGrace).Before(t)
}

// lackedBefore returns the first settled heartbeat after seq m that was
// acknowledged before t: a replica that has at most heartbeat m lacks it.
func (w *world) lackedBefore(m int64, t time.Time) (ack, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	i := sort.Search(len(w.hb), func(i int) bool { return w.hb[i].id > m })
	for ; i < len(w.hb) && w.hb[i].at.Before(t); i++ {
		if w.settled(w.hb[i]) && w.seen(w.hb[i], t) {
			return w.hb[i], true
		}
	}
	return ack{}, false
}

// pastBefore returns the first settled heartbeat whose commit ended past
// position r and that was acknowledged before t: the heartbeat after one
// whose insert position, read after its commit and before the next one
// began, was at or past r (both on one primary and timeline).
func (w *world) pastBefore(r LSN, t time.Time) (ack, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := 0; i+1 < len(w.hb) && w.hb[i+1].at.Before(t); i++ {
		prev, next := w.hb[i], w.hb[i+1]
		if prev.lsn != 0 && prev.lsn >= r && prev.node == next.node && prev.tl == next.tl && next.tl == w.timeline && w.settled(next) && w.seen(next, t) {
			return next, true
		}
	}
	return ack{}, false
}

// currentTimeline is the cluster's newest timeline.
func (w *world) currentTimeline() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.timeline
}

// positionBefore is a lower bound of the primary's WAL insert position at
// t: the position read after the newest settled heartbeat whose read
// returned by t.
func (w *world) positionBefore(t time.Time) (ack, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	i := sort.Search(len(w.hb), func(i int) bool { return !w.hb[i].posAt.Before(t) })
	for i--; i >= 0; i-- {
		if w.hb[i].lsn != 0 && w.settled(w.hb[i]) && w.seen(w.hb[i], t) {
			return w.hb[i], true
		}
	}
	return ack{}, false
}

// newestBefore is the newest timeline whose promotion had returned by t.
func (w *world) newestBefore(t time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	best := 0
	for tl, at := range w.born {
		if at.Before(t) && tl > best {
			best = tl
		}
	}
	return best
}

// knownTimeline is the highest timeline pgdns incarnation gen had
// certainly seen before t: the timeline of a writable host it had answered
// as primary by then.
func (w *world) knownTimeline(gen int, t time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	best := 0
	for _, e := range w.known {
		if e.gen == gen && e.at.Before(t) && e.tl > best {
			best = e.tl
		}
	}
	return best
}

// sawPrimary records that incarnation gen answered a writable host on
// timeline tl as primary at t (keeping the earliest time per timeline).
func (w *world) sawPrimary(gen int, t time.Time, tl int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, e := range w.known {
		if e.gen == gen && e.tl == tl {
			if t.Before(e.at) {
				w.known[i].at = t
			}
			return
		}
	}
	w.known = append(w.known, evidence{gen: gen, at: t, tl: tl})
}

func (w *world) generation() (int, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gen, w.genStart
}
