package probe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgdns/pgdns/zone"
)

// Sample is what one probe of one host read, in one round trip.
type Sample struct {
	// Start and End frame the probe's round trip: the query was sent at
	// Start and its answer read at End. The server read the values at
	// some moment in between, and nothing tells which: a delay on either
	// path (a proxy, a throttled CPU, a slow request) moves it anywhere in
	// the frame. So no proof uses a moment inside it; each takes the end
	// that is safe for it (lag.go).
	Start, End time.Time
	IP         netip.Addr // the address actually connected to
	InRecovery bool
	// InsertLSN, on a primary only, is pg_current_wal_insert_lsn(): every
	// commit visible when it was read has its commit record before it,
	// even with synchronous_commit off (a commit is visible once its
	// record is inserted, before the WAL writer writes it out, so the
	// write position pg_current_wal_lsn() may lag a visible commit).
	InsertLSN zone.LSN
	// FlushLSN, on a primary, is pg_current_wal_flush_lsn(): its WAL up to
	// there is on disk, and a crash keeps it (the insert position's tail
	// may be lost), so any later run of the same server writes past it.
	// Read back across a page header as InsertLSN is.
	FlushLSN zone.LSN
	// StatsReset, on a primary, is when the server's fixed-numbered
	// statistics were last reset (pg_stat_bgwriter.stats_reset, in µs;
	// 0: not read): in one server run it moves only when crash recovery
	// discards the statistics (the postmaster reinitialising after a
	// crash of one of its processes) or when someone resets them
	// (pg_stat_reset_shared), statsResetSQL.
	StatsReset int64
	ReceiveLSN zone.LSN // replica only
	ReplayLSN  zone.LSN // replica: pg_last_wal_replay_lsn(); primary: InsertLSN
	SystemID   uint64
	StartedAt  time.Time // pg_postmaster_start_time(): tells one server run from the next

	// Timeline is exact: on a primary, the one its current WAL segment is
	// named after; on a replica, the one its WAL receiver last received
	// (replay is on it, or still on a prefix of it that its parent shares).
	// 0 on a replica without a WAL receiver: not known.
	Timeline uint32
	// CheckpointTimeline is the timeline of the last checkpoint or
	// restartpoint: a lower bound of the timeline being replayed, since
	// replay never goes back to an older timeline. On a replica whose
	// Timeline is 0 it is the greater of that and the minimum recovery
	// point's timeline, also a lower bound.
	CheckpointTimeline uint32
	// TimelineHidden, on a replica: its WAL receiver runs, but the probe
	// role may not read the timeline it receives (StatsHidden); Timeline
	// is then 0.
	TimelineHidden bool

	// StatsHidden: the probe role lacks pg_read_all_stats (pg_monitor),
	// so the details of pg_stat_replication and pg_stat_wal_receiver read
	// as NULL: no sync_state, no client address, no receiver timeline.
	StatsHidden bool
	// SyncNamesSet, read on every host, matters on a primary:
	// synchronous_standby_names is set, so a standby may be synchronous.
	SyncNamesSet bool
	// Stopping, on a writable host: it is shutting down (it admits no new
	// session: postmaster.pid says "stopping", or a new session was
	// refused so) while other client sessions remain on it (lingering.go).
	Stopping bool
	// WALBlockSize and WALSegmentSize are wal_block_size and
	// wal_segment_size in bytes: where the server's WAL page headers are.
	WALBlockSize, WALSegmentSize uint64
	// DrainSetting and OfflineSetting are the custom settings
	// pgdns.drain and pgdns.offline as the server has them ("" when not
	// set): zone decides what they mean (zone.ParseSwitch).
	DrainSetting, OfflineSetting string
	// SettingShadowed, when not "", says that the session's pgdns.drain
	// or pgdns.offline comes from a role, database or client setting, not
	// from the server's configuration (shadow.go): the server's value is
	// hidden from the probe, and zone counts the host as drained.
	SettingShadowed string
	// DefaultReadOnly is default_transaction_read_only as the probe's
	// session has it: on a writable server, whether a new session's
	// transactions are read-only (zone: such a host is not answered by
	// primary). ReadOnlyShadowed, when not "", says that the session's
	// value comes from a role, database or client setting (shadow.go),
	// which hides the server's.
	DefaultReadOnly  bool
	ReadOnlyShadowed string
	// DefaultSerializable: a new session's default_transaction_isolation
	// is serializable (the server's value, or every role's, or the
	// probe's database's: not the probe session's own, which is read
	// committed), as the session's start read it and as a reload since
	// has the session reopened to read again (shadow.go): on a hot
	// standby, every query of such a session is refused (zone: no read
	// name answers it). IsolationShadowed, when not "", says that a
	// setting of pgdns's own role or connection options hides that value.
	DefaultSerializable bool
	IsolationShadowed   string

	// Primary only: one row per WAL sender (pg_stat_replication).
	Standbys []zone.Standby
	// Replica only: the application name its WAL receiver gives the
	// primary ("" when it has none, or it cannot be read without
	// ambiguity: AppNameWhy says why), and the replication slot it
	// streams from, if any: how the primary's rows name it.
	AppName    string
	AppNameWhy string
	SlotName   string
	// Replica only: its WAL receiver's status ("" when it has none or it
	// is hidden) and the server it is connected to (sender_host,
	// sender_port of pg_stat_wal_receiver).
	Receiver   string
	SenderHost string
	SenderPort int
	// Where earlier timelines ended, from the timeline history file; nil
	// on timeline 1 or when the file cannot be read (the prober then
	// records switches it observes).
	History []zone.TimelineEnd
	// Crashed: a session of the checker's to the server ended since its
	// last sample with the notice PostgreSQL sends every session as it
	// reinitialises after a crash of one of its processes (57P02,
	// classify.go).
	Crashed bool
}

// Checker probes one host. Check is never called concurrently on one
// Checker; it must return by the context's deadline.
type Checker interface {
	Check(ctx context.Context) (Sample, error)
	Close()
}

// NewCheckerFunc makes the Checker of the host at addr ("host:port").
type NewCheckerFunc func(addr string) (Checker, error)

