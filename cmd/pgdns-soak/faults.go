package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
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

	SmartReplica = "smart-replica" // pg_ctl stop -m smart of a replica, then start it
	SmartPrimary = "smart-primary" // pg_ctl stop -m smart of the primary, then start it
	AsyncCommits = "async-commits" // every write and heartbeat with synchronous_commit = off for a while
	DelayProbe   = "delay-probe"   // the proxy on one probe path holds back what pgdns sends
	ReloadHosts  = "reload-hosts"  // a reload without one host (a node or the foreign one), a reload with it again
	ProbeRole    = "probe-role"    // a reload that makes pgdns probe as a role without pg_monitor (with PlainProbe: as the superuser), and back

	Unfenced = "unfenced-failover" // promote a replica while the primary runs on, then stop one of the two

	CutPGDNSPrimary   = "cut-pgdns-primary"   // drop packets between pgdns and the primary; clients still reach it
	CutPGDNSReplica   = "cut-pgdns-replica"   // drop packets between pgdns and a replica
	CutReplicaPrimary = "cut-replica-primary" // drop packets between a replica's WAL receiver and the primary
)

// Kinds lists every fault kind.
var Kinds = []string{KillFailover, Switchover, FreezeReplica, FreezePrimary, PauseReplay,
	RestartReplica, Idle, Burst, RestartPGDNS, ReloadPGDNS,
	SmartReplica, SmartPrimary, AsyncCommits, DelayProbe, ReloadHosts, ProbeRole, Unfenced,
	CutPGDNSPrimary, CutPGDNSReplica, CutReplicaPrimary}

// NetKinds are the kinds that need the soak's own network namespace.
var NetKinds = []string{CutPGDNSPrimary, CutPGDNSReplica, CutReplicaPrimary}

// weights of each kind in a long run: failovers are the costliest and the
// most telling, the cheap faults are drawn more often.
var weights = map[string]int{KillFailover: 2, Switchover: 2, FreezeReplica: 2, FreezePrimary: 2,
	PauseReplay: 2, RestartReplica: 2, Idle: 1, Burst: 2, RestartPGDNS: 1, ReloadPGDNS: 1,
	SmartReplica: 1, SmartPrimary: 1, AsyncCommits: 2, DelayProbe: 2, ReloadHosts: 1, ProbeRole: 1, Unfenced: 1,
	CutPGDNSPrimary: 2, CutPGDNSReplica: 2, CutReplicaPrimary: 2}

// Compatibility of faults that run at once. Each kind is in one group;
// two faults may overlap unless they are of one kind, or their groups
// conflict:
//
//   - roles (failovers, a smart stop of the primary) own every node while
//     they run: they conflict with each other and with node faults;
//   - node faults (freeze, pause, restart, smart stop of a replica,
//     burst) act on one node the harness picks by role: one at a time, so
//     that two never pick the same node or a node a role change moves;
//   - pgdns faults (restart, reload, host-list and probe-role reloads)
//     each own pgdns's process or config file: one at a time;
//   - partitions, the delaying proxy, idle and asynchronous commits touch
//     no node's state and no file: they overlap anything (a partition
//     during a failover, a pgdns restart during a partition), other
//     partitions included, each kind once at a time.
func group(kind string) string {
	switch kind {
	case KillFailover, Switchover, SmartPrimary, Unfenced:
		return "roles"
	case FreezeReplica, FreezePrimary, PauseReplay, RestartReplica, SmartReplica, Burst:
		return "node"
	case RestartPGDNS, ReloadPGDNS, ReloadHosts, ProbeRole:
		return "pgdns"
	}
	return "free"
}

// Compatible reports whether faults of kinds a and b may run at once.
func Compatible(a, b string) bool {
	if a == b {
		return false
	}
	// While two hosts are writable, each answer is held to the newest
	// timeline: pgdns must be able to see the host that has it, so
	// nothing may hide it (a partition, a delayed probe path, a host
	// list without it).
	for _, pair := range [][2]string{{a, b}, {b, a}} {
		if pair[0] == Unfenced && (slices.Contains(NetKinds, pair[1]) || pair[1] == DelayProbe || pair[1] == ReloadHosts) {
			return false
		}
		// The proxied replica's late apply setting must not be copied
		// by a re-clone, nor survive its promotion.
		if pair[0] == DelayProbe && group(pair[1]) == "roles" {
			return false
		}
	}
	ga, gb := group(a), group(b)
	switch {
	case ga == "roles" && (gb == "roles" || gb == "node"), gb == "roles" && ga == "node":
		return false
	case ga == gb && ga != "free":
		return false
	}
	return true
}

