package probe

import (
	"context"
	"log/slog"
	"strings"
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
}

// ClusterConfig lists the hosts of one cluster.
type ClusterConfig struct {
	Name      string
	Hosts     []string // "host:port"
	AsyncOnly bool     // leave synchronous standbys out of replica answers
}

// StaleAfter is how old a host's last good probe may be before pgdns no
// longer vouches for it: max_fails probes that each took the full timeout
// would have marked it down by then.
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

	active    atomic.Bool
	activate  chan struct{} // tells the aggregator to publish at once
	ready     chan struct{} // closed when every host has had a result
	readyOnce sync.Once

	refreshMu  sync.Mutex
	refreshing map[string]*refresh // by cluster name

	// Owned by the aggregator goroutine (Run).
	state    []*zone.Cluster // observed fields of every host, configured order
	history  map[*zone.Host]*walHistory
	observed map[*zone.Host][]zone.TimelineEnd // timeline switches seen by the probe
	probed   int                               // hosts that have had at least one result
	done     []bool
	last     *zone.Snapshot
}

type result struct {
	cluster, host int
	started       time.Time
	sample        Sample
	err           error
}

// New returns a Prober. Run starts it. defaultCluster names the cluster
// answered for names without a cluster label.
func New(cfg Config, table *zone.Table, newChecker NewCheckerFunc, log *slog.Logger, defaultCluster string) *Prober {
	p := &Prober{
		cfg: cfg, table: table, newChecker: newChecker, log: log, now: time.Now, defCluster: defaultCluster,
		results:    make(chan result, 64),
		history:    map[*zone.Host]*walHistory{},
		observed:   map[*zone.Host][]zone.TimelineEnd{},
		refreshing: map[string]*refresh{},
		activate:   make(chan struct{}, 1),
		ready:      make(chan struct{}),
	}
	p.active.Store(!cfg.Inactive)
	for _, cc := range cfg.Clusters {
		c := &zone.Cluster{Name: cc.Name, Primary: -1, AsyncOnly: cc.AsyncOnly}
		for _, addr := range cc.Hosts {
			c.Hosts = append(c.Hosts, zone.Host{Cluster: cc.Name, Addr: addr})
		}
		p.state = append(p.state, c)
	}
	for _, c := range p.state {
		p.done = append(p.done, make([]bool, len(c.Hosts))...)
	}
	for range p.done {
		p.kicks = append(p.kicks, make(chan struct{}, 1))
	}
	return p
}

// Run probes until ctx is done. It returns after every host goroutine has
// stopped and closed its connection.
func (p *Prober) Run(ctx context.Context) {
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
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-p.results:
			p.record(r)
			// Take whatever else is queued, then publish once.
			for drained := false; !drained; {
				select {
				case r := <-p.results:
					p.record(r)
				default:
					drained = true
				}
			}
		case <-tick.C:
		case <-p.activate:
		}
		p.publish()
		p.finishRefreshes()
	}
}

// Ready is closed once every host has been probed at least once.
func (p *Prober) Ready() <-chan struct{} { return p.ready }