// probeSQL reads everything pgdns needs in one statement, so one probe is
// one round trip. The primary's position is its insert position (see
// Sample.InsertLSN), read back across a page header with the server's
// wal_block_size and wal_segment_size, read beside it (parseProbeRow,
// zone.LSN.PageBoundary): at the start of a WAL page the insert position
// is past the page's header (24 bytes, 40 on a segment's first page),
// where no record ends, while a replica that has every record replays to
// the page boundary; an idle primary whose last record filled a page
// (after every segment switch: pg_basebackup, pg_switch_wal,
// archive_timeout) would otherwise keep its replicas 24 or 40 bytes behind
// forever, and their time lag growing. No record ends inside a header, so
// the boundary is exact. pg_current_wal_insert_lsn() and pg_walfile_name()
// fail during recovery, hence the CASEs. The primary's timeline is the one its current
// WAL segment is named after; a replica's is the one its WAL receiver last
// received, 0 when it has no receiver (the last restartpoint's timeline,
// read beside it, is only a lower bound: it lags a timeline switch by up to
// a checkpoint interval). Without pg_read_all_stats (pg_monitor grants
// it) every column of pg_stat_wal_receiver but pid reads NULL, and of
// pg_stat_replication all but pid, usesysid, usename and application_name:
// the receiver's timeline is then -1 (it runs, its timeline is hidden),
// its slot is read from primary_slot_name (readable by any role; the
// receiver restarts when it changes),
// and the lower bound takes the minimum recovery point's timeline too
// (replay is past that point once the server accepts sessions; pg_rewind
// sets it on the new timeline), read only then: it costs a read of the
// control file. Text casts keep scanning independent of pg_lsn
// support; the standby rows come as one JSON array so that they are read
// in one consistent pass. The custom settings pgdns.drain and
// pgdns.offline are read with missing_ok (NULL when no placeholder
// exists): an operator drains a host in its own database, and a session
// already open sees a new value after pg_reload_conf(), so the watched
// connection needs no reconnect. Only their first 65 characters are read
// (zone.SwitchLimit and one more, to know a longer value is cut): a 5 MB
// value was sent on every probe and logged whole (review 5, F10). Every function, view, type and operator
// is named with its schema, pg_catalog, and the session's search_path is
// pg_catalog too (parseDSN): a search_path that a role or database setting
// gives the probe's session (ALTER ROLE pgdns SET search_path = evil,
// pg_catalog) would otherwise put a look-alike pg_is_in_recovery() in
// front of the real one, and a primary would read as a replica. Only
// SQL's own syntax (CASE, coalesce, greatest, extract, the keyword types
// bigint, integer and bit) is left unqualified: the parser maps those to
// pg_catalog itself. The WAL receiver's status, sender_port and
// sender_host (one column, the host last: a socket directory may hold
// spaces) and cluster_name (the application name a receiver without one
// gives, else "walreceiver") tie a replica to its WAL sender on the
// primary (walReceiverAppName, zone's senderIndex).
// default_transaction_read_only is what a new session's transactions are
// (libpq's target_session_attrs=read-write refuses a server with it on):
// a writable server with it on refuses writes, and is not answered as the
// primary; a role, database or client setting of it would hide the
// server's (shadow.go). A primary's flush position is the part of its WAL
// that a crash keeps: a later run of the same server starts past it,
// which tells a restart from a server rebuilt at the same address
// (branches.go); after it, in the same column, the statistics' reset
// time, which moves in a run when crash recovery reinitialised the
// server (statsreset.go).
//
// The WAL receiver is read from pg_stat_get_wal_receiver() in FROM: the
// function pg_stat_wal_receiver shows, which gives one row
// whether a receiver runs or not (all NULL without one; pid tells, and is
// readable without pg_monitor), where five sub-selects of the view read
// its shared state five times, each under its own lock, so that its
// columns could come from two moments. FROM is read before the target
// list, so the receiver's timeline is read before the replay position: a
// timeline switch between the two would give a sample "timeline 1, replay
// past where timeline 1 ended", from which rule 9 would learn a timeline
// end past the real one (review 6, G3). So a replica's receiver timeline
// is read once more after the replay position, by the column before the
// last (run when the target list reaches it), and a sample
// whose two reads differ has no exact timeline (parseProbeRow): it
// teaches no timeline end and vouches for no token (that read is -1
// when it finds no receiver, or one whose timeline is hidden, which is
// never the first read's exact timeline). The checkpoint's timeline is
// read by one call, and the minimum recovery point's only on a replica
// without a receiver (greatest ignores the NULL of the other case): each
// pg_control_* call reads and checks the control file from disk. Those
// reads, and the second read of the receiver, are calls in the target
// list, not sub-selects: PostgreSQL sets up every sub-plan of a
// statement (a function scan, whose result type it builds from pg_proc
// again, and a tuple store) each time it starts it, whichever CASE branch
// runs, where a call in an expression costs its call alone (issue 28). What
// cannot change while a server runs (system_identifier, wal_block_size,
// wal_segment_size, cluster_name, pg_postmaster_start_time) is still read
// on every probe: a pooler between pgdns and its hosts may hand the
// session to another server's backend, which only these columns reveal,
// and the one pg_control_system() read they cost is a few µs of the
// statement's server time (docs/operating.md, what pgdns costs your
// database).
//
// The last column is where the two variants of the statement differ
// (admission.go): probeSQL asks whether the role may read server files
// (EXECUTE on pg_read_file, which a superuser has), and probeStatusSQL,
// run on the sessions of a role that may, reads instead the status the
// postmaster keeps in line 8 of postmaster.pid ("stopping" from the moment
// a shutdown request stops it admitting sessions), so that a smart
// shutdown is seen within one probe without opening a session. Both are
// prepared on every session; the executor checks EXECUTE on pg_read_file
// when it starts the statement, whichever role prepared it, so a role
// without the grant never runs probeStatusSQL (it would be an ERROR in the
// server's log on every probe), and a grant revoked in the middle of a
// session fails it with 42501, after which the session runs probeSQL.
// split_part reads the line as pg_ctl does (line by line); the file is
// at most one page (BLCKSZ: AddToDataDirLockFile's buffer).
//
// A replica never has rows in pg_stat_replication here, yet the
// sub-select reading them cost it about 70 µs of every probe at rest
// (PostgreSQL initializes every sub-plan of a statement when it starts
// it, whichever CASE branch runs). So each of the two has a replica
// variant (probeReplicaSQL, probeReplicaStatusSQL) without it, which a
// session runs while its last probe found the server in recovery: its
// standbys column is '[]' during recovery and NULL otherwise, and a NULL
// (the server was promoted since) makes the same probe run the primary's
// statement at once (query), so a promotion is read in full by the probe
// that first sees it.
//
// The primary's statements have a variant too (probeKnownSQL,
// probeKnownStatusSQL), which a session runs while pgdns knows the names
// and slots of the server's WAL senders (senders.go): its standbys column
// reads pg_stat_get_wal_senders() alone, a row [pid, sync_state, null,
// true, null] for each sender pgdns listed and a null element for any
// other, and then the same probe runs the primary's statement at once and
// reads that sender's names and slot (query). The sub-selects that read
// them (pg_get_replication_slots(), pg_stat_get_activity()) are set up on
// every run of a statement that has them, whether they run or not (each
// function scan builds its result type from pg_proc again, of 16 and 30
// columns): about a fifth of the primary's server time per probe at rest
// (issue 28).
const (
	probeSQL              = probeHead + standbysSQL + probeTail + privilegeColumnSQL + probeFrom
	probeStatusSQL        = probeHead + standbysSQL + probeTail + statusColumnSQL + probeFrom
	probeReplicaSQL       = probeHead + replicaStandbysSQL + probeTail + privilegeColumnSQL + probeFrom
	probeReplicaStatusSQL = probeHead + replicaStandbysSQL + probeTail + statusColumnSQL + probeFrom
	probeKnownSQL         = probeHead + knownStandbysSQL + probeTail + privilegeColumnSQL + probeFrom
	probeKnownStatusSQL   = probeHead + knownStandbysSQL + probeTail + statusColumnSQL + probeFrom
)

