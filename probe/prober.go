package probe

import (
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
	// HostProbes, when set, is called once for each host as its loop
	// starts; the function it returns (nil: none) is called after every
	// probe of that host, as ProbeDone is, by a host that keeps it rather
	// than finding its counters by name on each probe.
	HostProbes func(cluster, addr string) func(took time.Duration, err error)
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
	// Probes is called with n probes of cluster asked for by why: by
	// the aggregator as it kicks hosts (round, closing, flux, refresh;
	// a kick while one is pending asks for nothing), and at the result of
	// each probe on a host's own tick (tick, tick_driven). Together they
	// count every probe.
	Probes func(cluster string, why ProbeCause, n int)
	// ClusterProbes, when set, is called once for each cluster as the
	// prober is made; the function it returns (nil: none) counts what
	// Probes counts for that cluster, for the probes each round asks
	// for (a tick that opens it, its replicas' probes, its closing
	// probe), by a prober that keeps it rather than having the cluster
	// found by name three times a round. Probes counts the rest (flux,
	// refresh), and all of them when ClusterProbes is nil.
	ClusterProbes func(cluster string) func(why ProbeCause, n int)
	// FluxBegan is called once each time a cluster enters flux (an
	// episode begins: flux.go), by the prober that publishes.
	FluxBegan func(cluster string)
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

	// Names gives hosts their label in the zone: "host:port" → label
	// (zone.AssignLabels: a host not in it, or whose label another host
	// has, is labelled by its address and port).
	Names map[string]string

	// Port is the port of the cluster's A and AAAA answers; 0: the port
	// most hosts share (zone.ClientPort).
	Port uint16

	// Patroni says the cluster is read from Patroni: only the member
	// holding its leader key may be the primary. Leader is that member's
	// address as Patroni last reported it ("" when none holds it); the
	// caller keeps it current with SetLeader.
	Patroni bool
	Leader  string
	// Tags are the Patroni tags of the members, by address, as last
	// reported; the caller keeps them current with SetTags.
	Tags map[string]MemberTags
}

