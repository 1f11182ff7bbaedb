package probe

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Intake: how one probe result reaches the aggregator and is folded into
// the observed state. Each host has a goroutine (watch) that probes it on
// its tick, or at once when kicked, and sends the result; the aggregator
// (Run) takes results, holds steady ones for the round under way (hold.go)
// or publishes (build.go), and serves the hand-over (handover.go) and the
// outside authorities (authority.go).

type result struct {
	cluster, host int
	started       time.Time
	ticked        bool // probed on the host's own tick, not on a kick
	light         bool // a light probe's (closing.go): sample holds the WAL position alone
	sample        Sample
	err           error
}

// maxBackoff caps the wait between probes of a host that is down, so a
// restarted server is back in answers within seconds.
const maxBackoff = 2 * time.Second

// watch probes one host every interval, and at once when kicked, until
// ctx is done. At most one probe of the host is in flight, and each has a
// hard deadline, so a hung host delays nobody but itself.
func (p *Prober) watch(ctx context.Context, ci, hi int, addr string) {
	h := p.startHost(ctx, ci, hi, addr)
	if h == nil {
		return
	}
	defer p.endHost(h)
	for kicked := false; ; {
		if (kicked || p.due(h)) && !p.probeTurn(ctx, h, kicked) {
			return
		}
		var seen error
		kicked, seen = p.idle(ctx, h.checker, &h.tick, p.kicks[h.flat])
		if ctx.Err() != nil {
			return
		}
		if seen != nil {
			// The server went away between probes: say so now, and let
			// the next probe (on the tick, or sooner in flux) reconnect.
			h.fails++
			p.sendFailure(ctx, h.ci, h.hi, seen)
		}
	}
}

// hostLoop is what a host's goroutine keeps from one probe to the next:
// on the heap, once a host, not in watch's frame (see below).
type hostLoop struct {
	ci, hi, flat int
	addr         string
	checker      Checker
	tick         hostTick
	slowTick     bool // the tick is every 2.5 intervals: rounds drive the host
	fails        int
	// No probe on the tick before notBefore (a host down backs off);
	// lastStart is when the last probe started.
	notBefore, lastStart time.Time
	opened               *opening // the first probe's slot, until it is done (takeOpening)

	done func(took time.Duration, err error) // records each probe (Hooks.HostProbes), or nil
}

// startHost makes the host's checker and its loop; nil when there is no
// checker (its failure sent).
//
//go:noinline
func (p *Prober) startHost(ctx context.Context, ci, hi int, addr string) *hostLoop {
	checker, err := p.newChecker(addr)
	if err != nil {
		p.sendFailure(ctx, ci, hi, err)
		return nil
	}
	h := &hostLoop{ci: ci, hi: hi, flat: p.flatIndex(ci, hi), addr: addr, checker: checker}
	if w, ok := checker.(waiter); ok {
		p.wakeups[h.flat].Store(w.wakeup()) // a kick cuts the wait on the session (rounds.go)
	}
	if hook := p.cfg.Hooks.HostProbes; hook != nil {
		h.done = hook(p.state[ci].Name, addr)
	}
	h.tick.reset(p.cfg.Interval)
	h.opened = p.takeOpening(ctx) // the first probe opens the session: a bounded number at once
	return h
}

// endHost undoes startHost.
//
//go:noinline
func (p *Prober) endHost(h *hostLoop) {
	h.tick.stop()
	p.wakeups[h.flat].Store(nil)
	h.checker.Close()
}

// due reports whether the host's tick is to probe it: it is not backing
// off, and rounds do not drive it (skipTick).
//
//go:noinline
func (p *Prober) due(h *hostLoop) bool {
	return !time.Now().Before(h.notBefore) && !p.skipTick(h.flat, h.lastStart)
}