// Fault is one planned fault: drawn from the seed alone, so a seed always
// gives the same schedule. Targets are picked relative to roles at the time
// (Pick modulo the number of replicas, in node order).
type Fault struct {
	N    int
	Kind string
	Gap  time.Duration // quiet time before it, when it does not overlap
	Dur  time.Duration // how long it lasts (freeze, pause, idle, cut, delay, before promote)
	Pick int
	Mode string // restart-replica: fast or immediate; cuts: both, to or from; reload-hosts: see reloadHosts
	MB   int    // burst: MB of WAL to write
	// Delay is what the proxy holds back queries by (delay-probe).
	Delay time.Duration
	// Overlap: start Into after the start of the fault before it, if that
	// one still runs and the two are compatible, instead of after every
	// running fault has ended and a Gap.
	Overlap bool
	Into    time.Duration
}

func (f Fault) String() string {
	s := fmt.Sprintf("#%d %s after %s", f.N, f.Kind, f.Gap.Round(time.Millisecond))
	if f.Overlap {
		s = fmt.Sprintf("#%d %s %s into the last if it runs and they are compatible, else after %s", f.N, f.Kind, f.Into.Round(time.Millisecond), f.Gap.Round(time.Millisecond))
	}
	if f.Dur > 0 {
		s += fmt.Sprintf(", for %s", f.Dur.Round(time.Millisecond))
	}
	if f.Delay > 0 {
		s += fmt.Sprintf(", delay %s", f.Delay.Round(time.Millisecond))
	}
	if f.Mode != "" {
		s += ", " + f.Mode
	}
	return s + fmt.Sprintf(", pick %d", f.Pick)
}

// Planner draws the schedule of a seed.
type Planner struct {
	rng   *rand.Rand
	kinds []string
	short []Fault
	n     int
}

// NewPlanner returns the schedule of seed over kinds (nil: all); short
// plays every kind once in a seeded order, otherwise kinds are drawn by
// weight without end.
func NewPlanner(seed uint64, short bool, kinds []string) *Planner {
	if kinds == nil {
		kinds = Kinds
	}
	p := &Planner{rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)), kinds: kinds}
	if short {
		order := append([]string(nil), kinds...)
		p.rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		// The short soak plays two overlaps for sure: a partition of
		// pgdns from the primary during a kill -9 failover, and a pgdns
		// restart during a partition of pgdns from a replica.
		order = pair(order, KillFailover, CutPGDNSPrimary)
		order = pair(order, CutPGDNSReplica, RestartPGDNS)
		for _, k := range order {
			f := p.draw(k)
			// Shorter faults keep make test near a minute and a half;
			// a failover's wait before its promotion stays as drawn.
			if k != KillFailover && k != Switchover && k != Unfenced {
				f.Dur /= 2
			}
			f.Overlap = false
			p.short = append(p.short, f)
		}
		for i := 1; i < len(p.short); i++ {
			if (p.short[i-1].Kind == KillFailover && p.short[i].Kind == CutPGDNSPrimary) ||
				(p.short[i-1].Kind == CutPGDNSReplica && p.short[i].Kind == RestartPGDNS) {
				p.short[i].Overlap, p.short[i].Into = true, 100*time.Millisecond
			}
		}
		// And issue 23's reproduction: the new primary of an unfenced
		// failover stopped while the superseded one runs on, and pgdns
		// restarted meanwhile (it must answer no primary, from its state
		// file): one more restart-pgdns, into the new primary's downtime.
		if i := slices.IndexFunc(p.short, func(f Fault) bool { return f.Kind == Unfenced }); i >= 0 {
			p.short[i].Mode = "new-stops"
			extra := p.draw(RestartPGDNS)
			extra.Overlap, extra.Into = true, p.short[i].Dur+p.short[i].Dur/2+300*time.Millisecond
			p.short = slices.Insert(p.short, i+1, extra)
		}
		for i := range p.short {
			p.short[i].N = i + 1
		}
	}
	return p
}