// The last column: whether the role may read server files, or the
// postmaster's status (line 8 of postmaster.pid, "" when it cannot be
// read).
const (
	privilegeColumnSQL = `,
  pg_catalog.has_function_privilege(` + readFileProcSQL + `, 'EXECUTE')`
	statusColumnSQL = `,
  coalesce(pg_catalog.split_part(pg_catalog.pg_read_file('postmaster.pid', 0, 8192, true), E'\n', 8), '')`
)

// The standbys column (standbysColumn): the primary's WAL senders, and
// the replica variants' stand-in. The senders are read from
// pg_stat_get_wal_senders() and pg_get_replication_slots() directly, not
// from pg_stat_replication: that view joins pg_stat_get_activity(NULL),
// whose first call in a transaction copies the status of every backend
// of the server (pgstat_read_current_status: each slot's application
// name, client host and up to track_activity_query_size bytes of its
// query), and builds a row of 30 columns for each, to take two columns of
// the senders' rows: 100 to 200 µs of every probe at rest, more than the
// rest of the standbys column (issue 28). A sender's client address and
// application name are fixed while its process lives (a physical
// replication connection cannot SET one), so pgdns keeps them by pid
// (senders.go) and sends the pids it knows with the statement ($1, $2:
// senderKnownSQL); the server reads a sender's row of
// pg_stat_get_activity(pid) (the function: the pg_stat_activity view
// joins pg_database and pg_authid, and locks both) and its slot only for
// a sender it does not list, so only when the set of senders changed,
// and for all of them every senderNamesMaxAge. A sender holds its slot
// for as long as its process lives (a physical one names it once,
// primary_slot_name, whose change restarts the WAL receiver; a logical
// one may take another between two streams, read again within
// senderNamesMaxAge, as its names are). Each row is [pid, sync_state,
// slot_name, known, [client_addr, application_name]], slot_name and the
// names NULL when known, the names NULL too when the sender ended
// between the two reads (the row pg_stat_replication's join would not
// have had). The rows are
// an ARRAY() sub-select made JSON, each sender's slot a sub-select of its
// row (a sender holds one slot at most), not json_agg over a join with
// the slots: an aggregate and a hash join are set up on every probe of
// the primary, senders or not, for about 13% of its server time at rest
// (perf), where the ARRAY() sub-select sets up a sort. A logical WAL
// sender (connected to a database: a subscription, pg_recvlogical) gives
// no application name: it streams to no standby, and a subscription's
// name, its application name, may be a standby's, whose own row it was
// taken for once that standby's sender was gone (review 12b; zone's
// senderIndex matches rows by name). Nor a slot: a logical slot (one of a
// database, datoid set) is no standby's, and without pg_read_all_stats a
// subscription's or pg_recvlogical's on a slot named as a standby's was
// the row that proved that standby, the orphan of a failover, a follower
// of the new primary (review 13a). Nor does a physical sender that
// reports no apply position (replay_lsn NULL): pg_receivewal's and
// pg_basebackup -X stream's (receivelog.c's sendFeedback sends
// InvalidXLogRecPtr as apply, always), given a standby's name, was the
// same wrong row (review 12b, finding 2), where a standby's WAL receiver
// reports its replay position in every reply (XLogWalRcvSendReply). Its
// slot is not read (pg_receivewal -S may hold a standby's slot once the
// standby's sender is gone), and its application name reads as the
// empty string (a real empty one as NULL, the same to zone): pgdns keeps
// it by -pid, known only while its replay_lsn stays NULL, so that a
// standby whose row was read before its first reply (1 to 100 ms after it
// connects) has its names read again at its next probe (senderKnownSQL).
// A role without pg_read_all_stats reads every column of every row but
// the pid NULL, state too: such a row is read as before, and proves no
// replica whose timeline is hidden its follower (zone/hidden.go; its
// replay_lsn says nothing).
const (
	standbysSQL = `
  CASE WHEN pg_catalog.pg_is_in_recovery() THEN '[]'
    ELSE pg_catalog.array_to_json(ARRAY(SELECT pg_catalog.json_build_array(w.pid, w.sync_state,
        CASE WHEN NOT ` + senderKnownSQL + ` AND (w.replay_lsn IS NOT NULL OR w.state IS NULL) THEN (SELECT s.slot_name FROM pg_catalog.pg_get_replication_slots() s WHERE s.active_pid OPERATOR(pg_catalog.=) w.pid AND s.datoid IS NULL) END,
        ` + senderKnownSQL + `,
        CASE WHEN NOT ` + senderKnownSQL + ` THEN (SELECT pg_catalog.json_build_array(pg_catalog.host(a.client_addr),
            CASE WHEN coalesce(a.datid, 0::pg_catalog.oid) OPERATOR(pg_catalog.<>) 0::pg_catalog.oid THEN NULL
              WHEN w.replay_lsn IS NULL AND w.state IS NOT NULL THEN ''
              WHEN a.application_name OPERATOR(pg_catalog.<>) '' THEN a.application_name END)
          FROM pg_catalog.pg_stat_get_activity(w.pid) a) END)
      FROM pg_catalog.pg_stat_get_wal_senders() w ORDER BY w.pid))::pg_catalog.text
  END,`
	replicaStandbysSQL = `
  CASE WHEN pg_catalog.pg_is_in_recovery() THEN '[]' END,`
	knownStandbysSQL = `
  CASE WHEN pg_catalog.pg_is_in_recovery() THEN '[]'
    ELSE pg_catalog.array_to_json(ARRAY(SELECT CASE WHEN ` + senderKnownSQL + `
        THEN pg_catalog.json_build_array(w.pid, w.sync_state, NULL::pg_catalog.text, true, NULL::pg_catalog.json) END
      FROM pg_catalog.pg_stat_get_wal_senders() w ORDER BY w.pid))::pg_catalog.text
  END,`
)