// probeTurn probes the host and sets its next tick and its back-off by
// the outcome; false when ctx ended meanwhile.
//
//go:noinline
func (p *Prober) probeTurn(ctx context.Context, h *hostLoop, kicked bool) bool {
	var err error
	h.lastStart, err = p.probe(ctx, h, kicked)
	// One reading of the clock for the rest of the turn, and for the
	// wait after it (hostTick.take): a probe's path read it 17 times,
	// 40 to 160 ns each on a loaded machine (issue 28).
	now := time.Now()
	h.tick.now = now
	if h.opened != nil {
		h.opened.release()
		h.opened = nil
	}
	if ctx.Err() != nil {
		return false
	}
	// A host that rounds drive leaves its own tick to them until they
	// stop, two intervals after its last probe (skipTick): every tick
	// before that would only wake it to skip it. So its tick comes two
	// and a half intervals after each probe (past the two a late round
	// may take: a tick at two would race it), and every interval again
	// once it probes on its own: as before, within three intervals of the
	// last round.
	if driven := p.drivenRecently(h.flat, now); driven || h.slowTick {
		if driven {
			h.tick.resetAt(now, p.cfg.Interval*5/2)
		} else {
			h.tick.resetAt(now, p.cfg.Interval)
		}
		h.slowTick = driven
	}
	if err == nil {
		h.fails = 0
		h.notBefore = time.Time{}
	} else if h.fails++; h.fails >= p.cfg.MaxFails {
		// Down: back off, doubling up to maxBackoff.
		wait := p.cfg.Interval << min(h.fails-p.cfg.MaxFails+1, 16)
		h.notBefore = now.Add(min(wait, max(maxBackoff, p.cfg.Interval)) - p.cfg.Interval/2)
	}
	return true
}

// At start every host's first probe opens its session (a TCP connect, the
// startup and authentication exchange, then the probe), and ten thousand
// hosts did so at once: the opens took both cores, and those of the fakes,
// for seconds, first probes timed out (4,023 "probe query: timed out" in
// the first 15 s at 10,000 hosts, issue 28), hosts probed first aged out
// while the rest opened, and every host was live only after 57 s. So at
// most maxOpening first probes run at once; a slot is freed when the probe
// is done, or after openingHold however long it takes, so that hosts that
// hang (a fleet half down at start) hold up the others by openingHold
// each at most, not by probe.timeout.
const (
	maxOpening  = 64
	openingHold = 25 * time.Millisecond
)

// opening is a host's slot among the first probes running at once.
type opening struct {
	p    *Prober
	once sync.Once
	held *time.Timer
}

// takeOpening waits for a slot for the host's first probe; nil when ctx
// ended first.
//
//go:noinline
func (p *Prober) takeOpening(ctx context.Context) *opening {
	select {
	case p.opening <- struct{}{}:
	case <-ctx.Done():
		return nil
	}
	o := &opening{p: p}
	o.held = time.AfterFunc(openingHold, o.free)
	return o
}

// release frees the slot at the end of the first probe (or did already,
// at openingHold).
func (o *opening) release() {
	o.held.Stop()
	o.free()
}

func (o *opening) free() { o.once.Do(func() { <-o.p.opening }) }

// A host's goroutine spends nearly all its life waiting in idle, and the
// runtime halves a goroutine's stack at a collection only while less than
// a quarter of it is in use (with 800 bytes of reserve on top), and
// doubles it whenever a call does not fit: so the probe path passes the
// Sample by pointer into a result of the outbox's (outboxPool), and what
// the loop keeps between probes is in its hostLoop, on the heap, with the
// work of each turn in functions of their own (not inlined: startHost,
// due, probeTurn, probe, sendFailure), so that watch's own frame, on the
// stack all the goroutine's life, stays small. Then a host holds a 4 KiB
// stack, probing or parked, and one that grew (a GC assist in the middle
// of a probe, an error path) is halved back to it: parked on its socket
// the goroutine uses 1,168 bytes, under a quarter of 8 KiB with the
// reserve. A watch frame of 2 KiB and the Sample copied on every level
// kept every host at 8 KiB or more, and one of 384 bytes (the loop's
// state in it) kept every host that grew once at 8 KiB for good (issue
// 28: stacks were a fifth of pgdns's memory at a thousand hosts).
// probe/goroutines_test.go's TestHostStack measures both.

// probe probes the host once, tells the hooks (the host's HostProbes
// function, ProbeDone) and sends the result (unless ctx ended meanwhile);
// it returns when it started and how it failed.
//
//go:noinline
func (p *Prober) probe(ctx context.Context, h *hostLoop, kicked bool) (started time.Time, err error) {
	r := outboxPool.Get().(*result)
	light := kicked && p.lightKicked(h.flat) // taken before the probe starts (closing.go)
	r.cluster, r.host, r.started, r.ticked = h.ci, h.hi, time.Now(), !kicked
	r.light, r.err = checkProbe(ctx, h.checker, p.cfg.Timeout, &r.sample, light)
	started, err = r.started, r.err
	if ctx.Err() != nil {
		putOutbox(r)
		return started, err
	}
	if hook := p.cfg.Hooks.ProbeDone; h.done != nil || hook != nil {
		took := time.Since(r.started) // one reading of the clock for both
		if h.done != nil {
			h.done(took, r.err)
		}
		if hook != nil {
			hook(p.state[h.ci].Name, h.addr, took, r.err)
		}
	}
	p.send(ctx, r)
	putOutbox(r)
	return started, err
}