// pair moves b right after a in order, when both are there.
func pair(order []string, a, b string) []string {
	ia, ib := slices.Index(order, a), slices.Index(order, b)
	if ia < 0 || ib < 0 {
		return order
	}
	order = slices.Delete(order, ib, ib+1)
	ia = slices.Index(order, a)
	return slices.Insert(order, ia+1, b)
}

// Next returns the next fault; ok is false when a short plan is done.
func (p *Planner) Next() (f Fault, ok bool) {
	if p.short != nil {
		if p.n >= len(p.short) {
			return Fault{}, false
		}
		p.n++
		return p.short[p.n-1], true
	}
	total := 0
	for _, k := range p.kinds {
		total += weights[k]
	}
	r := p.rng.IntN(total)
	var kind string
	for _, k := range p.kinds {
		if r -= weights[k]; r < 0 {
			kind = k
			break
		}
	}
	p.n++
	f = p.draw(kind)
	return f, true
}

// draw fills in a fault of kind from the generator.
func (p *Planner) draw(kind string) Fault {
	f := Fault{N: p.n, Kind: kind, Pick: p.rng.IntN(1000)}
	if p.short != nil || f.N == 0 {
		f.N = len(p.short) + 1
	}
	f.Gap = time.Duration(1000+p.rng.IntN(2000)) * time.Millisecond
	f.Overlap = p.rng.IntN(2) == 0
	f.Into = time.Duration(100+p.rng.IntN(1500)) * time.Millisecond
	switch kind {
	case KillFailover, Switchover:
		f.Dur = time.Duration(200+p.rng.IntN(800)) * time.Millisecond
	case Unfenced:
		f.Dur = time.Duration(500+p.rng.IntN(1500)) * time.Millisecond
		f.Mode = []string{"old-stops", "new-stops"}[p.rng.IntN(2)]
	case FreezeReplica, FreezePrimary, PauseReplay:
		f.Dur = time.Duration(500+p.rng.IntN(2500)) * time.Millisecond
	case Idle, AsyncCommits:
		f.Dur = time.Duration(2000+p.rng.IntN(3000)) * time.Millisecond
	case Burst:
		f.MB = 2 + p.rng.IntN(7)
	case RestartReplica:
		f.Mode = []string{"fast", "immediate"}[p.rng.IntN(2)]
	case DelayProbe:
		f.Dur = time.Duration(1000+p.rng.IntN(3000)) * time.Millisecond
		f.Delay = time.Duration(20+p.rng.IntN(200)) * time.Millisecond
	case ReloadHosts:
		f.Dur = time.Duration(1000+p.rng.IntN(3000)) * time.Millisecond
		f.Mode = []string{"node", "foreign", "nodes", "dup-foreign"}[p.rng.IntN(4)]
	case ProbeRole:
		f.Dur = time.Duration(3000+p.rng.IntN(5000)) * time.Millisecond
	case CutPGDNSPrimary, CutPGDNSReplica, CutReplicaPrimary:
		f.Dur = time.Duration(500+p.rng.IntN(4500)) * time.Millisecond
		f.Mode = []string{dropBoth, dropBoth, dropTo, dropFrom}[p.rng.IntN(4)]
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
	return f
}

// faultRecord is what happened when a fault was injected.
type faultRecord struct {
	Fault
	detail string
	start  time.Time
	end    time.Time // undone (before the wait for healing)
	healed time.Time // the cluster streaming again (zero if it never did)
	with   []string  // kinds of the faults running when it started
	err    error
	done   chan struct{}
}

// inject plays the schedule until it ends (short) or Duration is up. A
// fault planned to overlap starts Into after the start of the one before
// it, if that one still runs, fewer than MaxFaults run and it is
// compatible with each of them; any other fault waits until every running
// fault has ended and the cluster healed, then its Gap.
func (h *harness) inject(ctx context.Context) []*faultRecord {
	plan := NewPlanner(h.opts.Seed, h.opts.Short, h.kinds())
	deadline := time.Now().Add(h.opts.Duration)
	var (
		out    []*faultRecord
		mu     sync.Mutex
		active []*faultRecord
		wg     sync.WaitGroup
	)
	running := func() []*faultRecord {
		mu.Lock()
		defer mu.Unlock()
		var still []*faultRecord
		for _, r := range active {
			select {
			case <-r.done:
			default:
				still = append(still, r)
			}
		}
		active = still
		return append([]*faultRecord(nil), still...)
	}
	defer wg.Wait()
	for {
		f, ok := plan.Next()
		if !ok || (!h.opts.Short && time.Now().Add(f.Gap).After(deadline)) || ctx.Err() != nil {
			return out
		}
		overlapped := false
		if f.Overlap && h.opts.MaxFaults > 1 && len(out) > 0 {
			last := out[len(out)-1]
			select {
			case <-ctx.Done():
				return out
			case <-last.done:
			case <-time.After(time.Until(last.start.Add(f.Into))):
			}
			now := running()
			overlapped = len(now) > 0 && len(now) < h.opts.MaxFaults
			for _, r := range now {
				overlapped = overlapped && Compatible(f.Kind, r.Kind)
			}
		}
		if !overlapped {
			for _, r := range running() {
				select {
				case <-ctx.Done():
					return out
				case <-r.done:
				}
			}
			gap := f.Gap
			if h.opts.Short {
				gap /= 3 // the short soak keeps make test near a minute and a half
			}
			select {
			case <-ctx.Done():
				return out
			case <-time.After(gap):
			}
		}
		r := &faultRecord{Fault: f, start: time.Now(), done: make(chan struct{})}
		for _, a := range running() {
			r.with = append(r.with, a.Kind)
		}
		if len(r.with) > 0 {
			h.logf("fault %s, while %s run", f, strings.Join(r.with, " and "))
		} else {
			h.logf("fault %s", f)
		}
		mu.Lock()
		active = append(active, r)
		out = append(out, r)
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(r.done)
			h.play(ctx, r)
		}()
	}
}

