package zone

import (
	"sync"
	"sync/atomic"
	"time"
)

// Cluster is one PostgreSQL cluster in a Snapshot: its hosts in configured
// order and which one, if any, is the primary.
type Cluster struct {
	Name    string
	Hosts   []Host
	Primary int // index into Hosts, -1 when there is no trusted primary

	// AsyncOnly leaves synchronous standbys out of replica answers
	// (config "replicas: async").
	AsyncOnly bool

	// SplitBrain is set by Decide when two writable hosts share the
	// newest timeline: no primary is answered until it is resolved.
	SplitBrain bool

	// ForkedTimelines are the timelines seen written by two different servers
	// (forked.go), set by the probe, which remembers them: no host proves
	// an lsn- token on one. Nil while there are none.
	ForkedTimelines []TimelineFork

	// RestartedTimelines are the windows of positions on a timeline that a
	// new server run of its writer may have written anew (restarted.go),
	// set by the probe, which remembers them: no host proves an lsn- token
	// in one. Nil while there are none.
	RestartedTimelines []TimelineRestart

	// Reached is, for timelines below the newest, the highest insert
	// position the probe saw each one's writer at (lost.go: a token
	// without a timeline past where the timeline ended and at or below
	// that may name a write lost in the failover), set by the probe, in
	// timeline order. Nil while none is known.
	Reached []TimelineReach

	// What pgdns has learned of the cluster over time. Decide keeps them
	// current; the probe carries them from one snapshot to the next, and
	// across reloads. A restart of pgdns forgets them (docs/state.md: "What pgdns
	// remembers").
	Identity       uint64 // the cluster's system identifier, 0 until established
	IdentityPinned bool   // Identity comes from the configuration
	NewestTimeline uint32 // the highest timeline proven on a live host of Identity (see Decide)
	// Witnessed is the highest timeline above NewestTimeline that a live
	// replica's lower bound showed (timelineWitness), WitnessedBy that
	// replica's address and WitnessedRun its server run (postmaster start
	// time) then; 0 and "" while there is none, or once NewestTimeline
	// reaches it. Kept while its witness is down, and in the state file
	// (review 6, G1d): the promotion it proves happened, whatever became
	// of the replica or of pgdns.
	Witnessed    uint32
	WitnessedBy  string
	WitnessedRun time.Time
	// Unfollowed is the system identifier a strict majority of the
	// configured hosts show while no live host has Identity, and that
	// settleIdentity does not follow: none of them was seen with Identity
	// (Host.OfIdentity), so they are another cluster's hosts listed by
	// mistake as far as pgdns can tell (review 7, H6). 0: none. Set by
	// every Decide, never remembered.
	Unfollowed uint64

	// LeaderKey says Patroni's leader key decides which host may be the
	// primary (the cluster is read from Patroni); Leader is the address of
	// the member holding it as Patroni last reported, "" when none does.
	LeaderKey bool
	Leader    string

	// MinTimeline is the configured floor (clusters.<name>.min_timeline):
	// a host on a lower timeline is set aside as superseded. Unlike
	// NewestTimeline it is not learned: lowering it takes effect at once.
	MinTimeline uint32

	// Port is the port clients use with the cluster's A and AAAA names
	// (ClientPort): address answers leave out hosts on other ports, which
	// only SRV answers carry. 0: every host is taken to be on it.
	Port uint16

	// ipsDistinct is set by Decide when no two hosts share an address,
	// so that address answers need not look for repeats.
	ipsDistinct bool

	// Serial is the SOA serial of <cluster>.<zone>: it changes when a role
	// answer of the cluster does (see StampSerials).
	Serial uint32
}

// PrimaryHost returns the primary, or nil.
func (c *Cluster) PrimaryHost() *Host {
	if c.Primary < 0 || c.Primary >= len(c.Hosts) {
		return nil
	}
	return &c.Hosts[c.Primary]
}

// Snapshot is the whole table at one moment. Once published it is never
// modified: builders make a new one. A builder may give the new one the
// same *Cluster as the one before when nothing of it changed (the probe
// does: a publish costs what changed, not every host); a cluster, once in
// a published snapshot, is never modified either.
type Snapshot struct {
	// Ready is false until every host has been probed at least once, so
	// that the first answers are not made from a partial view.
	Ready    bool
	Built    time.Time
	Clusters []*Cluster
	Default  string // cluster answered for names without a cluster label

	// StaleAfter is how old a host's last good probe may be before its
	// state cannot be vouched for: max_fails × interval + timeout.
	StaleAfter time.Duration
	// Interval is probe.interval: how old a replica's sample may be before
	// the time it has aged beyond it counts against its lag (Host.lagAt).
	Interval time.Duration

	// Networks maps client addresses to locations (dns.locations); nil
	// when none are configured.
	Networks *Networks

	// Seq numbers the snapshot among those built in this process (0: not
	// numbered). With BaseSeq set, Changed lists, in order, the indices of
	// the Clusters that are not those of the snapshot numbered BaseSeq:
	// every other one is the same *Cluster at the same index there. Who
	// compares the two snapshots looks at Changed alone (ChangedSince):
	// at a fleet of thousands of clusters a publish changes a few.
	Seq, BaseSeq uint64
	Changed      []int
}