// outboxPool holds the results the probes under way fill (probe): a
// result is sent by value, so it is the host's only while its probe
// runs, and a slot of every host's own (the prober's outbox) was 480
// bytes a host, 4.6 MiB at ten thousand hosts (issue 28).
var outboxPool = sync.Pool{New: func() any { return new(result) }}

// putOutbox gives r back, cleared, so that the pool keeps no sample's
// slices.
func putOutbox(r *result) {
	*r = result{}
	outboxPool.Put(r)
}

// sendFailure sends a result of the host that is err alone.
//
//go:noinline
func (p *Prober) sendFailure(ctx context.Context, ci, hi int, err error) {
	var r result
	r.cluster, r.host, r.started, r.err = ci, hi, time.Now(), err
	p.send(ctx, &r)
}

// timedChecker is a Checker that keeps a probe's deadline itself (a timer
// of its own, reset for each probe) rather than by a context made for each
// probe, which cost a host's goroutine more than the rest of its loop.
type timedChecker interface {
	// checkInto is Check(ctx) into s, with a deadline timeout from now.
	checkInto(ctx context.Context, timeout time.Duration, s *Sample) error
}

// checkWithin probes with checker, by timeout from now, into s.
func checkWithin(ctx context.Context, checker Checker, timeout time.Duration, s *Sample) error {
	if tc, ok := checker.(timedChecker); ok {
		return tc.checkInto(ctx, timeout, s)
	}
	return checkByContext(ctx, checker, timeout, s)
}

// checkByContext is checkWithin for a checker without a timer of its own.
//
//go:noinline
func checkByContext(ctx context.Context, checker Checker, timeout time.Duration, s *Sample) error {
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var err error
	*s, err = checker.Check(pctx)
	return err
}

// hostTick is a host's own tick, as a time.Ticker's (every period from
// the last reset; ticks missed while the host was busy are dropped, not
// queued), kept as a time rather than a channel: the host's goroutine
// waits for it on its session's socket, as a read deadline (session.go),
// and on a timer only when it has no session to wait on.
type hostTick struct {
	next   time.Time
	period time.Duration
	timer  *time.Timer // for waits without a session; made when first needed
	// now is the clock as the host's last probe turn read it at its end
	// (probeTurn), which the take just after it uses instead of reading
	// the clock again; zero once used.
	now time.Time
}

// reset makes the tick come every d from now.
func (t *hostTick) reset(d time.Duration) { t.resetAt(time.Now(), d) }

// resetAt makes the tick come every d from now.
func (t *hostTick) resetAt(now time.Time, d time.Duration) { t.period, t.next = d, now.Add(d) }

// take reports whether the tick has come, and moves it on if so.
func (t *hostTick) take() bool {
	now := t.now
	t.now = time.Time{}
	if now.IsZero() {
		now = time.Now()
	}
	if now.Before(t.next) {
		return false
	}
	for !t.next.After(now) {
		t.next = t.next.Add(t.period)
	}
	return true
}

// c is a channel that receives when the tick comes.
func (t *hostTick) c() <-chan time.Time {
	d := time.Until(t.next)
	if t.timer == nil {
		t.timer = time.NewTimer(d)
	} else {
		t.timer.Reset(d)
	}
	return t.timer.C
}

func (t *hostTick) stop() {
	if t.timer != nil {
		t.timer.Stop()
	}
}

// idle waits for the host's next probe: its tick, a kick, or the end of
// ctx. Meanwhile a checker that can watches its connection; should the
// server go away, idle returns at once with the definitive error it saw.
// An open session is waited on by this goroutine itself (waiter: it reads
// the socket until the tick, and a kick cuts the read short), which costs
// nothing more than the read; only when the session ends, or a new one is
// to be opened, does Watch run, in a goroutine of its own so that the tick
// and kicks still count.
func (p *Prober) idle(ctx context.Context, checker Checker, tick *hostTick, kick <-chan struct{}) (kicked bool, seen error) {
	if w, ok := checker.(waiter); ok {
		for !tick.take() {
			kicked, o := w.waitIdle(ctx, tick.next, kick)
			switch {
			case kicked:
				return true, nil
			case ctx.Err() != nil:
				return false, nil
			case o == idleWatch:
				return p.idleWatching(ctx, w, tick, kick) // Watch tells what it means
			case o == idleNothing:
				return p.idleUnwatched(ctx, tick, kick)
			}
			// Waited: the tick came (taken above), or the alarm rang
			// for a kick that was taken before it.
		}
		return false, nil
	}
	if w, ok := checker.(Watcher); ok {
		return p.idleWatching(ctx, w, tick, kick)
	}
	return p.idleUnwatched(ctx, tick, kick)
}