// senderKnownSQL, in standbysSQL: the names of WAL sender w are the ones
// pgdns sent with the statement (senders.go): its pid is one of $2, or
// -pid while its replay_lsn is NULL (names read with no apply position
// reported), of the server run $1 (pg_postmaster_start_time() in µs, as
// the probe's column reads it).
const senderKnownSQL = `coalesce((w.pid OPERATOR(pg_catalog.=) ANY ($2::integer[])
          OR (w.replay_lsn IS NULL AND (OPERATOR(pg_catalog.-) w.pid) OPERATOR(pg_catalog.=) ANY ($2::integer[])))
        AND (extract(epoch FROM pg_catalog.pg_postmaster_start_time()) OPERATOR(pg_catalog.*) 1000000)::bigint OPERATOR(pg_catalog.=) $1::bigint, false)`

// probeHead, probeTail and probeFrom are the statements' columns before
// the standbys column and after it (but the last), and where they read
// the WAL receiver.
const probeHead = `SELECT
  pg_catalog.pg_is_in_recovery(),
  CASE WHEN pg_catalog.pg_is_in_recovery() THEN '' ELSE pg_catalog.pg_current_wal_insert_lsn()::pg_catalog.text END,
  coalesce(pg_catalog.pg_last_wal_receive_lsn()::pg_catalog.text, ''),
  coalesce(pg_catalog.pg_last_wal_replay_lsn()::pg_catalog.text, ''),
  CASE WHEN pg_catalog.pg_is_in_recovery()
    THEN CASE WHEN w.pid IS NULL THEN 0 ELSE coalesce(w.received_tli, -1) END::bigint
    ELSE ('x' OPERATOR(pg_catalog.||) pg_catalog.substr(pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_lsn()), 1, 8))::bit(32)::bigint
  END,
  greatest((pg_catalog.pg_control_checkpoint()).timeline_id,
    CASE WHEN pg_catalog.pg_is_in_recovery() AND w.received_tli IS NULL THEN (pg_catalog.pg_control_recovery()).min_recovery_end_timeline END)::bigint,
  (pg_catalog.pg_control_system()).system_identifier::pg_catalog.text,
  (extract(epoch FROM pg_catalog.pg_postmaster_start_time()) OPERATOR(pg_catalog.*) 1000000)::bigint,`

const probeTail = `
  coalesce(w.conninfo, ''),
  CASE WHEN w.pid IS NULL THEN '' ELSE coalesce(w.slot_name, pg_catalog.current_setting('primary_slot_name')) END,
  pg_catalog.pg_has_role(` + readAllStatsRoleSQL + `, 'USAGE'),
  pg_catalog.current_setting('synchronous_standby_names') OPERATOR(pg_catalog.<>) '',
  pg_catalog.current_setting('wal_block_size')::integer,
  pg_catalog.pg_size_bytes(pg_catalog.current_setting('wal_segment_size')),
  coalesce(pg_catalog.left(pg_catalog.current_setting('pgdns.drain', true), 65), ''),
  coalesce(pg_catalog.left(pg_catalog.current_setting('pgdns.offline', true), 65), ''),
  coalesce(w.status OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) coalesce(w.sender_port::pg_catalog.text, '')
    OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) coalesce(w.sender_host, ''), ''),
  pg_catalog.current_setting('cluster_name'),
  pg_catalog.current_setting('default_transaction_read_only'),
  CASE WHEN pg_catalog.pg_is_in_recovery() THEN '' ELSE pg_catalog.pg_current_wal_flush_lsn()::pg_catalog.text
    OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) ` + statsResetSQL + `::pg_catalog.text END,
  ` + confLoadedSQL + `,
  ` + everyRoleSQL + `,
  CASE WHEN pg_catalog.pg_is_in_recovery() THEN coalesce((pg_catalog.pg_stat_get_wal_receiver()).received_tli, -1) ELSE 0 END::bigint`

const probeFrom = `
FROM pg_catalog.pg_stat_get_wal_receiver() w`

// historySQL reads a timeline history file ("" when there is none). It
// needs EXECUTE on pg_read_file (PostgreSQL 11+ revokes it from PUBLIC: a
// superuser, or GRANT EXECUTE ON FUNCTION pg_read_file(text, bigint,
// bigint, boolean), which reads pg_wal/ without pg_read_server_files).
// historyPrivilegeSQL asks for it first, in a statement of its own: the
// executor checks EXECUTE on every function of an expression when it
// initialises it, whichever CASE branch runs, so only a statement without
// pg_read_file asks without an ERROR in the server's log (readHistory asks
// again now and then); without it the probe does without.
const (
	historySQL          = `SELECT coalesce(pg_catalog.pg_read_file('pg_wal/' OPERATOR(pg_catalog.||) $1 OPERATOR(pg_catalog.||) '.history', 0, 1048576, true), '')`
	historyPrivilegeSQL = `SELECT pg_catalog.has_function_privilege(` + readFileProcSQL + `, 'EXECUTE')`
)

// readFileProcSQL is pg_read_file(text, bigint, bigint, boolean) as a
// regprocedure literal: the parser turns a typed literal into its OID
// once, when the statement is prepared, so has_function_privilege(oid,
// text) checks only the ACL on each run. Given the signature as text,
// the server parsed it on every run (regprocedurein runs the SQL grammar
// on each type name): about 6% of a replica's server time per probe
// (perf, issue 28). EXECUTE is still checked on every run, so a GRANT or
// REVOKE in the middle of a session is seen at the next probe.
const readFileProcSQL = `'pg_catalog.pg_read_file(pg_catalog.text, bigint, bigint, boolean)'::pg_catalog.regprocedure`

// readAllStatsRoleSQL is pg_read_all_stats as a regrole literal, for the
// probe's pg_has_role column, for the same reason: its OID is resolved
// when the statement is prepared (a built-in role: it is never dropped),
// where a role's name was looked up on every run (pg_has_role_name, about
// 1% of a replica's server time per probe at rest in perf). Membership is
// still checked on every run: a GRANT or REVOKE of pg_monitor is seen at
// the next probe.
const readAllStatsRoleSQL = `'pg_read_all_stats'::pg_catalog.regrole`