// play injects one fault, undoes it and waits until the cluster heals.
func (h *harness) play(ctx context.Context, r *faultRecord) {
	r.detail, r.err = h.apply(ctx, r.Fault)
	r.end = time.Now()
	if r.err != nil {
		h.note("fault %s: %v", r.Fault, r.err)
	}
	hctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := h.waitHealed(hctx); err != nil {
		h.note("after fault #%d the cluster did not heal: %v; re-cloning the stragglers", r.N, err)
		h.repair(hctx)
	} else {
		r.healed = time.Now()
	}
	h.logf("  #%d %s: %s; healed after %s", r.N, r.Kind, r.detail, since(r.start, r.healed))
}

// kinds is what this run can play: partitions need the soak's own network
// namespace.
func (h *harness) kinds() []string {
	var out []string
	for _, k := range Kinds {
		if (slices.Contains(NetKinds, k) && h.cuts == nil) || (h.opts.Kinds != nil && !slices.Contains(h.opts.Kinds, k)) {
			continue
		}
		out = append(out, k)
	}
	return out
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
	if primary == nil {
		primary = w.lastPrimary()
	}
	fctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	switch f.Kind {
	case KillFailover, Switchover:
		return h.failover(fctx, f, primary, replicas)
	case Unfenced:
		return h.unfenced(fctx, f, primary, replicas)
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
	case SmartReplica:
		return h.smartRestart(fctx, replica)
	case SmartPrimary:
		return h.smartRestart(fctx, primary)
	case Idle:
		h.idle.Store(true)
		time.Sleep(f.Dur)
		h.idle.Store(false)
		return "no writes", nil
	case AsyncCommits:
		h.async.Store(true)
		time.Sleep(f.Dur)
		h.async.Store(false)
		return "every write with synchronous_commit = off", nil
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
	case ReloadHosts:
		return h.reloadHosts(f)
	case ProbeRole:
		// The other role for a while: without pg_monitor, or (with
		// PlainProbe) the superuser.
		usual, other := h.probeUsers()
		if err := h.reconfigure(func(c *pgdnsSetup) { c.probeUser = other }); err != nil {
			return "", err
		}
		time.Sleep(f.Dur)
		return "probed as " + other + " for a while", h.reconfigure(func(c *pgdnsSetup) { c.probeUser = usual })
	case DelayProbe:
		return h.delayProbe(fctx, f)
	case CutPGDNSPrimary, CutPGDNSReplica, CutReplicaPrimary:
		return h.cut(f, primary, replica)
	}
	return "", fmt.Errorf("unknown fault %q", f.Kind)
}