// idleUnwatched is idle with no connection to watch.
func (p *Prober) idleUnwatched(ctx context.Context, tick *hostTick, kick <-chan struct{}) (kicked bool, seen error) {
	if tick.take() {
		return false, nil
	}
	select {
	case <-ctx.Done():
	case <-tick.c():
		tick.take()
	case <-kick:
		return true, nil
	}
	return false, nil
}

// idleWatching is idle with w's Watch running until the tick, a kick, or
// the end of ctx.
func (p *Prober) idleWatching(ctx context.Context, w Watcher, tick *hostTick, kick <-chan struct{}) (kicked bool, seen error) {
	tick.now = time.Time{} // its take comes after a wait: the clock is read then
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- w.Watch(wctx) }()
	select {
	case <-ctx.Done():
	case <-tick.c():
		tick.take()
	case <-kick:
		kicked = true
	case err := <-done:
		if errors.Is(err, ErrNotServing) {
			return false, err
		}
		return false, nil // not definitive: the next probe will tell
	}
	stop()
	<-done // the checker is ours again
	return kicked, nil
}

// send sends r to the aggregator. It is not inlined: the copy of r that
// the channel takes (500 bytes) would sit in the probe's frame. The
// channel nearly always has room (or the aggregator waiting on it): a
// send that need not wait is tried alone first, which costs a channel's
// lock, where a select of two locks both and sorts them first (issue 28:
// the select was 2% of pgdns's CPU at 1,000 hosts).
//
//go:noinline
func (p *Prober) send(ctx context.Context, r *result) {
	select {
	case p.results <- *r:
		return
	default:
	}
	select {
	case p.results <- *r:
	case <-ctx.Done():
	}
}

// quickBatches is how many batches of results in a row Run takes without
// looking at its other channels, while results are queued.
const quickBatches = 8