// pgChecker keeps one session with one host and opens another when it
// ends. pgx opens it; then the checker drives its socket (session.go).
type pgChecker struct {
	// The host's connection config is made from configs for each
	// connect (config), not kept: a copy of pgx's ConnConfig was about
	// 400 bytes a host, and a host connects rarely (issue 28).
	configs *hostConfigs
	host    string
	port    uint16
	// (reachTry, rewatch and crashed sit beside port, and noHistories
	// and historyTL beside the other flags below, in what was padding:
	// with the allocator's 8-byte header a checker is in the 896-byte
	// size class; TestCheckerBytesPerHost bounds a checker and its
	// config at 1,700 bytes a host, so it would not see a move to the
	// next classes: measure with it when adding a field.)
	//
	// The attempt under way is judged for silence (reachTry: below).
	reachTry bool
	// rewatch: the last Check did not prove the server gone, so the host
	// may still be answered; should its session be gone (lost after a
	// good probe, or closed by a failed one), Watch opens another.
	rewatch bool
	// crashed: a session closed since the last sample had the server's
	// crash notice (session.crashed); the next sample says so.
	crashed bool
	sess    *session

	// When a new session to the server was last admitted (a connect, or
	// the start of an admission attempt), how many probes have run since,
	// and the attempt under way: its result, and how to end it.
	admitEvery    time.Duration // the admission interval; 0: never asked
	admittedAt    time.Time
	sinceAdmitted int
	admitting     chan error
	admitStop     context.CancelFunc
	reachedAt     time.Time  // the last bare connect (reach), status "ready"
	reaches       int        // reaches since the last that sent a startup packet
	trialNext     time.Time  // when the next whole session start is due (trial.go)
	scram         *scramKeys // the SCRAM keys the last trial derived (trial.go)
	// The attempt under way is judged for silence (reachTry, above), the
	// bound it was given, the slowest probe of the open session while it
	// ran, and how many attempts in a row got no answer while the session
	// was fast (reachTimedOut).
	reachRaw      *rawConnect // the bare connect under way on a socket of our own (reach.go)
	reachBound    time.Duration
	reachSlowest  time.Duration
	reachTimeouts int
	// cancelsOut: bare connects' cancels of this session sent whose
	// close was not read, each of which may still signal it
	// (reachcancel.go).
	cancelsOut int
	// readsStatus: the session's role may read server files, so its
	// probes run probeStatusSQL, whose status column tells admission
	// (admission.go); rowStatus: the last row is probeStatusSQL's; ready:
	// its status said "ready" (the next probe may reach).
	readsStatus, rowStatus, ready bool
	// keepColumns, set by tests only: the last probe's columns (c.row)
	// are kept after it, not given back, so that a test reads them.
	keepColumns bool
	// replica: the last probe found the server in recovery, so the next
	// may run a replica variant of the statement (statement); lastRTT is
	// the last probe's round trip.
	replica bool
	// noHistories: reading history files is not permitted to the session
	// opened at deniedIn (as of deniedAt): not asked again in it before
	// historyRetry (0: the default one) has passed, at once in another.
	// permittedIn: the session opened then may read them.
	noHistories bool
	lastRTT     time.Duration

	// The history of historyTL (below, beside the flags) on the server
	// run historyRun, read once per timeline and run, not every probe
	// (facts.go).
	historyRun         serverRun
	history            []zone.TimelineEnd
	deniedIn, deniedAt time.Time
	permittedIn        time.Time
	historyRetry       time.Duration

	row probeRow // the probe's row: its columns while it runs, what is kept of them across probes

	// When the session was opened, and whether its settings hide the
	// server's (shadow.go): the notes, read once per session; nil when
	// none does (most sessions: a pointer, not three strings, a host).
	connectedAt time.Time
	shadows     *shadowNotes
	// The settings every role's new sessions get (ALTER ROLE ALL SET) as
	// the session's start saw them (everyRoleSQL): everyRoleKnown once
	// read; everyRoleMoved once a probe read another, so the session no
	// longer shows what a new one gets and is reopened.
	//
	// What a new session's default_transaction_isolation is, as the
	// session's start read it (shadow.go): serializable (unless a setting
	// of pgdns's own hides it: shadows); when the session read it
	// (confLoaded, pg_conf_load_time in µs; 0: not known), and whether a
	// probe of the server in recovery found a reload since (confReloaded),
	// which has the session reopened.
	everyRole, confLoaded          int64
	everyRoleKnown, everyRoleMoved bool
	serializable, confReloaded     bool
	historyTL                      uint32 // historyRun's timeline: above

	// alarm cuts the session's waits short: a kick between probes, the
	// end of the context of a probe or a Watch (session.go).
	alarm alarm
}

// Check implements Checker.
func (c *pgChecker) Check(ctx context.Context) (Sample, error) {
	by, _ := ctx.Deadline()
	var s Sample
	err := c.check(ctx, by, &s)
	return s, err
}

// CheckWithin is Check with a deadline timeout from now, which the
// session's read deadline keeps, not a context per probe.
func (c *pgChecker) CheckWithin(ctx context.Context, timeout time.Duration) (Sample, error) {
	var s Sample
	err := c.checkInto(ctx, timeout, &s)
	return s, err
}

// checkInto implements timedChecker: CheckWithin, into s.
func (c *pgChecker) checkInto(ctx context.Context, timeout time.Duration, s *Sample) error {
	return c.check(ctx, time.Now().Add(timeout), s)
}

// late reports whether a probe by (zero: none) under ctx is past its
// deadline.
func late(ctx context.Context, by time.Time) bool {
	return ctx.Err() != nil || !by.IsZero() && !time.Now().Before(by)
}

