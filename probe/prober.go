package probe

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgdns/pgdns/zone"
)

// Config is what the prober needs to know.
type Config struct {
	Interval time.Duration // between two probes of one host
	Timeout  time.Duration // hard deadline of one probe, connect included
	MaxFails int           // consecutive failures before a host is down
	Clusters []ClusterConfig
	Hooks    Hooks

	// Inactive probers probe but publish nothing until Activate: a
	// reloaded configuration warms up beside the running one.
	Inactive bool

	// MinRefreshGap is the least time between the starts of two Refresh
	// rounds of one cluster (dns.lsn_refresh_min_gap).
	MinRefreshGap time.Duration

	// FluxInterval and FluxDuration: how often the hosts of a cluster in
	// flux are probed, and for how long at most (flux.go).
	FluxInterval, FluxDuration time.Duration

	// Networks map client addresses to locations (dns.locations); every
	// snapshot carries them, so a reload replaces them with the hosts.
	Networks *zone.Networks

	// Remembered is what a previous run of pgdns learned, by cluster
	// name (remember.go): the prober starts from it, before its first
	// probe. An entry whose identity is not a cluster's pinned one is
	// not applied; one under a name not configured waits for a cluster
	// of its identity (orphans.go).
	Remembered map[string]Remembered
}

// Hooks let the caller observe the prober, for metrics. Nil hooks are
// skipped. They are called from the prober's goroutines and must not block.
type Hooks struct {
	// ProbeDone is called after every probe of a host.
	ProbeDone func(cluster, addr string, took time.Duration, err error)
	// RoleChanged is called once per change of a host's role.
	RoleChanged func(cluster, addr string, from, to zone.Role)
	// SplitBrain is called once each time a cluster enters split brain.
	SplitBrain func(cluster string)
	// Published is called after each snapshot this prober publishes,
	// with the snapshot published before it (by this prober or the one it
	// took over from; never nil): the caller derives events from the two
	// (zone.Changes). A prober that is not active calls nothing.
	Published func(prev, next *zone.Snapshot)
	// RefreshRound is called when a Refresh round starts probing.
	RefreshRound func(cluster string)
	// RefreshCoalesced is called for each Refresh call that starts no
	// round of its own, with why (CoalescedRunning, CoalescedMinGap).
	RefreshCoalesced func(cluster string, why Coalesced)
	// FluxProbes is called for each round of flux probes of a cluster,
	// with the number of hosts kicked.
	FluxProbes func(cluster string, hosts int)
	// LeaderUnsure is called, at most once per publish for each cluster
	// read from Patroni, while a writable host is not the member holding
	// the leader key as last reported: the caller should read it again
	// (authority.go).
	LeaderUnsure func(cluster string)
	// Learned is called with what the prober remembers (remember.go)
	// each time that changes, while the prober publishes; never on a
	// probe that teaches nothing new. The callee must not modify it.
	Learned func(map[string]Remembered)
}

// ClusterConfig lists the hosts of one cluster.
type ClusterConfig struct {
	Name      string
	Hosts     []string // "host:port"
	AsyncOnly bool     // leave synchronous standbys out of replica answers
	SystemID  uint64   // the cluster's system identifier when pinned in config, else 0
	// MinTimeline, with SystemID: the newest timeline is never taken to
	// be lower (clusters.<name>.min_timeline). 0: no floor.
	MinTimeline uint32

	// Locations gives hosts their location: "host:port" → name. A host
	// not in it has none.
	Locations map[string]string

	// Patroni says the cluster is read from Patroni: only the member
	// holding its leader key may be the primary. Leader is that member's
	// address as Patroni last reported it ("" when none holds it); the
	// caller keeps it current with SetLeader.
	Patroni bool
	Leader  string
}

// StaleAfter is how old a host's last good probe may be before pgdns no
// longer vouches for it: max_fails probe intervals plus one probe's
// deadline. A host that answers nothing at all (frozen, cut off) leaves the
// answers by then, before max_fails timeouts have marked it down.
func (c Config) StaleAfter() time.Duration {
	return time.Duration(c.MaxFails)*c.Interval + c.Timeout
}

// maxBackoff caps the wait between probes of a host that is down, so a
// restarted server is back in answers within seconds.
const maxBackoff = 2 * time.Second