// Run probes until ctx is done. It returns after every host goroutine has
// stopped and closed its connection.
func (p *Prober) Run(ctx context.Context) {
	defer close(p.stopped)
	p.opening = make(chan struct{}, maxOpening)
	var wg sync.WaitGroup
	defer wg.Wait()
	for ci, c := range p.state {
		for hi := range c.Hosts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.watch(ctx, ci, hi, c.Hosts[hi].Addr)
			}()
		}
	}

	// Rebuild at least once an interval even when no result arrives, so
	// that a host whose probes all hang ages out of the answers.
	tick := time.NewTicker(p.cfg.Interval)
	defer tick.Stop()
	fluxInterval, _ := p.fluxSettings()
	fluxTick := time.NewTicker(fluxInterval)
	defer fluxTick.Stop()
	var fluxC <-chan time.Time // nil while no cluster is in flux
	hold := time.NewTimer(time.Hour)
	hold.Stop()
	defer hold.Stop()
	var holdC <-chan time.Time // nil while no result is held nor build deferred
	var holdAt time.Time       // when hold fires, while holdC is set
	// holdTill has hold fire by until (the earlier of until and the
	// moment it is set for already).
	holdTill := func(until time.Time) {
		if holdC == nil || until.Before(holdAt) {
			hold.Reset(time.Until(until))
			holdC, holdAt = hold.C, until
		}
	}
	var lastPublish time.Time
	var activated chan struct{} // closed once the activating publish is in the table
	// held takes result r and those queued behind it, and reports whether
	// they are held for the round under way (hold.go) rather than
	// published now.
	held := func(r *result) bool {
		steady := p.take(*r)
		// Take what was queued by now, then publish once: not what
		// comes meanwhile, which at a fleet probed faster than the
		// aggregator takes results would never end the batch.
		for range len(p.results) {
			steady = p.take(<-p.results) && steady
		}
		if until, ok := p.holdUntil(lastPublish); steady && ok {
			holdTill(until)
			return true
		}
		return false
	}
	var r result
	for quick := 0; ; {
		// Results already queued are taken without the select over
		// every channel, which costs a lock of each (issue 28); at
		// most quickBatches batches in a row, so that the rest wait
		// that many batches at most.
		if quick < quickBatches && len(p.results) > 0 {
			quick++
			if r = <-p.results; held(&r) {
				continue
			}
		} else {
			quick = 0
			select {
			case <-ctx.Done():
				p.reportFinal()
				return
			case <-fluxC:
				if !p.fluxRound() {
					fluxC = nil
				}
				continue
			case r = <-p.results:
				if held(&r) {
					continue
				}
			case <-holdC:
				holdC = nil
				if until, ok := p.closingUntil(); ok && (p.deferredUntil.IsZero() || time.Now().Before(p.deferredUntil)) {
					if !p.deferredUntil.IsZero() && p.deferredUntil.Before(until) {
						until = p.deferredUntil // a deferred build is due first (hold.go)
					}
					holdTill(until) // held on for the closing probe (hold.go)
					continue
				}
			case <-tick.C:
			case u := <-p.updates:
				switch u := u.(type) {
				case activation:
					// Adopt before publishing anything: the first snapshot
					// already knows what the predecessor knew.
					p.adopt(u.knowledge)
					p.dirty.all = true // adopt marks every cluster itself
					p.dirty.unreportedAll = true
					p.active.Store(true)
					activated = u.published
				case leaderUpdate:
					p.setLeader(u)
				case tagsUpdate:
					p.setTags(u)
				}
			case q := <-p.requests:
				switch r := q.(type) {
				case chan Knowledge:
					r <- p.export()
					continue
				case forgetForkRequest:
					done, err := p.forgetFork(r)
					if err != nil {
						r.reply <- forgetForkReply{done: done, err: err}
						continue
					}
					p.publish() // the host is judged without the proof from now on
					r.reply <- forgetForkReply{done: done}
				case forgetRequest:
					ci, before, err := p.forget(r)
					if err != nil {
						r.reply <- forgetReply{err: err}
						continue
					}
					p.publish() // decides the newest timeline again, from what is proven now
					r.reply <- forgetReply{before: before, after: p.state[ci].NewestTimeline}
				}
			}
		}
		if holdC != nil {
			hold.Stop()
			holdC = nil
		}
		p.publish()
		lastPublish = time.Now()
		if until := p.deferredUntil; !until.IsZero() {
			// The builds deferred are made by then, in one publish every
			// holdMax/4 at most (hold.go).
			if spaced := lastPublish.Add(p.holdMax() / 4); until.Before(spaced) {
				until = spaced
			}
			holdTill(until)
		}
		p.published.Store(p.last)
		if activated != nil {
			close(activated) // Activate returns: the table holds this prober's snapshot
			activated = nil
		}
		p.reportLearned()
		if p.dirty.notLeaders > 0 {
			p.leaderUnsure(p.last) // no look at every cluster while none has a host set aside so
		}
		if fluxC == nil && p.fluxRound() {
			fluxTick.Reset(fluxInterval)
			fluxC = fluxTick.C
		}
		p.finishRefreshes()
	}
}

// take records result r and moves its cluster's round along; it reports
// whether r was steady (hold.go).
func (p *Prober) take(r result) bool {
	if r.light {
		return p.takeClosing(r) // the WAL clock and the round alone (closing.go)
	}
	steady := p.steady(r)
	urgent := p.isUrgent(r.cluster)
	p.record(r)
	if steady {
		// A steady result leaves the cluster's build as deferrable as it
		// was (hold.go, deferBuild): record marked it for the next publish.
		p.setUrgent(r.cluster, urgent)
	}
	p.advanceRound(r)
	return steady
}