// applyDelay is how late the proxied node applies WAL while its probe
// path is delayed: a true lag above lag-50ms's bound by less than most
// probe delays drawn.
const applyDelay = 80 * time.Millisecond

// delayProbe makes the proxy hold back what pgdns sends to the proxied
// node by f.Delay for f.Dur. A replica there applies WAL applyDelay late
// meanwhile: its probe's round trip then ends f.Delay after the server
// read its position, and only a lag bound taken at that end keeps it out
// of lag-50ms; one taken at the round trip's start or midpoint passes it
// while it lacks commits older than the bound (issue 22.2).
func (h *harness) delayProbe(ctx context.Context, f Fault) (string, error) {
	n := h.w.pg.Nodes[proxied-1]
	lagging := h.w.currentPrimary() != n
	how := fmt.Sprintf("pgdns's queries to %s held back %s", h.pathIP(pathProxy, proxied), f.Delay)
	if lagging {
		if err := setApplyDelay(ctx, n, applyDelay); err != nil {
			return how, err
		}
		how += fmt.Sprintf(", the replica there applying WAL %s late", applyDelay)
	}
	h.proxy.setDelay(f.Delay)
	time.Sleep(f.Dur)
	h.proxy.setDelay(0)
	if lagging {
		return how, setApplyDelay(ctx, n, 0)
	}
	return how, nil
}

// setApplyDelay sets a replica's recovery_min_apply_delay (0: reset).
func setApplyDelay(ctx context.Context, n *pgtest.Node, d time.Duration) error {
	sql := fmt.Sprintf("ALTER SYSTEM SET recovery_min_apply_delay = '%dms'", d.Milliseconds())
	if d == 0 {
		sql = "ALTER SYSTEM RESET recovery_min_apply_delay"
	}
	if err := execOn(ctx, n, sql); err != nil {
		return err
	}
	return execOn(ctx, n, "SELECT pg_reload_conf()")
}

// cut drops packets on one path for f.Dur, then heals it.
func (h *harness) cut(f Fault, primary, replica *pgtest.Node) (string, error) {
	var ip, what string
	switch f.Kind {
	case CutPGDNSPrimary:
		ip, what = h.pathIP(pathPGDNS, h.nodeIndex(primary.IP)), "pgdns and the primary "+primary.Addr()
	case CutPGDNSReplica:
		ip, what = h.pathIP(pathPGDNS, h.nodeIndex(replica.IP)), "pgdns and the replica "+replica.Addr()
	case CutReplicaPrimary:
		ip, what = h.upstreamPath(replica.IP, primary.IP), "the replica "+replica.Addr()+" and the primary "+primary.Addr()
	}
	chain := fmt.Sprintf("f%d", f.N)
	if err := h.cuts.cut(chain, ip, f.Mode); err != nil {
		return "", err
	}
	time.Sleep(f.Dur)
	return fmt.Sprintf("dropped packets %s between %s (%s)", map[string]string{dropBoth: "both ways", dropTo: "one way, to the server", dropFrom: "one way, from the server"}[f.Mode], what, ip),
		h.cuts.heal(chain)
}

// reloadHosts reloads pgdns with another host list for f.Dur, then with
// the usual one again. Modes: "node" leaves out the picked node (a
// replica, or the primary); "nodes" every node but the picked one;
// "foreign" the foreign host; "dup-foreign" every node but the picked one,
// and lists the foreign host twice, by two addresses of one server (one
// real host and one foreign server spelled twice: the foreign one must
// not become the cluster's by counting its spellings).
func (h *harness) reloadHosts(f Fault) (string, error) {
	mode := f.Mode
	if h.w.foreign == nil && (mode == "foreign" || mode == "dup-foreign") {
		mode = "node"
	}
	picked := h.nodeIndex(h.w.pg.Nodes[f.Pick%len(h.w.pg.Nodes)].IP)
	var what string
	change := func(c *pgdnsSetup) {
		switch mode {
		case "foreign":
			c.removed[foreignIdx], what = true, "without the foreign host"
		case "node":
			c.removed[picked], what = true, "without "+h.pathIP(pathMain, picked)
		case "nodes", "dup-foreign":
			for i := 1; i <= 3; i++ {
				c.removed[i] = i != picked
			}
			what = "with only " + h.pathIP(pathMain, picked) + " of the cluster's nodes"
			if mode == "dup-foreign" {
				c.dupForeign, what = true, what+" and the foreign host listed twice"
			}
		}
	}
	if err := h.reconfigure(change); err != nil {
		return "", err
	}
	time.Sleep(f.Dur)
	return "reloaded " + what + ", then as usual", h.reconfigure(func(c *pgdnsSetup) { clear(c.removed); c.dupForeign = false })
}