// check is one probe, to be done by by (zero: by ctx's end alone), into s
// (zero when it fails). The sample is
// filled in place, not returned: a host's goroutine probes on a stack of a
// few KiB (intake.go), and each copy of a Sample on the way up was 400
// bytes more of it.
func (c *pgChecker) check(ctx context.Context, by time.Time, s *Sample) (err error) {
	*s = Sample{}
	c.row.take()       // the row's columns, this probe's only (proberow.go)
	c.settleCancel(by) // a cancel of ours out finds the session idle (reachcancel.go)
	// A host that accepted no session now would not give Watch one
	// either: another try would only leave a second backend stuck in its
	// startup (behind a catalog lock, say) each probe.
	connected := true
	defer func() {
		if !c.keepColumns {
			c.row.drop()
		}
		c.rewatch = connected && !errors.Is(err, ErrNotServing)
		if err != nil {
			*s = Sample{}
		}
		c.closingSampled(s, err) // closing.go
	}()
	// asked: admission was asked before the query, or need not be (a
	// session opened by this probe was admitted just now).
	asked := c.sess == nil
	if c.sess != nil && (c.sess.ended() || c.everyRoleMoved || c.confReloaded || c.shadows != nil && time.Since(c.connectedAt) >= shadowReopen) {
		// Ended since the last probe (seen by a wait between probes, or
		// a history read that gave up), or due for a new session that
		// shows whether its settings still hide the server's, or that
		// gets every role's settings as they are now, or the server's
		// default_transaction_isolation after a reload (shadow.go).
		c.Close()
	}
	var start, end time.Time
	// stopping: the server was found shutting down, by this probe or on
	// this session before (lingering.go).
	var stopping error
	// cut: our session ended (or a new one was ended in its setup) with
	// nothing that proves the server is not serving; see below.
	var cut error
	if c.sess == nil {
		if err := c.openBy(ctx, by); err != nil {
			var cf connectFailure
			if errors.As(err, &cf) {
				err = connectError(cf.err)
				if late(ctx, by) {
					connected = false
					return errors.New("connect: timed out (probe.timeout): the host accepted no session")
				}
				if !terminated(err) {
					connected = false
					return classify(err)
				}
			} else {
				err = fmt.Errorf("probe query: %w", err)
				if late(ctx, by) {
					return errors.New("probe query: timed out (probe.timeout)")
				}
				if !unproven(err) {
					return classify(err)
				}
			}
			cut = err
		}
	} else if stopping = c.sess.stopping; stopping != nil {
		asked = true // shutting down: it admits no new session again
	} else if !c.readsStatus { // else the probe's own row tells (afterProbe)
		if err := c.admission(by); err != nil {
			if !shuttingDown(err) {
				c.Close() // a server stopping smartly waits for every open session to end
				return err
			}
			stopping = err // linger decides, once the row says whether it is writable
		}
		asked = true
	} else {
		c.reach(by) // a bare connect beside the query, when one is due
	}
	if cut == nil {
		if start, end, err = c.query(ctx, by); err != nil {
			if err == errPromotedLate {
				return err // ambiguous; the session is idle and kept
			}
			c.Close()
			if late(ctx, by) {
				return errors.New("probe query: timed out (probe.timeout)")
			}
			if !unproven(err) {
				return classify(err)
			}
			cut = err
		}
	}
	if cut != nil {
		// Our session ended, and nothing in how it ended proves the
		// server is not serving (review 5, F6 and F11): a new session
		// tells, as between probes (Watch). One that is admitted shows
		// it serves, and is probed; a server stopping or crashed refuses
		// it at once (refused, 57P03), which keeps that failure
		// definitive and as quick as before. Once per probe.
		if start, end, err = c.retry(ctx, by, cut); err != nil {
			if late(ctx, by) && !errors.Is(err, ErrNotServing) {
				return errors.New("probe query: timed out (probe.timeout)")
			}
			return err
		}
	}
	s.Start, s.End = start, end
	s.IP = c.sess.ip
	if err := parseProbeRow(&c.row, s); err != nil {
		return fmt.Errorf("probe query: %w", err)
	}
	c.everyRoleSeen(c.row.values[everyRoleColumn])
	c.confSeen(c.row.values[confLoadedColumn], s.InRecovery)
	if err := c.afterProbe(by, asked); err != nil {
		if !shuttingDown(err) {
			c.Close() // a server stopping smartly waits for every open session to end
			return err
		}
		stopping = err
	}
	if stopping != nil {
		// Kept while other sessions on a writable server remain, to see
		// what they write (lingering.go); else closed, as above.
		if err := c.linger(ctx, by, s, stopping); err != nil {
			c.Close()
			return err
		}
	}
	s.History = c.readHistoryBy(ctx, by, end.Sub(start), s)
	s.DefaultSerializable = c.serializable
	if n := c.shadows; n != nil {
		s.SettingShadowed, s.ReadOnlyShadowed, s.IsolationShadowed = n.drain, n.readOnly, n.isolation
		if n.everyRoleReadOnly {
			s.DefaultReadOnly, s.ReadOnlyShadowed = true, "" // every role's fence (shadowNotes)
		}
		if n.everyRoleSerializable {
			s.DefaultSerializable, s.IsolationShadowed = true, ""
		}
	}
	s.Crashed, c.crashed = c.crashed, false
	c.sendCancel() // the probe is done with the session
	return nil
}

// query runs the probe's statement on c's session by by (zero: no
// deadline) under ctx, preparing it again if the session lost it, and
// keeps its columns in c.row: start and end frame the round trip that
// read them. The session is left as it is. The statement is the variant
// for what the last probe found (statement): when that no longer holds,
// the same probe runs the right one at once (at most twice more: a grant
// revoked, a replica promoted), and its round trip is the frame.
func (c *pgChecker) query(ctx context.Context, by time.Time) (start, end time.Time, err error) {
	read := false // c.row holds this probe's row
	// full: the WAL senders' names are read in this probe (a promotion, or
	// a sender the known variant did not list); the known variant is run
	// only when its round trip leaves room for a second before by, as the
	// replica variants are (statement).
	full := false
	// reruns: the statement got a cancel of ours (reachcancel.go) and
	// ran again, at most twice (the postmaster signals a backend twice).
	reruns := 0
	for range 4 + cancelReruns { // a revoke, a promotion and a new sender each send the loop round once at most
		room := by.IsZero() || 3*c.lastRTT < time.Until(by)
		st, run := c.row.senders.request(c.statement(by), time.Now(), room, full)
		start = time.Now()
		var r reply
		r, err = c.sess.exchange(ctx, &c.alarm, run, by)
		if err == nil && statementLost(r.err) {
			if r, err = c.sess.exchange(ctx, &c.alarm, st.prepare, by); err == nil {
				if err = r.err; err == nil {
					start = time.Now()
					r, err = c.sess.exchange(ctx, &c.alarm, run, by)
				} else {
					err = fmt.Errorf("prepare: %w", poolerHint(err))
				}
			}
		}
		end = time.Now()
		if err == nil && reruns < cancelReruns && c.cancelledByUs(r.err) && (by.IsZero() || time.Until(by) > end.Sub(start)*3/2) {
			// A cancel of ours that landed in the statement (a fork
			// slower than cancelWait): the session is idle again; once
			// the cancel's close is read it signals no more, and the
			// statement runs again: the probe counts nothing of it.
			reruns++
			c.settleCancelled(by)
			continue
		}
		c.rowStatus = c.readsStatus
		if err == nil && c.readsStatus && privilegeLost(r.err) {
			// The grant was revoked in the middle of the session: this
			// probe runs probeSQL (or its replica variant), and admission
			// is asked with a new session again (afterProbe), until a
			// probe finds the grant back.
			c.readsStatus = false
			continue
		}
		if err == nil {
			if err = r.err; err == nil {
				err = c.row.set(r)
			}
		}
		if err == nil && c.row.null[standbysColumn] {
			// The replica variant on a server no longer in recovery:
			// promoted since the last probe. The primary's statement reads
			// its WAL senders, in this probe when there is room for its
			// round trip, else in the next (this one fails, ambiguously,
			// and leaves the session as it is: nothing is pending on it).
			c.replica, full = false, true
			if !by.IsZero() && time.Until(by) < (end.Sub(start))*3/2 {
				return start, end, errPromotedLate
			}
			continue
		}
		if err == nil && st.known && unknownSender(c.row.values[standbysColumn]) {
			// A WAL sender pgdns does not list (a replica connected, the
			// server restarted): the primary's statement reads its names.
			full = true
			continue
		}
		read = err == nil
		break
	}
	if err == nil && !read {
		err = errors.New("the probe's statement did not settle on a variant") // unreachable: see the loop
	}
	if err != nil {
		return start, end, fmt.Errorf("probe query: %w", c.failure(err))
	}
	c.replica = len(c.row.values[0]) == 1 && c.row.values[0][0] == 't'
	c.lastRTT = end.Sub(start)
	return start, end, nil
}