// StaleAfter is how old a host's last good probe may be before pgdns no
// longer vouches for it: max_fails probe intervals plus one probe's
// deadline. A host that answers nothing at all (frozen, cut off) leaves the
// answers by then, before max_fails timeouts have marked it down.
func (c Config) StaleAfter() time.Duration {
	return time.Duration(c.MaxFails)*c.Interval + c.Timeout
}

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
	// Per host: what its next kicked probe is to be, light or full (closing.go).
	kickModes []atomic.Int32
	// Per host: what cuts its goroutine's wait on its session short when
	// it is kicked (session.go's alarm), nil while it has none.
	wakeups []atomic.Pointer[alarm]

	active atomic.Bool
	// What others ask of the aggregator, in two channels rather than one
	// each (the aggregator's select over eleven channels, which it parks
	// in between batches of results, locked and queued on every one of
	// them: 3% of pgdns's CPU at 1,000 hosts, issue 28). updates is
	// buffered, as each of its own channels was, and its senders wait
	// for nothing after: an activation (handover.go, adopt it, then
	// publish at once), a leaderUpdate (SetLeader) or a tagsUpdate
	// (SetTags, authority.go). requests is not: its senders wait for a
	// reply once the aggregator has taken theirs, which it then always
	// gives: a chan Knowledge (handover.go), a forgetRequest
	// (ForgetTimeline, authority.go) or a forgetForkRequest (ForgetFork,
	// forgetfork.go).
	updates     chan any
	requests    chan any
	stopped     chan struct{} // closed when Run returns
	ready       chan struct{} // closed when every host has had a result
	readyOnce   sync.Once
	probedSoFar atomic.Int64 // probed, for Progress (read from other goroutines)

	refreshMu  sync.Mutex
	refreshing map[string]*refreshes         // by cluster name
	published  atomic.Pointer[zone.Snapshot] // this prober's last snapshot, for Refresh

	// Owned by the aggregator goroutine (Run).
	state     []*zone.Cluster // observed fields of every host, configured order
	history   map[*zone.Host]*walHistory
	lastExact map[*zone.Host]zone.TimelineEnd // a replica\'s last exact timeline and its replay there (timelines.go)
	replays   map[*zone.Host]replayWatch      // a replica's earliest reading at its replay position (forks.go)
	runs      map[*zone.Host]writableRun      // a writable host's current server run (branches.go)
	writing   []map[uint32]bool               // per cluster: the timelines whose first writer's run is writable now (branches.go)
	timelines []map[uint32]timelineHistory    // per cluster: what is known of each timeline's history
	branches  []map[uint32]Branch             // per cluster: who wrote each timeline (branches.go)
	forks     [][]zone.TimelineFork           // per cluster: its forked timelines as last published (branches.go)
	restarts  [][]zone.TimelineRestart        // per cluster: its restart windows as last published (branches.go)
	reached   [][]zone.TimelineReach          // per cluster: how far its older timelines' writers wrote, as last published (branches.go)
	probed    int                             // hosts that have had at least one result
	base      []int                           // per cluster: the flat index of its first host
	// Per cluster: something it is built from changed since its last
	// build (a result, a leader, tags, a forgotten timeline, an adoption),
	// and until when the last build holds by the clock alone (build.go).
	rebuild    []bool
	holdsUntil []time.Time
	// Per cluster: its build is due at the next publish whatever its round
	// (a mark other than a steady result's: markRebuild); else publish may
	// defer it while its round is under way (hold.go, deferBuild), until
	// deferredUntil at the latest; markedAt, when it was first marked
	// since its last build. Each made by its first use (setUrgent,
	// markSteady).
	urgent        []bool
	markedAt      []time.Time
	deferredUntil time.Time
	dirty         dirtyClusters // which clusters publish builds (build.go)
	opening       chan struct{} // the first probes running at once (intake.go)
	notLeader     []bool        // per cluster: its last build set a writable host aside as not Patroni's leader
	done          []bool
	last          *zone.Snapshot
	rounds        []*round // per cluster: the probe round under way (rounds.go)
	// Rounds in the order they opened, and in the order their last
	// replica answered, for holding (hold.go).
	opened, closing []*round
	flux            []flux // per cluster: the flux episode (flux.go)
	fluxActive      int    // clusters whose flux is active
	fluxHosts       int    // their hosts (fluxMaxHosts)
	// Per host (flat index): the start of its last result, and when a
	// round last kicked it (rounds.go).
	answered, roundKicked []time.Time
	// probesOf counts the probes of each cluster's rounds
	// (Hooks.ClusterProbes); nil without that hook.
	probesOf []func(why ProbeCause, n int)

	reported   map[string]Remembered // what Hooks.Learned last heard (remember.go); aggregator's
	reportedAt time.Time             // when Hooks.Learned last heard, with the running writers' positions (remember.go)
	// Per cluster: remembered forks not applied to a host yet, by the
	// address the replica was last listed under (remember.go).
	pending []map[string]fork
	// Per cluster index, by host address: the server run a replica was
	// proven on another branch in, or last seen with a remembered proof
	// (forgetfork.go).
	provenRun map[int]map[string]time.Time
	// Knowledge of clusters no longer configured, by their old name, for
	// a configured one of the same identity (orphans.go); aggregator's.
	orphans                         map[string]clusterKnowledge
	orphansChanged, orphansReported uint64 // changes of orphans, and the last one Hooks.Learned heard of
	seeded                          []bool // per cluster: its identity came from Config.Remembered (remember.go)
	// Per cluster: it has knowledge of its own, under its own name, from a
	// predecessor or the state file: it inherits no orphan (orphans.go).
	own []bool
	// Per cluster: it took no knowledge while another cluster kept some
	// (adopt): it takes a copy of a cluster's whose servers its hosts are,
	// once it sees them (sibling, siblings.go).
	wantCopy []bool
	// Per cluster: the server runs (postmaster start times) of its
	// servers, by address, as the predecessor it took its knowledge from
	// (a reload's prober, or the state file) last saw them, hosts it no
	// longer lists included: a host moved out of it and respelt, seen
	// only once this prober runs (in the config a restarted pgdns reads,
	// or down at the reload), is still known for one of its servers
	// (sibling, siblings.go; serverRun).
	heldRuns []map[string]time.Time
	// Clusters given a newer timeline or a fork by a sibling during a
	// publish (raiseSiblings, pullSiblings, shareForks: siblings.go), built
	// again before it ends (build.go); aggregator's.
	raised []int
	// Per cluster: the identity said at WARN to be shown by a majority
	// of hosts never seen with the cluster's (zone.Cluster.Unfollowed).
	unfollowed []uint64
	// Per cluster: the SOA serial a previous run of pgdns last gave it
	// (Config.Remembered), which the first snapshot's follows (remember.go).
	serialFloor []uint32
	// The configured clusters by established identity, in order, and the
	// identity each is filed under (sameIdentity, siblings.go); every
	// cluster's index, for one of no identity. Aggregator's.
	byIdentity map[uint64][]int
	indexedAs  []uint64
	all        []int
}