// record folds one result into the observed state.
func (p *Prober) record(r result) {
	c := p.state[r.cluster]
	h := &c.Hosts[r.host]
	p.markRebuild(r.cluster) // built anew at the next publish (build.go)
	p.noteRefreshed(r)
	if idx := p.flatIndex(r.cluster, r.host); !p.done[idx] {
		p.done[idx] = true
		p.probed++
		p.probedSoFar.Store(int64(p.probed))
	}
	if r.err != nil {
		if crashRecovery(r.err) {
			p.watchCrash(h, "it refused a session in crash recovery at "+r.started.UTC().Format(time.RFC3339))
		}
		h.Fails++
		if errors.Is(r.err, ErrNotServing) {
			h.Fails = max(h.Fails, p.cfg.MaxFails) // down at once (classify.go)
		}
		h.LastError, h.FailClass = r.err.Error(), FailureClass(r.err)
		return
	}
	s := r.sample
	if s.Crashed {
		p.watchCrash(h, "its session was ended for a crash of another server process, 57P02")
	}
	// One run of one server, probed without a failure in between: what
	// the last sample said still holds as far as it goes.
	continuous := h.Seen && h.Fails == 0 && h.StartedAt.Equal(s.StartedAt)
	tl, exact, watched := s.Timeline, true, false
	if s.InRecovery && s.Timeline == 0 {
		// No WAL receiver: the timeline being replayed is at least the
		// last restartpoint's, and at least what this run replayed before.
		// Watched when this run was seen streaming that very timeline
		// (zone.Host.TimelineWatched): what it replays now it received
		// then, unless a receiver came and went between two probes.
		tl, exact = s.CheckpointTimeline, false
		if continuous && h.InRecovery {
			tl = max(tl, h.Timeline)
			watched = (h.TimelineExact || h.TimelineWatched) && h.Timeline == tl
		}
	}
	// No receiver now, its timeline watched: the sender it streamed that
	// timeline from is kept (zone.Host.SenderHost), the last sample's own
	// or what that sample had kept.
	senderHost, senderPort := s.SenderHost, s.SenderPort
	if watched && s.Receiver == "" && (h.Receiver == "streaming" || h.TimelineWatched) {
		senderHost, senderPort = h.SenderHost, h.SenderPort
	}
	p.learnTimelines(r.cluster, h, continuous, s, tl, exact, c.Identity != 0 && s.SystemID == c.Identity)
	p.watchReplay(h, continuous, s, tl, exact)
	p.restoreFork(r.cluster, h, s.StartedAt, s.InRecovery, c.Identity != 0 && s.SystemID == c.Identity)
	p.watchRun(h, s)

	h.Seen, h.ProbeStart, h.ProbedAt, h.Fails, h.LastError, h.FailClass = true, s.Start, s.End, 0, "", ""
	h.IP, h.InRecovery, h.SystemID, h.StartedAt = s.IP, s.InRecovery, s.SystemID, s.StartedAt
	h.Timeline, h.TimelineExact, h.TimelineWatched = tl, exact, watched
	h.InsertLSN, h.ReceiveLSN, h.ReplayLSN = s.InsertLSN, s.ReceiveLSN, s.ReplayLSN
	h.AppName, h.AppNameWhy, h.SlotName, h.Standbys = s.AppName, s.AppNameWhy, s.SlotName, s.Standbys
	h.Receiver, h.SenderHost, h.SenderPort = s.Receiver, senderHost, senderPort
	h.OwnHistory = nil
	if exact {
		h.OwnHistory = s.History
	}
	h.StatsHidden, h.TimelineHidden, h.SyncNamesSet, h.Stopping = s.StatsHidden, s.TimelineHidden, s.SyncNamesSet, s.Stopping
	h.WALBlockSize, h.WALSegmentSize = s.WALBlockSize, s.WALSegmentSize
	h.DrainSetting, h.OfflineSetting = s.DrainSetting, s.OfflineSetting
	h.SettingShadowed = s.SettingShadowed
	h.DefaultReadOnly, h.ReadOnlyShadowed = s.DefaultReadOnly, s.ReadOnlyShadowed
	h.DefaultSerializable, h.IsolationShadowed = s.DefaultSerializable, s.IsolationShadowed
	if s.InRecovery && c.Identity != 0 && s.SystemID == c.Identity {
		p.inheritFork(r.cluster, h) // a cascade of a replica on another branch (forks.go)
	}

	// The WAL clock of a writable host. It starts over when the host
	// changes timeline or goes back into recovery (positions on another
	// timeline are not comparable), and at another server run there
	// (another system identifier or start time): another server's marks
	// bound nothing of when this one inserted (lag.go).
	w := p.history[h]
	if s.InRecovery {
		delete(p.history, h)
		return
	}
	if w == nil || !w.of(s.SystemID, s.StartedAt, s.Timeline) {
		w = &walHistory{timeline: s.Timeline, system: s.SystemID, run: s.StartedAt}
		p.history[h] = w
	}
	w.add(s.Start, s.InsertLSN) // the primary was at most there at Start (lag.go)
	p.checkForks(r.cluster, h, r.started, s.InsertLSN)
}

// drivenRecently reports whether a round (or a flux) kicked host flat less
// than two intervals before now: skipTick's first half, which holds as long as
// rounds drive the host.
func (p *Prober) drivenRecently(flat int, now time.Time) bool {
	return now.Sub(time.Unix(0, p.driven[flat].Load())) < 2*p.cfg.Interval
}