// smartRestart stops n with pg_ctl stop -m smart (new sessions are refused,
// the running ones may finish) and starts it again. The harness lets go
// of its own sessions there; should the stop not complete in
// smartTimeout, the sessions still open are listed, by the path they came
// by, and only sessions of pgdns's left is a violation: pgdns must never
// be what keeps a smart shutdown from completing (it keeps its session to
// a stopping primary while other client sessions remain, to see what they
// write: probe/lingering.go).
func (h *harness) smartRestart(ctx context.Context, n *pgtest.Node) (string, error) {
	w := h.w
	w.restarting(n)
	w.drain(n, true)
	defer w.drain(n, false)
	sctx, cancel := context.WithTimeout(ctx, smartTimeout)
	err := n.Stop(sctx, "smart")
	cancel()
	how := "stopped " + n.Addr() + " smartly"
	if err != nil {
		held := sessionsOf(n, h)
		how = fmt.Sprintf("smart stop of %s not done in %s (sessions left: %s); stopped fast", n.Addr(), smartTimeout, held)
		if onlyPgdns(held) {
			h.violation(question{class: "smart-shutdown", name: n.Addr(), sent: time.Now()},
				"pgdns never keeps a smart shutdown from completing",
				fmt.Sprintf("pg_ctl stop -m smart of %s had not completed after %s; sessions left: %s", n.Addr(), smartTimeout, held))
		}
		if err := n.Stop(ctx, "fast"); err != nil {
			return how, err
		}
	}
	return how + ", started again", n.Start(ctx)
}

// onlyPgdns reports whether every session sessionsOf listed in held is
// on pgdns's path.
func onlyPgdns(held string) bool {
	if held == "none" {
		return false
	}
	for _, s := range strings.Split(held, "; ") {
		if !strings.Contains(s, "pgdns") {
			return false
		}
	}
	return true
}

// smartTimeout is how long a smart shutdown may take: the harness's own
// sessions are gone at once, a client's check lasts milliseconds, and a
// session left open by a cut connection ends within the servers' TCP
// keepalive bound (3 s).
const smartTimeout = 10 * time.Second

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
		w.primary, w.prev, w.demotedAt[old.Addr()], w.killedAt[old.Addr()] = nil, old, now, now
		w.mu.Unlock()
		how += "killed " + old.Addr()
	} else {
		if err := old.Stop(ctx, "fast"); err != nil {
			return "", err
		}
		w.mu.Lock()
		w.primary, w.prev, w.demotedAt[old.Addr()] = nil, old, time.Now()
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
	tl, fork, err := h.promote(ctx, cand, nil)
	if err != nil {
		return how, err
	}
	how += fmt.Sprintf(", promoted %s to timeline %d (timeline %d ended at %s)", cand.Addr(), tl, tl-1, fork)
	rejoined, err := h.rejoin(ctx, cand, other, old, fork)
	return how + rejoined, err
}

