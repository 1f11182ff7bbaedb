package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// Kinds of fault, in the order the short soak knows them.
const (
	KillFailover   = "kill9-failover"  // kill -9 the primary's postmaster, promote a replica, re-clone the old primary
	Switchover     = "switchover"      // stop the primary cleanly, promote a replica, re-clone the old primary
	FreezeReplica  = "freeze-replica"  // SIGSTOP a replica, SIGCONT it later
	FreezePrimary  = "freeze-primary"  // SIGSTOP the primary, SIGCONT it later
	PauseReplay    = "pause-replay"    // pg_wal_replay_pause() on a replica, resume later
	RestartReplica = "restart-replica" // stop a replica (fast or immediate) and start it
	Idle           = "idle"            // the primary writes nothing for a few seconds
	Burst          = "burst"           // a burst of several MB of WAL
	RestartPGDNS   = "restart-pgdns"   // stop pgdns and start it again on the same address
	ReloadPGDNS    = "reload-pgdns"    // re-read pgdns's config (SIGHUP)
)

// Kinds lists every fault kind.
var Kinds = []string{KillFailover, Switchover, FreezeReplica, FreezePrimary, PauseReplay,
	RestartReplica, Idle, Burst, RestartPGDNS, ReloadPGDNS}

// weights of each kind in a long run: failovers are the costliest and the
// most telling, the cheap faults are drawn more often.
var weights = map[string]int{KillFailover: 2, Switchover: 2, FreezeReplica: 2, FreezePrimary: 2,
	PauseReplay: 2, RestartReplica: 2, Idle: 1, Burst: 2, RestartPGDNS: 1, ReloadPGDNS: 1}

// Fault is one planned fault: drawn from the seed alone, so a seed always
// gives the same schedule. Targets are picked relative to roles at the time
// (Pick modulo the number of replicas, in node order).
type Fault struct {
	N    int
	Kind string
	Gap  time.Duration // quiet time before it
	Dur  time.Duration // how long it lasts (freeze, pause, idle, before promote)
	Pick int
	Mode string // restart-replica: fast or immediate
	MB   int    // burst: MB of WAL to write
}

func (f Fault) String() string {
	s := fmt.Sprintf("#%d %s after %s", f.N, f.Kind, f.Gap.Round(time.Millisecond))
	if f.Dur > 0 {
		s += fmt.Sprintf(", for %s", f.Dur.Round(time.Millisecond))
	}
	if f.Mode != "" {
		s += ", " + f.Mode
	}
	return s + fmt.Sprintf(", pick %d", f.Pick)
}

// Planner draws the schedule of a seed.
type Planner struct {
	rng   *rand.Rand
	short []string
	n     int
}

// NewPlanner returns the schedule of seed; short plays every kind once in
// a seeded order, otherwise kinds are drawn by weight without end.
func NewPlanner(seed uint64, short bool) *Planner {
	p := &Planner{rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))}
	if short {
		p.short = append([]string(nil), Kinds...)
		p.rng.Shuffle(len(p.short), func(i, j int) { p.short[i], p.short[j] = p.short[j], p.short[i] })
	}
	return p
}

