package zone

import (
	"net/netip"
	"time"
)

// Role is what pgdns has decided a host is, from the probe's evidence.
type Role uint8

// Roles of a host. Only RolePrimary and RoleReplica hosts are ever answered.
const (
	RoleUnknown Role = iota // never probed successfully, or set aside (see Host.Note)
	RolePrimary             // the one writable host of its cluster
	RoleReplica             // in recovery, streaming or replaying WAL
	RoleDown                // max_fails probes failed in a row, or no good probe for too long
)

// String returns the role's name as the HTTP API and TXT records show it.
func (r Role) String() string {
	switch r {
	case RolePrimary:
		return "primary"
	case RoleReplica:
		return "replica"
	case RoleDown:
		return "down"
	}
	return "unknown"
}

// Aside says why a host that answers its probes is not answered.
type Aside uint8

// Reasons to set a live host aside.
const (
	NotAside        Aside = iota
	AsideForeign          // its system identifier is not the cluster's
	AsideUnsettled        // no system identifier is the cluster's yet (a tie, or too few hosts agree)
	AsideDuplicate        // the same server as a host listed before it
	AsideSuperseded       // on a timeline older than the cluster's newest
	AsideSplitBrain       // one of several writable hosts on the newest timeline, or a replica on it meanwhile
	AsideForked           // a replica on the primary's timeline number, but on another branch of it
	AsideNotLeader        // writable, but Patroni's leader key is another member's
	AsideAbandoned        // on a timeline above the cluster's newest proven one: a branch it left
	AsideUnproven         // a replica on a timeline above 1 that no history file nor WAL sender of the primary proves on its branch, or one whose timeline is hidden at the newest (it may be on a later one), or one on timeline 1 streaming from a server the cluster does not list (setAsideUnlistedUpstream)
	AsideStopping         // writable, shutting down: it admits no new session (Stopping)
)

var asideNames = [...]string{
	NotAside:        "",
	AsideForeign:    "foreign",
	AsideUnsettled:  "unsettled",
	AsideDuplicate:  "duplicate",
	AsideSuperseded: "superseded",
	AsideSplitBrain: "split_brain",
	AsideForked:     "forked",
	AsideNotLeader:  "not_leader",
	AsideAbandoned:  "abandoned",
	AsideUnproven:   "branch_unproven",
	AsideStopping:   "stopping",
}

// String returns the reason's name as the HTTP API shows it; "" for NotAside.
func (a Aside) String() string {
	if int(a) < len(asideNames) {
		return asideNames[a]
	}
	return "aside(?)"
}