// Prober probes every configured host and publishes snapshots to a Table.
type Prober struct {
	cfg        Config
	table      *zone.Table
	newChecker NewCheckerFunc
	log        *slog.Logger
	now        func() time.Time
	defCluster string

	results chan result
	kicks   []chan struct{} // per host (flat index): probe now
	driven  []atomic.Int64  // per host: when a round last kicked it (Unix ns)

	active       atomic.Bool
	activate     chan Knowledge // tells the aggregator to adopt it, then publish at once
	stopped      chan struct{}  // closed when Run returns
	knowledgeReq chan chan Knowledge
	leaders      chan leaderUpdate  // SetLeader (authority.go)
	forgets      chan forgetRequest // ForgetTimeline (authority.go)
	ready        chan struct{}      // closed when every host has had a result
	readyOnce    sync.Once

	refreshMu  sync.Mutex
	refreshing map[string]*refreshes         // by cluster name
	published  atomic.Pointer[zone.Snapshot] // this prober's last snapshot, for Refresh

	// Owned by the aggregator goroutine (Run).
	state     []*zone.Cluster // observed fields of every host, configured order
	history   map[*zone.Host]*walHistory
	lastExact map[*zone.Host]zone.TimelineEnd // a replica\'s last exact timeline and its replay there (timelines.go)
	replays   map[*zone.Host]replayWatch      // a replica's earliest reading at its replay position (forks.go)
	timelines []map[uint32]timelineHistory    // per cluster: what is known of each timeline's history
	probed    int                             // hosts that have had at least one result
	done      []bool
	last      *zone.Snapshot
	rounds    []*round // per cluster: the probe round under way (rounds.go)
	flux      []flux   // per cluster: the flux episode (flux.go)
	// Per host (flat index): the start of its last result, and when a
	// round last kicked it (rounds.go).
	answered, roundKicked []time.Time

	reported  map[string]Remembered // what Hooks.Learned last heard (remember.go); aggregator's
	restoring map[*zone.Host]fork   // remembered forks awaiting the host's first sample (remember.go)
	// Knowledge of clusters no longer configured, by their old name, for
	// a configured one of the same identity (orphans.go); aggregator's.
	orphans                         map[string]clusterKnowledge
	orphansChanged, orphansReported uint64 // changes of orphans, and the last one Hooks.Learned heard of
	seeded                          []bool // per cluster: its identity came from Config.Remembered (remember.go)
}

type result struct {
	cluster, host int
	started       time.Time
	ticked        bool // probed on the host's own tick, not on a kick
	sample        Sample
	err           error
}

// New returns a Prober. Run starts it. defaultCluster names the cluster
// answered for names without a cluster label.
func New(cfg Config, table *zone.Table, newChecker NewCheckerFunc, log *slog.Logger, defaultCluster string) *Prober {
	p := &Prober{
		cfg: cfg, table: table, newChecker: newChecker, log: log, now: time.Now, defCluster: defaultCluster,
		results:      make(chan result, 64),
		history:      map[*zone.Host]*walHistory{},
		lastExact:    map[*zone.Host]zone.TimelineEnd{},
		replays:      map[*zone.Host]replayWatch{},
		restoring:    map[*zone.Host]fork{},
		refreshing:   map[string]*refreshes{},
		activate:     make(chan Knowledge, 1),
		stopped:      make(chan struct{}),
		knowledgeReq: make(chan chan Knowledge),
		leaders:      make(chan leaderUpdate, 8),
		forgets:      make(chan forgetRequest),
		ready:        make(chan struct{}),
	}
	p.active.Store(!cfg.Inactive)
	for _, cc := range cfg.Clusters {
		c := &zone.Cluster{Name: cc.Name, Primary: -1, AsyncOnly: cc.AsyncOnly,
			Identity: cc.SystemID, IdentityPinned: cc.SystemID != 0, LeaderKey: cc.Patroni, Leader: cc.Leader}
		for _, addr := range cc.Hosts {
			c.Hosts = append(c.Hosts, zone.Host{Cluster: cc.Name, Addr: addr, Location: cc.Locations[addr]})
		}
		p.state = append(p.state, c)
		p.timelines = append(p.timelines, map[uint32]timelineHistory{})
	}
	for _, c := range p.state {
		p.done = append(p.done, make([]bool, len(c.Hosts))...)
	}
	for range p.done {
		p.kicks = append(p.kicks, make(chan struct{}, 1))
	}
	p.driven = make([]atomic.Int64, len(p.done))
	p.answered, p.roundKicked = make([]time.Time, len(p.done)), make([]time.Time, len(p.done))
	p.rounds = make([]*round, len(p.state))
	p.flux = make([]flux, len(p.state))
	p.seeded = make([]bool, len(p.state))
	p.seed(cfg.Remembered)
	return p
}