// Next returns the next fault; ok is false when a short plan is done.
func (p *Planner) Next() (f Fault, ok bool) {
	var kind string
	if p.short != nil {
		if p.n >= len(p.short) {
			return Fault{}, false
		}
		kind = p.short[p.n]
	} else {
		total := 0
		for _, k := range Kinds {
			total += weights[k]
		}
		r := p.rng.IntN(total)
		for _, k := range Kinds {
			if r -= weights[k]; r < 0 {
				kind = k
				break
			}
		}
	}
	p.n++
	f = Fault{N: p.n, Kind: kind, Pick: p.rng.IntN(1000)}
	f.Gap = time.Duration(1000+p.rng.IntN(2000)) * time.Millisecond
	switch kind {
	case KillFailover, Switchover:
		f.Dur = time.Duration(200+p.rng.IntN(800)) * time.Millisecond
	case FreezeReplica, FreezePrimary, PauseReplay:
		f.Dur = time.Duration(500+p.rng.IntN(2500)) * time.Millisecond
	case Idle:
		f.Dur = time.Duration(2000+p.rng.IntN(3000)) * time.Millisecond
	case Burst:
		f.MB = 2 + p.rng.IntN(7)
	case RestartReplica:
		f.Mode = []string{"fast", "immediate"}[p.rng.IntN(2)]
	}
	if kind == KillFailover {
		// Half the kills find the replicas behind (replication held back
		// for a moment while the primary takes writes), so that acknowledged writes
		// are lost with it, as asynchronous replication allows. Drawn
		// from Pick, not the generator, so that schedules stay as before.
		if (f.Pick/2)%2 == 1 {
			f.Mode = "lagging"
		}
	}
	return f, true
}

// faultRecord is what happened when a fault was injected.
type faultRecord struct {
	Fault
	detail string
	start  time.Time
	healed time.Time // the cluster streaming again (zero if it never did)
	err    error
}

// inject plays the schedule until it ends (short) or Duration is up, one
// fault at a time: each waits until the cluster has healed from the last.
func (h *harness) inject(ctx context.Context) []*faultRecord {
	plan := NewPlanner(h.opts.Seed, h.opts.Short)
	deadline := time.Now().Add(h.opts.Duration)
	var out []*faultRecord
	for {
		f, ok := plan.Next()
		if !ok || (!h.opts.Short && time.Now().Add(f.Gap).After(deadline)) {
			return out
		}
		gap := f.Gap
		if h.opts.Short {
			gap /= 2 // the short soak keeps make test near a minute
		}
		select {
		case <-ctx.Done():
			return out
		case <-time.After(gap):
		}
		r := &faultRecord{Fault: f, start: time.Now()}
		h.logf("fault %s", f)
		r.detail, r.err = h.apply(ctx, f)
		if r.err != nil {
			h.note("fault %s: %v", f, r.err)
		}
		hctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		if err := h.waitHealed(hctx); err != nil {
			h.note("after fault #%d the cluster did not heal: %v; re-cloning the stragglers", f.N, err)
			h.repair(hctx)
		} else {
			r.healed = time.Now()
		}
		cancel()
		h.logf("  %s; healed after %s", r.detail, since(r.start, r.healed))
		out = append(out, r)
	}
}

func since(a, b time.Time) string {
	if b.IsZero() {
		return "never"
	}
	return b.Sub(a).Round(time.Millisecond).String()
}

// apply injects one fault and undoes it; it returns what it did.
func (h *harness) apply(ctx context.Context, f Fault) (string, error) {
	w := h.w
	replicas := w.replicas()
	replica := replicas[f.Pick%len(replicas)]
	primary := w.currentPrimary()
	fctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	switch f.Kind {
	case KillFailover, Switchover:
		return h.failover(fctx, f, primary, replicas)
	case FreezeReplica, FreezePrimary:
		n := replica
		if f.Kind == FreezePrimary {
			n = primary
		}
		if err := n.Signal(syscall.SIGSTOP); err != nil {
			return "", err
		}
		time.Sleep(f.Dur)
		return "froze " + n.Addr(), n.Signal(syscall.SIGCONT)
	case PauseReplay:
		if err := execOn(fctx, replica, "SELECT pg_wal_replay_pause()"); err != nil {
			return "", err
		}
		time.Sleep(f.Dur)
		return "paused replay on " + replica.Addr(), execOn(fctx, replica, "SELECT pg_wal_replay_resume()")
	case RestartReplica:
		w.restarting(replica)
		if err := replica.Stop(fctx, f.Mode); err != nil {
			return "", err
		}
		return "restarted " + replica.Addr() + " (" + f.Mode + ")", replica.Start(fctx)
	case Idle:
		h.idle.Store(true)
		time.Sleep(f.Dur)
		h.idle.Store(false)
		return "no writes", nil
	case Burst:
		err := execOn(fctx, primary, fmt.Sprintf(
			"TRUNCATE soak_burst; INSERT INTO soak_burst SELECT repeat(md5(i::text), 32) FROM generate_series(1, %d) i", f.MB*1024))
		return fmt.Sprintf("%d MB written on %s", f.MB, primary.Addr()), err
	case RestartPGDNS:
		h.stopPGDNS()
		w.mu.Lock()
		w.gen++
		w.genStart = time.Now()
		w.mu.Unlock()
		return "pgdns restarted", h.startPGDNS(filepath.Dir(h.cfg))
	case ReloadPGDNS:
		return "pgdns reloaded", h.reloadPGDNS()
	}
	return "", fmt.Errorf("unknown fault %q", f.Kind)
}