// Host is one PostgreSQL server as of the last probe: the facts the probe
// read (the Observed fields) and what pgdns derived from them.
//
// Its booleans sit together, beside its other small fields, not each in
// a word of its own: a Host is 672 bytes, not 720, so that a cluster of 3
// in the prober's state, and with its Cluster in a snapshot, is one
// allocation size class lower each (2,048 and 2,304 bytes, the
// allocator's 8-byte header included: 2.1 MiB less live heap at ten
// thousand hosts, issue 28).
type Host struct {
	Cluster string // name of the cluster it belongs to
	Addr    string // "host:port" as configured
	IP      netip.Addr
	Port    uint16 // Addr's port: where clients connect (SRV answers carry it)

	// SharesIP is set by Decide when another configured host of the
	// cluster has the same address on another port: an A or AAAA record
	// carries no port, so no address answer may hold that address at all
	// (whatever port a client uses, one of the two is the wrong place);
	// only SRV answers the host (see Cluster.Addressable).
	SharesIP bool
	// TagNoLoadBalance: the Patroni member list tags this host
	// noloadbalance (a true value, as Patroni reads it); TagNote (below)
	// says what was odd about the tag. Set by whoever reads Patroni, not
	// by the probe.
	TagNoLoadBalance bool

	// Name is the host's label in the zone: it answers as
	// HostName(Name, Cluster), whatever its role (names.go).
	Name string

	// Location is where the host is (its data centre, zone...), from the
	// configuration or Patroni's dc tag; "" when not labelled.
	Location string

	// Observed by the last successful probe.
	ProbedAt   time.Time // when the last successful probe's answer arrived: the host had its values by then
	ProbeStart time.Time // when that probe's query was sent: its values were read no earlier
	Seen       bool      // at least one probe has succeeded
	InRecovery bool      // pg_is_in_recovery()
	Sync       bool      // a synchronous standby, by the primary's pg_stat_replication
	SyncUnsure bool      // Sync is true because the replica's own row is not proven or sync_state is hidden (see markSyncStandbys)
	Timeline   uint32
	SystemID   uint64    // pg_control_system().system_identifier
	StartedAt  time.Time // pg_postmaster_start_time(): one run of the server
	InsertLSN  LSN       // primary: pg_current_wal_insert_lsn(), which covers every visible commit
	ReceiveLSN LSN       // replica: pg_last_wal_receive_lsn()
	ReplayLSN  LSN       // replica: pg_last_wal_replay_lsn(); primary: InsertLSN
	AppName    string    // replica: the application name its WAL receiver uses; "" when it has none or it cannot be read
	AppNameWhy string    // replica: why AppName is "" (no receiver, an ambiguous conninfo); "" when hidden (StatsHidden)
	SlotName   string    // replica: the replication slot it streams from, if any
	// Replica: its WAL receiver's status (pg_stat_wal_receiver.status,
	// "streaming" when it streams; "" when it has none, or StatsHidden
	// hides it) and the server it is connected to (sender_host, which may
	// be a name, an address or a socket directory, and sender_port).
	// With no receiver (Receiver "") on a TimelineWatched replica, the
	// sender it was last seen streaming that timeline from in the same
	// server run, if any: with no primary answered, a replica that
	// streamed from the writer that is down now is still that writer's
	// (setAsideUnprovenWithoutPrimary). Only a Receiver "streaming" says
	// it is connected now.
	Receiver   string
	SenderHost string
	SenderPort int
	// WALBlockSize and WALSegmentSize are the server's wal_block_size and
	// wal_segment_size in bytes (0: not known), which place its WAL page
	// headers: lsn- tokens are compared read back across one (Host.token).
	WALBlockSize, WALSegmentSize uint64

	// TimelineExact is false on a replica whose WAL receiver is not
	// running, or whose receiver's timeline moved while the probe read
	// it: Timeline is then only a lower bound of the timeline it
	// replays (the last one its receiver reported, or its last
	// restartpoint's), good enough to set it aside when that is older
	// than the cluster's newest, never to vouch for a timeline token.
	TimelineExact bool
	// TimelineWatched, on a replica whose Timeline is not exact: the probe
	// saw it exact, on this very Timeline, earlier in the same server run
	// with no failed probe since: its WAL receiver stopped after streaming
	// it. A lower bound pgdns never saw exact is no evidence of being on
	// its timeline: the replica may have followed a promoted upstream
	// onto a later one before its receiver stopped (setAsideUnwatched).
	TimelineWatched bool

	// StatsHidden: the probe role may not read this host's replication
	// statistics (it lacks pg_read_all_stats, which pg_monitor grants):
	// pg_stat_replication's sync_state and client address, and
	// pg_stat_wal_receiver's timeline and conninfo, read as NULL.
	StatsHidden bool
	// TimelineHidden, on a replica: its WAL receiver runs, but StatsHidden
	// hides the timeline it receives, so Timeline is only a lower bound.
	TimelineHidden bool
	// SyncNamesSet, on a primary: synchronous_standby_names is set, so a
	// standby may be synchronous.
	SyncNamesSet bool
	// Stopping, on a writable host: it is shutting down (smart: it admits
	// no new session) while other client sessions on it remain, which
	// may write on; the probe keeps its session to see what they write
	// (rule 9's window, rule 13's) and Decide sets it aside (AsideStopping).
	Stopping bool

	// Standbys, on a primary, are the rows of its pg_stat_replication.
	Standbys []Standby

	// DrainSetting and OfflineSetting are the server's custom settings
	// pgdns.drain and pgdns.offline as the probe read them
	// (current_setting(name, true)); "" when not set. Decide reads them
	// (drain.go): the database itself carries a drain, so that every
	// pgdns instance sees it at its next probe.
	DrainSetting, OfflineSetting string
	// SettingShadowed, when not "", says why the probe cannot see the
	// server's pgdns.drain or pgdns.offline: its session's value comes
	// from a role, database or client setting. The host then counts as
	// drained (drain.go), and the note says so.
	SettingShadowed string
	// DefaultReadOnly is the server's default_transaction_read_only as
	// the probe read it: on a writable host, its new sessions' transactions
	// are read-only, so it refuses writes (readonly.go). ReadOnlyShadowed,
	// when not "", says why the probe cannot see the server's value: its
	// session's comes from a role, database or client setting.
	//
	// DefaultSerializable: a new session's default_transaction_isolation
	// is serializable, as the probe read it (the server's, every role's
	// or the probe's database's value; not its own session's): in
	// recovery, every query of such a session is refused, so no replica
	// name answers the host (drain.go, DrainBySerializable).
	// IsolationShadowed, when not "", says why the probe cannot see that
	// value: a setting of pgdns's own role or connection options.
	DefaultReadOnly, DefaultSerializable bool
	ReadOnlyShadowed, IsolationShadowed  string
	// TagNote says what was odd about TagNoLoadBalance's tag (above; ""
	// when nothing). Set by whoever reads Patroni, not by the probe.
	TagNote string

	// History lists where earlier timelines ended, when known; it decides
	// lsn- tokens that carry a timeline.
	History []TimelineEnd
	// HistoryFromFile: History was read from a timeline history file, so
	// its ends are exact; otherwise they are lower bounds learned from
	// switches the probe watched. Only an exact end proves a token's
	// write lost in a failover (lost.go).
	HistoryFromFile bool
	// OwnHistory is the history of its exact timeline as this host's own
	// history file tells it; nil when not read. Two servers that promoted
	// independently may pick one timeline number: their files tell the
	// branches apart when they forked at different points.
	OwnHistory []TimelineEnd
	// DivergedFrom is the address of a writable host this replica has been
	// proven not to follow (set by the probe): on their one timeline it had
	// replayed WAL past that host's position, read after it. DivergedNote
	// says so for people. It holds for the server run that showed it.
	DivergedFrom, DivergedNote string
	// DivergedRun is the postmaster start time of that writable host's
	// server run (zero: not known): the proof is of a server, not of the
	// spelling of its entry, so it holds against that run listed under any
	// address (a DNS name for it, a second IP, a forwarder: review 6, G7).
	DivergedRun time.Time

	// OfIdentity is the cluster identity this host was last seen live
	// with (0: never): Decide sets it, the probe carries it across a
	// reload (by address) and a restart (the state file's hosts; a file
	// without them: every host listed at the start). Only such a host may
	// vote the identity replaced (settleIdentity): one that joined by a
	// reload or Patroni and never showed the cluster's identity never
	// outvotes it (review 7, H6).
	OfIdentity uint64

	// Probe failures since the last success.
	Fails     int
	LastError string
	// FailClass is the class of LastError, as the probe classifies it
	// (not_serving, timeout, auth, server_error, dns, other): what a
	// host_down event says; "" without a failure.
	FailClass string

	// Derived when the snapshot is built.
	Role Role
	// Drained: no replica name answers this host (DrainedBy says why);
	// a primary stays answered by primary and any. Offline: a replica
	// kept for reports, answered only by the offline role. A drained
	// host is answered by neither. See drain.go.
	Drained   bool
	DrainedBy DrainSource
	Offline   bool
	// ReadOnly: a writable host whose new sessions are read-only (not
	// counted when pgdns's own setting hides the server's). It stays the cluster's primary
	// (its WAL is the cluster's), but primary does not answer it: a client
	// sent there to write would be refused (readonly.go).
	ReadOnly bool
	// SyncProven: the primary's pg_stat_replication proves this replica a
	// synchronous standby, as the sync filter needs it (its one row is
	// provably its own and reports sync or quorum); SyncWhy says why not
	// when it is false. Unlike Sync, which leans to yes when unsure, it
	// leans to no.
	SyncProven bool
	Aside      Aside         // why a live host is set aside, NotAside when it is not (Note)
	LagKnown   bool          // Lag is a proven upper bound
	BytesKnown bool          // LagBytes is a proven upper bound
	SyncWhy    string        // SyncProven's: above
	Note       string        // Aside's, for people, e.g. "split brain: 2 writable hosts on timeline 1"
	Lag        time.Duration // at most how old the oldest data is that the replica lacks
	LagBytes   uint64        // at most how many WAL bytes the replica's replay is behind the primary
}