// errPromotedLate: a probe found its server promoted with no time left
// to read its WAL senders; its session is kept, and the next probe reads
// them (query).
var errPromotedLate = errors.New("probe query: the server left recovery since the last probe, and its WAL senders are read by the next probe (no time left in this one)")

// unproven reports whether err, the end of our session in the middle of
// a probe, leaves open that the server still serves: pg_terminate_backend
// ends one session with the same 57P01 that a fast shutdown sends to all,
// and a reset or an end of the socket without a word from the server is
// also what a middlebox, a conntrack flush or a load balancer's idle
// timeout do to one connection. A crash (57P02) and the server's other
// errors are the server's word and stand.
func unproven(err error) bool {
	if terminated(err) {
		return true
	}
	var pgErr *pgconn.PgError
	return !errors.As(err, &pgErr) && definitive(err) && !errors.Is(err, net.ErrClosed)
}

// retry follows a probe whose session ended with err (unproven): it opens
// a new session by by and probes on it, and returns the probe's failure,
// classified. A new session refused as a stopping or crashed server
// refuses it (connection refused, 57P03, its end while it starts) makes
// err definitive; one that fails otherwise (a timeout, authentication)
// leaves the probe failed ambiguously, since nothing proved the server
// gone; so does an unproven end of the new session too (killed again):
// it was admitted, so the server served.
func (c *pgChecker) retry(ctx context.Context, by time.Time, err error) (start, end time.Time, _ error) {
	if oerr := c.openBy(ctx, by); oerr != nil {
		return start, end, reopenFailed(err, oerr)
	}
	start, end, qerr := c.query(ctx, by)
	if qerr != nil {
		c.Close()
		if unproven(qerr) {
			return start, end, ambiguous{qerr} // admitted, so serving: ended again
		}
		return start, end, classify(qerr)
	}
	return start, end, nil
}

// reopenFailed is what a session that ended with err (unproven) and a
// new session that then failed to open with oerr prove, classified (retry,
// Watch): refused as a stopping or crashed server refuses it (connection
// refused, 57P03, its end while it starts), err is definitive; admitted
// and then answered with the server's own word, that word; otherwise (a
// timeout, a login the server refused, admitted and ended again without
// proof: killed again in its setup) nothing proved the server gone, and
// the failure is ambiguous.
func reopenFailed(err, oerr error) error {
	var cf connectFailure
	refused := errors.As(oerr, &cf)
	if refused {
		oerr = connectError(cf.err)
	} else {
		oerr = fmt.Errorf("probe query: %w", oerr)
	}
	switch {
	case refused && !terminated(oerr) && errors.Is(classify(oerr), ErrNotServing):
		return refusedAfter{classify(err), oerr} // refused: as a stopping or crashed server does
	case !refused && !unproven(oerr):
		return classify(oerr) // admitted, and then the server's own word
	}
	return ambiguous{fmt.Errorf("%w; and a new session: %v", err, oerr)}
}

// ambiguous is a failure that proves nothing about the server, whatever
// its cause says: errors.Is and errors.As still see the cause, classify
// leaves it as it is.
type ambiguous struct{ err error }

func (e ambiguous) Error() string { return e.err.Error() }
func (e ambiguous) Unwrap() error { return e.err }

// connectFailure is a failure to open a new session before the server
// accepted it: no session at all.
type connectFailure struct{ err error }

func (e connectFailure) Error() string { return e.err.Error() }
func (e connectFailure) Unwrap() error { return e.err }

// open opens a new session to c's server: pgconn connects, prepares the
// probe's statement and reads the settings sources (prepare), then the
// checker takes the socket over (startSession). A failure to connect is a
// connectFailure; one after it is what the session's socket or the
// server said.
//
// It runs on a goroutine of its own, which ends with it: pgconn's connect
// (the dial, TLS, SCRAM) needs 8 to 16 KiB of stack, and the runtime
// gives a goroutine's stack back only by halves, at collections, while
// less than a quarter of it is in use. On the host's goroutine, whose
// probes and waits fit in 4 KiB (intake.go), each host kept that stack
// for good: 8.5 KiB a host at a thousand hosts.
func (c *pgChecker) open(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- c.connect(ctx) }()
	return <-done
}

// connect is open, on the calling goroutine.
func (c *pgChecker) connect(ctx context.Context) error {
	cfg := c.config()
	pc, err := pgconn.ConnectConfig(ctx, &cfg.Config)
	if err != nil {
		return connectFailure{tlsRefusal(cfg, err)} // a certificate that does not verify refuses every client that verifies (R9-1)
	}
	c.cancelsOut = 0 // a cancel of the last session's backend cannot reach this one
	c.admittedAt, c.sinceAdmitted = time.Now(), 0
	c.connectedAt = c.admittedAt
	c.readsStatus, c.ready = false, false // its role's privilege (and status) is read by its first probe
	c.replica = false                     // and the server's role
	if err := c.prepare(ctx, pc); err != nil {
		if f := socketFailure(pc.Conn()); f != nil && !definitive(err) {
			err = f
		}
		cctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_ = pc.Close(cctx)
		return err
	}
	pid, key := pc.PID(), pc.SecretKey()
	s, err := startSession(ctx, pc)
	if err != nil {
		return fmt.Errorf("taking the session over: %w", err)
	}
	if len(key) == 4 { // PostgreSQL's before 18, and 18's under protocol 3.0
		s.pid, s.key = pid, binary.BigEndian.Uint32(key)
	}
	c.sess = s
	return nil
}

// openBy is open, done by by (zero: by ctx's end alone).
func (c *pgChecker) openBy(ctx context.Context, by time.Time) error {
	if !by.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, by)
		defer cancel()
	}
	return c.open(ctx)
}

// failure is what an operation on c's session that failed with err
// proves: err, or the socket's own failure when err proves less.
func (c *pgChecker) failure(err error) error {
	if c.sess == nil {
		return err
	}
	if f := socketFailure(c.sess.conn); f != nil && !definitive(err) {
		return f
	}
	return err
}