// Run probes until ctx is done. It returns after every host goroutine has
// stopped and closed its connection.
func (p *Prober) Run(ctx context.Context) {
	defer close(p.stopped)
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
	var holdC <-chan time.Time // nil while no result is held
	var lastPublish time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-fluxC:
			if !p.fluxRound() {
				fluxC = nil
			}
			continue
		case r := <-p.results:
			steady := p.take(r)
			// Take whatever else is queued, then publish once.
			for drained := false; !drained; {
				select {
				case r := <-p.results:
					steady = p.take(r) && steady
				default:
					drained = true
				}
			}
			if until, ok := p.holdUntil(lastPublish); steady && ok {
				// Held for the round under way (publish.go).
				if holdC == nil {
					hold.Reset(time.Until(until))
					holdC = hold.C
				}
				continue
			}
		case <-holdC:
			if until, ok := p.closingUntil(); ok {
				hold.Reset(time.Until(until)) // held on for the closing probe (publish.go)
				continue
			}
		case <-tick.C:
		case k := <-p.activate:
			// Adopt before publishing anything: the first snapshot
			// already knows what the predecessor knew.
			p.adopt(k)
			p.active.Store(true)
		case reply := <-p.knowledgeReq:
			reply <- p.export()
			continue
		case u := <-p.leaders:
			p.setLeader(u)
		case r := <-p.forgets:
			ci, before, err := p.forget(r)
			if err != nil {
				r.reply <- forgetReply{err: err}
				continue
			}
			p.publish() // decides the newest timeline again, from what is proven now
			r.reply <- forgetReply{before: before, after: p.state[ci].NewestTimeline}
		}
		if holdC != nil {
			hold.Stop()
			holdC = nil
		}
		p.publish()
		lastPublish = time.Now()
		p.published.Store(p.last)
		p.reportLearned()
		p.leaderUnsure(p.last)
		if fluxC == nil && p.fluxRound() {
			fluxTick.Reset(fluxInterval)
			fluxC = fluxTick.C
		}
		p.finishRefreshes()
	}
}

// Ready is closed once every host has been probed at least once.
func (p *Prober) Ready() <-chan struct{} { return p.ready }

// Activate makes an inactive prober publish, at once, after it has
// adopted what predecessor (the prober it replaces, or nil) has learned.
// The predecessor must still be running.
func (p *Prober) Activate(ctx context.Context, predecessor *Prober) {
	var k Knowledge
	if predecessor != nil {
		k = predecessor.knowledge(ctx)
	}
	select {
	case p.activate <- k:
	case <-ctx.Done():
	}
}

// Deactivate stops a prober from publishing; it keeps probing until its
// Run ends.
func (p *Prober) Deactivate() { p.active.Store(false) }

// watch probes one host every interval, and at once when kicked, until
// ctx is done. At most one probe of the host is in flight, and each has a
// hard deadline, so a hung host delays nobody but itself.
func (p *Prober) watch(ctx context.Context, ci, hi int, addr string) {
	checker, err := p.newChecker(addr)
	if err != nil {
		p.send(ctx, result{cluster: ci, host: hi, started: time.Now(), err: err})
		return
	}
	defer checker.Close()

	flat := p.flatIndex(ci, hi)
	kick := p.kicks[flat]
	tick := time.NewTicker(p.cfg.Interval)
	defer tick.Stop()
	fails := 0
	var notBefore, lastStart time.Time
	for kicked := false; ; {
		if kicked || (!time.Now().Before(notBefore) && !p.skipTick(flat, lastStart)) {
			start := time.Now()
			lastStart = start
			pctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
			s, err := checker.Check(pctx)
			cancel()
			if ctx.Err() != nil {
				return
			}
			if hook := p.cfg.Hooks.ProbeDone; hook != nil {
				hook(p.state[ci].Name, addr, time.Since(start), err)
			}
			p.send(ctx, result{cluster: ci, host: hi, started: start, ticked: !kicked, sample: s, err: err})
			if err == nil {
				fails = 0
				notBefore = time.Time{}
			} else if fails++; fails >= p.cfg.MaxFails {
				// Down: back off, doubling up to maxBackoff.
				wait := p.cfg.Interval << min(fails-p.cfg.MaxFails+1, 16)
				notBefore = time.Now().Add(min(wait, max(maxBackoff, p.cfg.Interval)) - p.cfg.Interval/2)
			}
		}
		var seen error
		kicked, seen = p.idle(ctx, checker, tick.C, kick)
		if ctx.Err() != nil {
			return
		}
		if seen != nil {
			// The server went away between probes: say so now, and let
			// the next probe (on the tick, or sooner in flux) reconnect.
			fails++
			p.send(ctx, result{cluster: ci, host: hi, started: time.Now(), err: seen})
		}
	}
}

// idle waits for the host's next probe: its tick, a kick, or the end of
// ctx. Meanwhile a checker that can watches its connection; should the
// server go away, idle returns at once with the definitive error it saw.
func (p *Prober) idle(ctx context.Context, checker Checker, tick <-chan time.Time, kick <-chan struct{}) (kicked bool, seen error) {
	w, ok := checker.(Watcher)
	if !ok {
		select {
		case <-ctx.Done():
		case <-tick:
		case <-kick:
			return true, nil
		}
		return false, nil
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- w.Watch(wctx) }()
	select {
	case <-ctx.Done():
	case <-tick:
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

// take records result r and moves its cluster's round along; it reports
// whether r was steady (publish.go).
func (p *Prober) take(r result) bool {
	steady := p.steady(r)
	p.record(r)
	p.advanceRound(r)
	return steady
}

func (p *Prober) send(ctx context.Context, r result) {
	select {
	case p.results <- r:
	case <-ctx.Done():
	}
}