// failover takes the primary away (kill -9 of its postmaster, or a clean
// fast shutdown), promotes the picked replica, points the other at it
// (or re-clones it when it is ahead of the new timeline) and re-clones the
// old primary from the new one.
func (h *harness) failover(ctx context.Context, f Fault, old *pgtest.Node, replicas []*pgtest.Node) (string, error) {
	w := h.w
	cand := replicas[f.Pick%len(replicas)]
	other := replicas[(f.Pick+1)%len(replicas)]
	var how string
	if f.Kind == KillFailover {
		if f.Mode == "lagging" {
			// Hold replication back while the primary commits; those
			// commits die with it.
			if err := old.SignalWalsenders(syscall.SIGSTOP); err != nil {
				return "", err
			}
			time.Sleep(300 * time.Millisecond)
			how = "WAL senders frozen 300ms, "
		}
		err := old.KillPostmaster()
		if f.Mode == "lagging" {
			err = errors.Join(err, old.SignalWalsenders(syscall.SIGKILL))
		}
		if err != nil {
			return "", err
		}
		now := time.Now()
		w.mu.Lock()
		w.primary, w.demotedAt[old.Addr()], w.killedAt[old.Addr()] = nil, now, now
		w.mu.Unlock()
		how += "killed " + old.Addr()
	} else {
		if err := old.Stop(ctx, "fast"); err != nil {
			return "", err
		}
		w.mu.Lock()
		w.primary, w.demotedAt[old.Addr()] = nil, time.Now()
		w.mu.Unlock()
		how = "stopped " + old.Addr()
		// A clean switchover promotes only a replica that has received the
		// old primary's shutdown checkpoint; one that has not would lose
		// writes, which is then the harness's doing, not pgdns's.
		if ok, err := h.caughtUp(ctx, old, cand); !ok {
			w.mu.Lock()
			w.killedAt[old.Addr()] = w.demotedAt[old.Addr()]
			w.mu.Unlock()
			h.note("switchover #%d: %s had not received the shutdown checkpoint (%v); counted as lossy", f.N, cand.Addr(), err)
		}
	}
	time.Sleep(f.Dur)
	// Promoting from the moment it is asked: it may be writable (and
	// answered so) before pg_ctl promote returns, but it is only known to
	// be writable once it has returned; the grace counts from then.
	w.mu.Lock()
	w.promotedAt[cand.Addr()], w.promoting[cand.Addr()] = time.Now(), true
	w.mu.Unlock()
	err := cand.Promote(ctx)
	w.mu.Lock()
	w.promotedAt[cand.Addr()], w.promoting[cand.Addr()] = time.Now(), false
	w.mu.Unlock()
	if err != nil {
		return how, err
	}
	var (
		tl    int
		forks map[int]LSN
	)
	for range 20 { // the new primary may be slow to take connections under load
		if tl, forks, err = history(ctx, cand); err == nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if err != nil {
		return how, err
	}
	w.mu.Lock()
	w.primary, w.timeline = cand, tl
	for t, end := range forks {
		w.forks[t] = end
	}
	fork := w.forks[tl-1]
	w.mu.Unlock()
	how += fmt.Sprintf(", promoted %s to timeline %d (timeline %d ended at %s)", cand.Addr(), tl, tl-1, fork)

	// The other replica follows unless it has WAL past the fork.
	var recv string
	_ = other.QueryOnce(ctx, "SELECT coalesce(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())::text", &recv)
	if pos, err := ParseLSN(recv); err == nil && pos <= fork {
		if err := other.FollowContext(ctx, cand); err != nil {
			return how, err
		}
		how += ", " + other.Addr() + " follows"
	} else {
		w.restarting(other)
		if err := other.Reclone(ctx, cand); err != nil {
			return how, err
		}
		how += ", " + other.Addr() + " re-cloned (was at " + recv + ")"
	}
	w.restarting(old)
	if err := old.Reclone(ctx, cand); err != nil {
		return how, err
	}
	return how + ", " + old.Addr() + " re-cloned", nil
}

// caughtUp waits (up to 5 s) until replica has received old's last
// checkpoint (read from the stopped node's control file).
func (h *harness) caughtUp(ctx context.Context, old, replica *pgtest.Node) (bool, error) {
	s, err := old.CheckpointLSN(ctx)
	if err != nil {
		return false, err
	}
	want, err := ParseLSN(s)
	if err != nil {
		return false, err
	}
	var last string
	for range 100 {
		if err := replica.QueryOnce(ctx, "SELECT coalesce(pg_last_wal_receive_lsn(), '0/0')::text", &last); err == nil {
			if got, err := ParseLSN(last); err == nil && got > want {
				return true, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false, fmt.Errorf("received %s, checkpoint at %s", last, want)
}

// history reads the newest timeline of a fresh primary and, from its
// history file, where each earlier timeline ended.
func history(ctx context.Context, n *pgtest.Node) (int, map[int]LSN, error) {
	var tl int
	if err := n.QueryOnce(ctx, timelineSQL, &tl); err != nil {
		return 0, nil, err
	}
	var text string
	if err := n.QueryOnce(ctx, fmt.Sprintf("SELECT pg_read_file('pg_wal/%08X.history')", tl), &text); err != nil {
		return 0, nil, err
	}
	forks := map[int]LSN{}
	for _, line := range strings.Split(text, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		t, err1 := strconv.Atoi(fields[0])
		end, err2 := ParseLSN(fields[1])
		if err1 == nil && err2 == nil {
			forks[t] = end
		}
	}
	if _, ok := forks[tl-1]; !ok {
		return 0, nil, fmt.Errorf("history of timeline %d names no end of timeline %d: %q", tl, tl-1, text)
	}
	return tl, forks, nil
}

// waitHealed waits until the primary streams to both replicas.
func (h *harness) waitHealed(ctx context.Context) error {
	var n int
	var err error
	for {
		if p := h.w.currentPrimary(); p != nil {
			err = p.QueryOnce(ctx, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'", &n)
			if err == nil && n == len(h.w.pg.Nodes)-1 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d replicas streaming (%v)", n, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// repair re-clones every replica that does not stream from the primary.
func (h *harness) repair(ctx context.Context) {
	p := h.w.currentPrimary()
	if p == nil {
		return
	}
	for _, r := range h.w.replicas() {
		var n int
		err := p.QueryOnce(ctx, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND application_name = '"+r.Name+"'", &n)
		if err == nil && n == 1 {
			continue
		}
		h.w.restarting(r)
		if err := r.Reclone(ctx, p); err != nil {
			h.note("repair of %s: %v", r.Addr(), err)
		}
	}
	if err := h.waitHealed(ctx); err != nil {
		h.note("still not healed after repair: %v", err)
	}
}

// execOn runs one statement on a node on a fresh connection.
func execOn(ctx context.Context, n *pgtest.Node, sql string) error {
	conn, err := pgx.Connect(ctx, n.DSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}