// Age is how long ago the last successful probe's answer arrived (the
// values were read at most that long ago, and the lags are as of then).
func (h *Host) Age(now time.Time) time.Duration {
	if !h.Seen {
		return 0
	}
	return now.Sub(h.ProbedAt)
}

// lagAt is h's time lag bound at now. Lag is proven as of the end of h's
// last good probe (ProbedAt): a replica that stopped replaying right after
// it has fallen behind since by the sample's age. One probe interval of
// that is tolerated, the time until the next probe is due (docs/probe.md:
// a replica that stalls right after it is seen is answered until the next
// probe); the age beyond it is added. A sample stays usable for up to
// StaleAfter (max_fails × interval + timeout): a slow path, or a frozen
// or loaded host, whose probes take longer than the interval, would
// otherwise vouch for a bound long past.
// A primary's lag is 0 however old its sample: it has all the data there is.
func (h *Host) lagAt(now time.Time, interval time.Duration) time.Duration {
	if !h.InRecovery {
		return h.Lag
	}
	return h.Lag + max(0, now.Sub(h.ProbedAt)-interval)
}

// bytesHeldAt reports whether h's byte lag bound may still be used at now.
// Like the time lag, it is proven as of the end of h's last good probe,
// and one probe interval of the sample's age is tolerated (the next probe
// is due by then), with half an interval more for that probe's own round
// trip and scheduling, so that a healthy replica's bound does not blink
// out just before each new sample. Unlike time, bytes cannot be aged: no
// rate bounds how much the primary wrote meanwhile (maxWALRate is a
// ceiling for forged tokens, 16 MB a millisecond, not a bound a filter
// could use). So beyond that the bound is not used at all: a slow path, a
// frozen or loaded host, whose probes take longer than that, would
// otherwise vouch for a replica far behind (review 5 F2b: bytes-2mb
// answered a paused replica 2.69 MB behind through a 400 ms path). A
// primary's byte lag is 0 however old its sample.
func (h *Host) bytesHeldAt(now time.Time, interval time.Duration) bool {
	return !h.InRecovery || now.Sub(h.ProbedAt) <= interval+interval/2
}