// promote promotes cand and records it as the primary on its new
// timeline; then, under the world's lock, also runs also (nil: nothing).
// It returns the new timeline and where the one before it ended.
func (h *harness) promote(ctx context.Context, cand *pgtest.Node, also func(now time.Time)) (int, LSN, error) {
	w := h.w
	// Promoting from the moment it is asked: it may be writable (and
	// answered so) before pg_ctl promote returns, but it is only known to
	// be writable once it has returned; the grace counts from then.
	w.mu.Lock()
	w.promotedAt[cand.Addr()], w.promoting[cand.Addr()] = time.Now(), true
	w.mu.Unlock()
	err := cand.Promote(ctx)
	done := time.Now()
	w.mu.Lock()
	w.promotedAt[cand.Addr()], w.promoting[cand.Addr()] = done, false
	w.mu.Unlock()
	if err != nil {
		return 0, 0, err
	}
	var (
		tl    int
		forks map[int]LSN
	)
	// The new primary may be slow to take connections under load.
	testkit.Poll(5*time.Second, 250*time.Millisecond, func() bool {
		tl, forks, err = history(ctx, cand)
		return err == nil
	})
	if err != nil {
		return 0, 0, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.primary, w.timeline = cand, tl
	w.born[tl] = done
	for t, end := range forks {
		w.forks[t] = end
	}
	if also != nil {
		also(done)
	}
	return tl, w.forks[tl-1], nil
}

// rejoin points other at the new primary cand (or re-clones it when it
// has WAL past the fork) and re-clones the old primary from cand.
func (h *harness) rejoin(ctx context.Context, cand, other, old *pgtest.Node, fork LSN) (string, error) {
	w := h.w
	var how string
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

// unfenced promotes a replica while the primary runs on, writable on the
// timeline the promotion supersedes (a failover without fencing, as after
// a network split), for f.Dur; then the old primary is stopped and
// re-cloned. In mode "new-stops" the new primary is stopped first and
// stays down for f.Dur while the old one still runs: no host may then be
// answered as primary (the old one is superseded, whatever pgdns has seen
// since it started, with its state file); then the new one starts again.
// Writes the old primary took until Grace after the promotion are lost
// with it, as with a kill; any later one pgdns should not have sent there.
func (h *harness) unfenced(ctx context.Context, f Fault, old *pgtest.Node, replicas []*pgtest.Node) (string, error) {
	w := h.w
	cand := replicas[f.Pick%len(replicas)]
	other := replicas[(f.Pick+1)%len(replicas)]
	tl, fork, err := h.promote(ctx, cand, func(now time.Time) {
		w.prev, w.demotedAt[old.Addr()], w.killedAt[old.Addr()] = old, now, now.Add(Grace)
	})
	how := fmt.Sprintf("promoted %s to timeline %d (timeline %d ended at %s) while %s ran on", cand.Addr(), tl, tl-1, fork, old.Addr())
	if err != nil {
		return how, err
	}
	time.Sleep(f.Dur)
	if f.Mode == "new-stops" {
		w.mu.Lock()
		now := time.Now()
		w.primary, w.demotedAt[cand.Addr()] = nil, now
		if w.born[tl].Add(SeeGrace).After(now) {
			// Stopped before pgdns surely saw it: no answer is held to
			// its timeline until it is up again.
			w.born[tl] = now.Add(24 * time.Hour)
		}
		w.mu.Unlock()
		if err := cand.Stop(ctx, "fast"); err != nil {
			return how, err
		}
		how += fmt.Sprintf(", stopped %s for %s", cand.Addr(), f.Dur.Round(time.Millisecond))
		time.Sleep(f.Dur)
		w.restarting(cand)
		if err := cand.Start(ctx); err != nil {
			return how, err
		}
		w.mu.Lock()
		w.primary, w.promotedAt[cand.Addr()] = cand, time.Now()
		if w.born[tl].After(time.Now()) {
			w.born[tl] = time.Now() // up again: seen within SeeGrace
		}
		w.mu.Unlock()
		how += ", started it again"
	}
	rejoined, err := h.rejoin(ctx, cand, other, old, fork)
	return how + rejoined, err
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
	if testkit.Poll(5*time.Second, 50*time.Millisecond, func() bool {
		if err := replica.QueryOnce(ctx, "SELECT coalesce(pg_last_wal_receive_lsn(), '0/0')::text", &last); err != nil {
			return false
		}
		got, err := ParseLSN(last)
		return err == nil && got > want
	}) {
		return true, nil
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

// waitHealed waits until the primary streams to both replicas, for as
// long as ctx lasts (every caller gives it a deadline; a minute without).
func (h *harness) waitHealed(ctx context.Context) error {
	within := time.Minute
	if d, ok := ctx.Deadline(); ok {
		within = time.Until(d)
	}
	var n int
	var err error
	healed := testkit.Poll(within, 50*time.Millisecond, func() bool {
		if ctx.Err() != nil {
			return true // cancelled: stop waiting, reported below
		}
		p := h.w.currentPrimary()
		if p == nil {
			return false
		}
		err = p.QueryOnce(ctx, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'", &n)
		return err == nil && n == len(h.w.pg.Nodes)-1
	})
	if healed && ctx.Err() == nil {
		return nil
	}
	return fmt.Errorf("%d replicas streaming (%v)", n, errors.Join(err, ctx.Err()))
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