// ChangedSince returns the indices of the clusters of s that are not
// prev's (Changed), and true, when s was built on prev; otherwise false,
// and the two are to be compared cluster by cluster.
func (s *Snapshot) ChangedSince(prev *Snapshot) ([]int, bool) {
	if prev == nil || s.BaseSeq == 0 || prev.Seq != s.BaseSeq || len(prev.Clusters) != len(s.Clusters) {
		return nil, false
	}
	return s.Changed, true
}

// Cluster returns the named cluster; "" means the default one.
func (s *Snapshot) Cluster(name string) *Cluster {
	if name == "" {
		name = s.Default
	}
	for _, c := range s.Clusters {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Host returns the host of c at addr ("host:port" as configured), or nil;
// a nil c has none.
func (c *Cluster) Host(addr string) *Host { return c.HostNear(-1, addr) }

// HostNear is Host, looking first at index i: where the host is in the
// snapshot before when the host list did not change, which makes comparing
// two snapshots host by host O(hosts) instead of O(hosts²) (a thousand
// hosts, published several times a second).
func (c *Cluster) HostNear(i int, addr string) *Host {
	if c == nil {
		return nil
	}
	if i >= 0 && i < len(c.Hosts) && c.Hosts[i].Addr == addr {
		return &c.Hosts[i]
	}
	for j := range c.Hosts {
		if c.Hosts[j].Addr == addr {
			return &c.Hosts[j]
		}
	}
	return nil
}

// LookupCluster returns the cluster a name of KindCluster asks for, by
// its label. Before the first snapshot no cluster is known yet
// (ErrNotReady); after, a label no cluster has is ErrUnknownCluster.
func (s *Snapshot) LookupCluster(name string) (*Cluster, error) {
	if c := s.clusterNamed(name); c != nil {
		return c, nil
	}
	if !s.Ready {
		return nil, ErrNotReady
	}
	return nil, ErrUnknownCluster
}

// EmptyNonTerminal says whether q (q.ENT) exists at the snapshot's moment:
// nil when the names below it do, the error those names answer when they
// do not. host.<cluster> exists when the cluster has a host (each has a
// name below it); _tcp.<name> when _postgresql._tcp.<name> does: its
// cluster (and host, and dc- location) is known.
func (v View) EmptyNonTerminal(q *Query) error {
	s := v.Snap
	if q.Kind == KindHosts && !s.Ready {
		return ErrNotReady // as Select
	}
	c := s.Cluster(q.Cluster) // "" only for a role name: the default cluster
	switch {
	case c == nil && !s.Ready:
		return ErrNotReady
	case c == nil:
		return ErrUnknownCluster
	case q.Kind == KindHostName && q.Host == "":
		if len(c.Hosts) == 0 {
			return ErrUnknownHost
		}
		return nil
	case q.Kind == KindHostName:
		_, err := s.HostNamed(q)
		return err
	case q.Kind == KindHosts && q.DC != "" && !s.KnownLocation(q.DC):
		return ErrUnknownLocation
	}
	return nil
}

// Table holds the current Snapshot. Readers Load it once per request; the
// probe Stores a new one. An atomic pointer instead of a lock keeps readers
// from ever contending with each other or with the writer.
type Table struct {
	snap atomic.Pointer[Snapshot]
	turn atomic.Uint64

	ready     chan struct{} // closed by the first Store of a ready Snapshot
	readyOnce sync.Once
}

// NewTable returns a Table holding an empty, not ready Snapshot.
func NewTable() *Table {
	t := &Table{ready: make(chan struct{})}
	t.snap.Store(&Snapshot{})
	return t
}

// Load returns the current Snapshot. It is never nil.
func (t *Table) Load() *Snapshot { return t.snap.Load() }

// Store publishes s and returns the Snapshot it replaces (never nil): two
// consecutive Stores' snapshots are what Changes compares. The caller must
// not modify s afterwards.
func (t *Table) Store(s *Snapshot) (prev *Snapshot) {
	prev = t.snap.Swap(s)
	if s.Ready {
		t.readyOnce.Do(func() { close(t.ready) })
	}
	return prev
}

// Ready is closed once the Table first holds a ready Snapshot: the moment
// answers stop being SERVFAIL and /readyz turns 200, which is when a
// service manager may be told that pgdns is up (sd_notify READY=1). It
// stays closed: a later Snapshot is never unready.
func (t *Table) Ready() <-chan struct{} { return t.ready }

// Turn returns a new value for each call, used to rotate the order of
// replicas from one answer to the next so that clients spread their load.
func (t *Table) Turn() uint64 { return t.turn.Add(1) }