// Fresh reports whether h's last successful probe is recent enough to
// vouch for it at now: at most staleAfter ago. The one staleness rule:
// Decide marks a host that is not fresh down, and selection (live)
// answers only fresh hosts, which also catches a snapshot not rebuilt
// because every probe hangs.
func (h *Host) Fresh(now time.Time, staleAfter time.Duration) bool {
	return now.Sub(h.ProbedAt) <= staleAfter
}

// Standby is one row of a primary's pg_stat_replication.
type Standby struct {
	Addr    netip.Addr // client_addr; invalid over a Unix socket
	AppName string     // application_name
	Sync    bool       // sync_state is sync or quorum
	Slot    string     // the replication slot the standby streams from, if any
	// SyncFrom, on a row that is Sync: the position its standby must have
	// replayed before the sync filter passes it, the primary's insert
	// position read after the row was first seen synchronous (SyncPending
	// until then; 0: none asked). A WAL sender turns synchronous once it
	// has sent its standby what it lacked, not once the standby replayed
	// it: one that rejoins after an outage may lack the commits that
	// returned while others were the synchronous ones, remote_apply's too
	// (markSyncStandbys; review 14a, finding 1).
	SyncFrom LSN
}

// SyncPending, as a Standby's SyncFrom: the row was first seen
// synchronous by the primary's latest probe, and where the primary stood
// then is read by the next; no replay position passes it.
const SyncPending = ^LSN(0)

// TimelineEnd is one line of a timeline history file: timeline Timeline
// ended, and the next one branched off, at LSN End.
type TimelineEnd struct {
	Timeline uint32
	End      LSN
}

// token is the position an lsn- token l asks of h: every record before l
// is all a client holding it needs, so l is read back across a page header
// (LSN.PageBoundary) placed by h's WAL sizes. A token taken from
// pg_current_wal_insert_lsn() after a segment switch, or after a record
// that filled a page, is then satisfied by a replica that replayed up to
// the boundary, as it is once the next record arrives.
func (h *Host) token(l LSN) LSN { return l.PageBoundary(h.WALBlockSize, h.WALSegmentSize) }

// hasHistory reports whether h's WAL contains position lsn as written on
// timeline tli: h is on tli, or on a later timeline that branched off tli
// (directly or not) at or after lsn.
//
// It fails closed on a replica whose timeline is only a lower bound (no
// WAL receiver): it may already replay a newer timeline that forked
// before lsn.
func (h *Host) hasHistory(tli uint32, lsn LSN) bool {
	if !h.TimelineExact {
		return false
	}
	if h.Timeline == tli {
		return true
	}
	if h.Timeline < tli {
		return false
	}
	for _, e := range h.History {
		if e.Timeline == tli {
			return e.End >= lsn
		}
	}
	return false // history not known: fail closed
}