// Activate makes an inactive prober publish, at once.
func (p *Prober) Activate() {
	p.active.Store(true)
	select {
	case p.activate <- struct{}{}:
	default:
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

	kick := p.kicks[p.flatIndex(ci, hi)]
	tick := time.NewTicker(p.cfg.Interval)
	defer tick.Stop()
	fails := 0
	var notBefore time.Time
	for kicked := false; ; {
		if kicked || !time.Now().Before(notBefore) {
			start := time.Now()
			pctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
			s, err := checker.Check(pctx)
			cancel()
			if ctx.Err() != nil {
				return
			}
			if hook := p.cfg.Hooks.ProbeDone; hook != nil {
				hook(p.state[ci].Name, addr, time.Since(start), err)
			}
			p.send(ctx, result{cluster: ci, host: hi, started: start, sample: s, err: err})
			if err == nil {
				fails = 0
				notBefore = time.Time{}
			} else if fails++; fails >= p.cfg.MaxFails {
				// Down: back off, doubling up to maxBackoff.
				wait := p.cfg.Interval << min(fails-p.cfg.MaxFails+1, 16)
				notBefore = time.Now().Add(min(wait, max(maxBackoff, p.cfg.Interval)) - p.cfg.Interval/2)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			kicked = false
		case <-kick:
			kicked = true
		}
	}
}

func (p *Prober) send(ctx context.Context, r result) {
	select {
	case p.results <- r:
	case <-ctx.Done():
	}
}

// record folds one result into the observed state.
func (p *Prober) record(r result) {
	h := &p.state[r.cluster].Hosts[r.host]
	p.noteRefreshed(r)
	if idx := p.flatIndex(r.cluster, r.host); !p.done[idx] {
		p.done[idx] = true
		p.probed++
	}
	if r.err != nil {
		h.Fails++
		h.LastError = r.err.Error()
		return
	}
	s := r.sample
	if h.Seen && s.Timeline > h.Timeline && h.Timeline > 0 {
		// A timeline switch the probe watched happen: the old timeline
		// ended at or after the last position the host had replayed on
		// it (PostgreSQL refuses to follow a timeline that forked off
		// before its own position). A safe lower bound when the history
		// file cannot be read. A new slice: published snapshots share
		// the old one.
		old := p.observed[h]
		p.observed[h] = append(old[:len(old):len(old)], zone.TimelineEnd{Timeline: h.Timeline, End: h.ReplayLSN})
	}
	h.Seen, h.ProbedAt, h.Fails, h.LastError = true, s.At, 0, ""
	h.IP, h.InRecovery, h.Timeline, h.SystemID = s.IP, s.InRecovery, s.Timeline, s.SystemID
	h.WriteLSN, h.ReceiveLSN, h.ReplayLSN = s.WriteLSN, s.ReceiveLSN, s.ReplayLSN
	h.AppName, h.SyncStandbys = s.AppName, s.SyncStandbys
	h.History = s.History
	if len(h.History) == 0 {
		h.History = p.observed[h]
	}

	// The WAL clock of a writable host. It starts over when the host
	// changes timeline or goes back into recovery: positions on another
	// timeline are not comparable.
	w := p.history[h]
	if s.InRecovery {
		delete(p.history, h)
		return
	}
	if w == nil || w.timeline != s.Timeline {
		w = &walHistory{owner: h.Addr, timeline: s.Timeline}
		p.history[h] = w
	}
	w.add(s.At, s.WriteLSN)
}

func (p *Prober) flatIndex(ci, hi int) int {
	n := 0
	for _, c := range p.state[:ci] {
		n += len(c.Hosts)
	}
	return n + hi
}

// publish builds a new snapshot from the observed state, derives roles and
// lags, logs what changed, and stores it.
func (p *Prober) publish() {
	now := p.now()
	stale := p.cfg.StaleAfter()
	snap := &zone.Snapshot{
		Ready:      p.probed == len(p.done),
		Built:      now,
		StaleAfter: stale,
		Default:    p.defCluster,
	}
	for _, src := range p.state {
		c := &zone.Cluster{Name: src.Name, AsyncOnly: src.AsyncOnly, Hosts: append([]zone.Host(nil), src.Hosts...)}
		c.Decide(now, stale, p.cfg.MaxFails)
		p.computeLag(src, c, now, stale)
		inheritHistory(c)
		snap.Clusters = append(snap.Clusters, c)
	}
	p.logChanges(snap)
	p.last = snap
	if snap.Ready {
		p.readyOnce.Do(func() { close(p.ready) })
	}
	if p.active.Load() {
		p.table.Store(snap)
	}
}

// computeLag fills Lag, LagBytes and LagKnown of every replica of c from
// the WAL clock of c's primary (see lag.go). src holds the same hosts in
// the same order; its elements key the history.
func (p *Prober) computeLag(src, c *zone.Cluster, now time.Time, stale time.Duration) {
	pi := c.Primary
	if pi < 0 {
		return
	}
	primary := &c.Hosts[pi]
	primary.LagKnown = true
	w := p.history[&src.Hosts[pi]]
	if w == nil || now.Sub(primary.ProbedAt) > stale {
		return
	}
	for i := range c.Hosts {
		h := &c.Hosts[i]
		if h.Role != zone.RoleReplica || h.Timeline != primary.Timeline {
			continue // WAL positions on different timelines do not compare
		}
		h.LagBytes, h.Lag, h.LagKnown = w.lag(h.ProbedAt, h.ReplayLSN)
	}
}

// inheritHistory gives replicas on the primary's timeline, whose own
// history is not known, the primary's: one timeline of one cluster has
// one history.
func inheritHistory(c *zone.Cluster) {
	p := c.PrimaryHost()
	if p == nil {
		return
	}
	for i := range c.Hosts {
		h := &c.Hosts[i]
		if h.Role == zone.RoleReplica && len(h.History) == 0 && h.Timeline == p.Timeline {
			h.History = p.History
		}
	}
}

// logChanges logs each host whose role or note changed since the last
// snapshot, and each cluster entering or leaving split brain: once per
// change, never on every probe.
func (p *Prober) logChanges(snap *zone.Snapshot) {
	if !snap.Ready {
		return
	}
	for ci, c := range snap.Clusters {
		wasSplit := p.last != nil && p.last.Ready && p.last.Clusters[ci].SplitBrain
		switch {
		case c.SplitBrain && !wasSplit:
			var writable []string
			for i := range c.Hosts {
				if strings.HasPrefix(c.Hosts[i].Note, "split brain") {
					writable = append(writable, c.Hosts[i].Addr)
				}
			}
			p.log.Error("split brain: writable hosts on the same timeline; answering no primary until it is resolved",
				"cluster", c.Name, "hosts", strings.Join(writable, ","))
			if hook := p.cfg.Hooks.SplitBrain; hook != nil {
				hook(c.Name)
			}
		case !c.SplitBrain && wasSplit:
			p.log.Info("split brain resolved", "cluster", c.Name)
		}
		for hi := range c.Hosts {
			h := &c.Hosts[hi]
			was, wasNote := zone.RoleUnknown, ""
			if p.last != nil && p.last.Ready {
				old := &p.last.Clusters[ci].Hosts[hi]
				was, wasNote = old.Role, old.Note
			} else if h.Role == zone.RoleUnknown && h.Note == "" && h.LastError == "" {
				continue
			}
			if h.Role == was && h.Note == wasNote {
				continue
			}
			attrs := []any{"cluster", c.Name, "host", h.Addr, "from", was.String(), "to", h.Role.String()}
			if h.Note != "" {
				attrs = append(attrs, "why", h.Note)
			}
			if h.LastError != "" {
				attrs = append(attrs, "error", h.LastError)
			}
			if hook := p.cfg.Hooks.RoleChanged; hook != nil && h.Role != was {
				hook(c.Name, h.Addr, was, h.Role)
			}
			if h.Role == zone.RoleDown || h.Note != "" {
				p.log.Warn("host state changed", attrs...)
			} else {
				p.log.Info("host state changed", attrs...)
			}
		}
	}
}