// New returns a Prober. Run starts it. defaultCluster names the cluster
// answered for names without a cluster label.
func New(cfg Config, table *zone.Table, newChecker NewCheckerFunc, log *slog.Logger, defaultCluster string) *Prober {
	p := &Prober{
		cfg: cfg, table: table, newChecker: newChecker, log: log, now: time.Now, defCluster: defaultCluster,
		// Room for 64 results, not one per host: a host's goroutine
		// whose result waits parks in send, and probes nothing more
		// meanwhile, which leaves the CPU to the aggregator when it
		// is behind (with room for every host, measured at 3,000
		// hosts: 10,304 and 11,039 probes/s and every host aging out,
		// against 11,858 and 12,663 with 64; issue 28).
		results:    make(chan result, 64),
		history:    map[*zone.Host]*walHistory{},
		lastExact:  map[*zone.Host]zone.TimelineEnd{},
		replays:    map[*zone.Host]replayWatch{},
		runs:       map[*zone.Host]writableRun{},
		refreshing: map[string]*refreshes{},
		updates:    make(chan any, 17), // as the 8 leaders', 8 tags' and 1 activation's
		requests:   make(chan any),
		stopped:    make(chan struct{}),
		ready:      make(chan struct{}),
	}
	p.active.Store(!cfg.Inactive)
	for _, cc := range cfg.Clusters {
		c := &zone.Cluster{Name: cc.Name, Primary: -1, AsyncOnly: cc.AsyncOnly,
			Identity: cc.SystemID, IdentityPinned: cc.SystemID != 0, LeaderKey: cc.Patroni, Leader: cc.Leader}
		labels, renamed := zone.AssignLabels(cc.Hosts, cc.Names)
		if len(renamed) > 0 {
			log.Warn("hosts given one name; the later ones are named by their address", "cluster", cc.Name, "hosts", renamed)
		}
		ports := make([]uint16, len(cc.Hosts))
		c.Hosts = make([]zone.Host, 0, len(cc.Hosts)) // appended one by one, 3 hosts took room for 4: 700 bytes a host
		for i, addr := range cc.Hosts {
			_, ports[i], _ = zone.ParseHostPort(addr) // read by the config, or by discovery, already
			t := cc.Tags[addr]
			c.Hosts = append(c.Hosts, zone.Host{Cluster: cc.Name, Addr: addr, Port: ports[i], Name: labels[i], Location: cc.Locations[addr],
				TagNoLoadBalance: t.NoLoadBalance, TagNote: t.Note})
		}
		c.Port = zone.ClientPort(ports, cc.Port)
		p.state = append(p.state, c)
		p.timelines = append(p.timelines, map[uint32]timelineHistory{})
		p.branches = append(p.branches, map[uint32]Branch{})
		p.writing = append(p.writing, map[uint32]bool{})
	}
	for _, c := range p.state {
		p.base = append(p.base, len(p.done))
		p.done = append(p.done, make([]bool, len(c.Hosts))...)
	}
	p.rebuild, p.holdsUntil, p.notLeader = make([]bool, len(p.state)), make([]time.Time, len(p.state)), make([]bool, len(p.state))
	p.pending = make([]map[string]fork, len(p.state))
	for range p.done {
		p.kicks = append(p.kicks, make(chan struct{}, 1))
	}
	p.driven = make([]atomic.Int64, len(p.done))
	p.kickModes = make([]atomic.Int32, len(p.done))
	p.wakeups = make([]atomic.Pointer[alarm], len(p.done))
	p.answered, p.roundKicked = make([]time.Time, len(p.done)), make([]time.Time, len(p.done))
	p.rounds = make([]*round, len(p.state))
	if hook := cfg.Hooks.ClusterProbes; hook != nil {
		p.probesOf = make([]func(ProbeCause, int), len(p.state))
		for ci, c := range p.state {
			p.probesOf[ci] = hook(c.Name)
		}
	}
	p.forks = make([][]zone.TimelineFork, len(p.state))
	p.restarts = make([][]zone.TimelineRestart, len(p.state))
	p.flux = make([]flux, len(p.state))
	p.seeded = make([]bool, len(p.state))
	p.own = make([]bool, len(p.state))
	p.wantCopy = make([]bool, len(p.state))
	p.heldRuns = make([]map[string]time.Time, len(p.state))
	p.unfollowed = make([]uint64, len(p.state))
	p.serialFloor = make([]uint32, len(p.state))
	p.seed(cfg.Remembered)
	return p
}

// Ready is closed once every host has been probed at least once.
func (p *Prober) Ready() <-chan struct{} { return p.ready }

// Progress returns how many hosts have been probed at least once, and how
// many there are: a reload waits on it (internal/app), for as long as the
// count keeps rising, since a fleet's first probes are spread out at start
// (intake.go, maxOpening).
func (p *Prober) Progress() (probed, hosts int) {
	return int(p.probedSoFar.Load()), len(p.done)
}

// flatIndex is the index of host hi of cluster ci among all hosts: O(1),
// as it is used for every result.
func (p *Prober) flatIndex(ci, hi int) int { return p.base[ci] + hi }