// connectError shortens pgx's connect errors, which repeat the user and
// database for every fallback, to their last cause, keeping the cause for
// errors.Is and errors.As.
func connectError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "08P01" && strings.HasPrefix(pgErr.Message, "unsupported startup parameter") {
		// PgBouncer's: the message's tail alone would be the name.
		return shortError{msg: "connect: " + pgErr.Message + " (SQLSTATE 08P01): the host is a pooler (PgBouncer?) refusing the probe's startup parameters; " +
			"hosts must be the PostgreSQL servers themselves", err: err}
	}
	msg := err.Error()
	if pgErr != nil && strings.HasPrefix(msg, "failed to connect") {
		// The server's message whole: it may hold ": " itself (`could
		// not access file "x": No such file or directory`, R8-6).
		return shortError{msg: "connect: " + pgErr.Message + " (SQLSTATE " + pgErr.Code + ")", err: err}
	}
	if i := strings.LastIndex(msg, ": "); i >= 0 && strings.HasPrefix(msg, "failed to connect") {
		return shortError{msg: "connect: " + msg[i+2:], err: err}
	}
	return fmt.Errorf("connect: %w", err)
}

// poolerHint says what a 42P05 (duplicate_prepared_statement) at the
// probe's prepare means: a PostgreSQL session starts with no prepared
// statement, so a session that has pgdns_probe already is not one
// session of one server but a transaction pooler's (PgBouncer, pool_mode
// = transaction) handing it a server connection another client (another
// pgdns) prepared on. The probe relies on session state (its statement,
// the settings sources read once per session, the watched socket): hosts
// must be the PostgreSQL servers themselves (review 5, F7).
func poolerHint(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P05" {
		return fmt.Errorf("%w: a new PostgreSQL session has no prepared statement, so this host is a transaction pooler (PgBouncer pool_mode = transaction?) "+
			"handing the probe another client's server connection; hosts must be the PostgreSQL servers themselves", err)
	}
	return err
}

// shortError is an error with a shorter message than its cause's.
type shortError struct {
	msg string
	err error
}

func (e shortError) Error() string { return e.msg }
func (e shortError) Unwrap() error { return e.err }

func optionalLSN(s string) (zone.LSN, error) {
	if s == "" {
		return 0, nil
	}
	return zone.ParseLSN(s)
}

// Close implements Checker.
func (c *pgChecker) Close() {
	c.stopAdmission()
	c.alarm.release()
	if c.sess == nil {
		return
	}
	c.crashed = c.crashed || c.sess.crashed
	c.sess.close()
	c.sess = nil
}

// Watcher is a Checker that can also watch its connection between probes.
type Watcher interface {
	// Watch blocks until ctx is done (it then returns ctx's error) or the
	// connection reports that the server went away (a definitive error),
	// or ended with what only a probe can tell (another error).
	Watch(ctx context.Context) error
}

// waiter is a Watcher whose host's goroutine waits between probes itself
// (intake.go, idle): on the session's socket, reading whatever the server
// sends unasked, until its next tick, a kick, or the end of its context.
type waiter interface {
	Watcher
	// waitIdle is all Watch would do until ctx is done, until until, or
	// a kick on kick (which it takes, and the alarm's kick cuts the wait
	// short), while it is only to wait on an open session: it returns
	// idleWaited then. It returns idleWatch at once, or when the session
	// ends, when Watch has work to do (a session to open, an end to
	// tell); idleNothing when there is nothing to wait on at all.
	waitIdle(ctx context.Context, until time.Time, kick <-chan struct{}) (kicked bool, o idleOutcome)
	// wakeup is what cuts a waitIdle short from another goroutine.
	wakeup() *alarm
}

// idleOutcome is what a waitIdle did.
type idleOutcome int

const (
	idleWaited  idleOutcome = iota // waited on the open session
	idleWatch                      // Watch must run
	idleNothing                    // no session, none to open: wait without it
)

// waitIdle implements waiter: an open session is read by the host's
// goroutine between probes (session.go).
func (c *pgChecker) waitIdle(ctx context.Context, until time.Time, kick <-chan struct{}) (bool, idleOutcome) {
	switch {
	case c.sess != nil:
		if kicked, open := c.sess.wait(ctx, &c.alarm, until, kick); open || kicked {
			return kicked, idleWaited
		}
		return false, idleWatch // it ended: Watch tells what it means
	case c.rewatch:
		return false, idleWatch // a session to open
	}
	return false, idleNothing
}

// wakeup implements waiter.
func (c *pgChecker) wakeup() *alarm { return &c.alarm }

// Watch implements Watcher: it reads whatever the server sends on the
// session between probes, so that a shutdown message or a closed socket
// is seen the moment it arrives rather than at the next probe.
func (c *pgChecker) Watch(ctx context.Context) error {
	for {
		if c.sess == nil {
			if !c.rewatch {
				<-ctx.Done()
				return ctx.Err()
			}
			// The host may still be answered, yet its session is gone
			// (lost after a good probe, or closed by one that failed
			// ambiguously, a timeout say): open another at once rather
			// than stay blind until the next probe. Once per probe, so a
			// failing host is tried at most twice as often; never after
			// a definitive failure, which has ended the host already.
			c.rewatch = false
			if err := c.open(ctx); err != nil {
				var cf connectFailure
				if errors.As(err, &cf) {
					err = connectError(cf.err)
				}
				if err := classify(err); ctx.Err() == nil && errors.Is(err, ErrNotServing) {
					return err
				}
				continue // no session: wait for ctx
			}
		}
		for _, open := c.sess.wait(ctx, &c.alarm, time.Time{}, nil); open; _, open = c.sess.wait(ctx, &c.alarm, time.Time{}, nil) {
			if ctx.Err() != nil {
				return ctx.Err() // our own wake-up: the session stays open
			}
		}
		err := c.sess.end
		if errors.Is(err, net.ErrClosed) {
			// Closed on our side, and nobody said why: lost, as above.
			c.Close()
			continue
		}
		err = c.failure(err)
		c.Close()
		if !unproven(err) {
			return classify(err)
		}
		// pg_terminate_backend ends one session with the same 57P01 that
		// a fast shutdown sends to all, and a reset or end of the socket
		// without a word from the server is what a crash does and also
		// what a middlebox, a conntrack flush or a load balancer's idle
		// timeout do to one connection (review 5 F6): only a new session
		// tells them apart. A server shutting down or crashed refuses it
		// (57P03, connection refused), one that lost only our session (a
		// DBA, a job killing idle sessions, the network) accepts it, and
		// is still serving: watch the new one. Once per end, so no faster
		// than sessions are cut. A new session that fails otherwise (a
		// timeout, a login refused, ended again in its setup) proves
		// nothing either: the host's next probe tells (intake.go's
		// idle returns, and the host probes at once unless rounds drive it).
		cerr := c.open(ctx)
		if ctx.Err() != nil {
			return ctx.Err() // a session opened is kept
		}
		if cerr != nil {
			return reopenFailed(err, cerr)
		}
	}
}
