package probe

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// The probe query runs below pgx's query layer, on the session's own
// socket (session.go): probeSQL has no arguments, so pgx's query path
// would only re-sanitize its 1.2 kB of text and scan through its type map
// on every probe, which at a thousand hosts every 250 ms cost more CPU
// than the round trip itself (issue 17). The columns come back in
// PostgreSQL's text format and parseProbeRow reads them directly.
//
// It is a prepared statement, planned once per connection: sent as a
// simple Query, PostgreSQL parsed and planned it on every probe, and
// planning the pg_stat_replication join alone took most of the 1.7 ms of
// server time a probe cost (issue 28), on every host, every interval. A
// probe is then one Bind, Execute, Sync: one round trip, as before. The
// statement lives as long as its session: a new connection (after a
// restart, say) prepares it again, before its first probe's frame starts,
// and a session that lost it prepares it again (probeStatement.prepare).

// ProbeStatement is the name of the probe's prepared statement in its
// session (pg_prepared_statements.name).
const ProbeStatement = "pgdns_probe"

// ProbeStatusStatement is the name of the probe's statement that also
// reads the server's status (probeStatusSQL, admission.go);
// ProbeReplicaStatement and ProbeReplicaStatusStatement those of their
// replica variants (probeReplicaSQL, probeReplicaStatusSQL), and
// ProbeKnownStatement and ProbeKnownStatusStatement those of the
// primary's variants for WAL senders pgdns knows (probeKnownSQL,
// probeKnownStatusSQL).
const (
	ProbeStatusStatement        = "pgdns_probe_status"
	ProbeReplicaStatement       = "pgdns_probe_replica"
	ProbeReplicaStatusStatement = "pgdns_probe_replica_status"
	ProbeKnownStatement         = "pgdns_probe_known"
	ProbeKnownStatusStatement   = "pgdns_probe_known_status"
)

// ProbeSQL, ProbeStatusSQL, ProbeReplicaSQL, ProbeReplicaStatusSQL,
// ProbeKnownSQL and ProbeKnownStatusSQL are the texts of the probe's
// statements, for tools that must answer or measure them as PostgreSQL
// does (the bench's fake servers).
const (
	ProbeSQL              = probeSQL
	ProbeStatusSQL        = probeStatusSQL
	ProbeReplicaSQL       = probeReplicaSQL
	ProbeReplicaStatusSQL = probeReplicaStatusSQL
	ProbeKnownSQL         = probeKnownSQL
	ProbeKnownStatusSQL   = probeKnownStatusSQL
)

// NoSendersKnown are the parameters of ProbeSQL and ProbeStatusSQL that
// say pgdns knows no WAL sender's name: the server gives every sender's.
func NoSendersKnown() [][]byte { return senderParams(0, nil, nil) }

// SourcesSQL is the statement a probe session runs once, after preparing
// probeSQL (shadow.go), for the same tools.
const SourcesSQL = sourcesSQL

// IsolationSetSQL is the statement a probe session runs first, in a
// transaction of its own (shadow.go), for the same tools.
const IsolationSetSQL = isolationSetSQL

// SessionSQL is the statement a probe session runs once, before
// SourcesSQL (shadow.go), for the same tools.
const SessionSQL = sessionSQL

// probeColumns is the number of columns of probeSQL and probeStatusSQL;
// the last (statusColumn) is where they differ.
const (
	probeColumns = 25
	statusColumn = probeColumns - 1
	// timelineAgainColumn is a replica's receiver timeline read after
	// its replay position (probeSQL); 0 on a primary.
	timelineAgainColumn = statusColumn - 1
	// everyRoleColumn is everyRoleSQL's (shadow.go).
	everyRoleColumn = timelineAgainColumn - 1
	// confLoadedColumn is confLoadedSQL's (shadow.go).
	confLoadedColumn = everyRoleColumn - 1
)

// standbysColumn is the column of the primary's WAL senders, which the
// replica variants read as NULL on a server not in recovery.
const standbysColumn = 8

// probeStatement is one of the probe's prepared statements: its name,
// text, and the requests that run it and prepare it again. The primary's
// statements (senders) take the WAL senders whose names pgdns knows as
// parameters (standbysSQL); their run request here sends none, and a
// checker that knows some sends its own (senderNames.request). status is
// 1 for a statement that reads the server's status, 0 for the other;
// known: a variant that reads only the WAL senders pgdns lists
// (probeKnownSQL), run with what it knows, never with run.
type probeStatement struct {
	name, sql    string
	run, prepare []byte
	senders      bool
	known        bool
	status       int
}

func newProbeStatement(name, sql string, senders bool, status int) probeStatement {
	var params [][]byte
	if senders {
		params = senderParams(0, nil, nil)
	}
	return probeStatement{name: name, sql: sql, senders: senders, known: sql == probeKnownSQL || sql == probeKnownStatusSQL, status: status,
		run:     runRequest(name, params),
		prepare: encode(&pgproto3.Parse{Name: name, Query: sql}, &pgproto3.Sync{})}
}

// probeStatements are the probe's statements, by variant: [kind][status],
// kind 0 the primary's, 1 the replica's (statement picks one of those),
// knownVariant the primary's for WAL senders pgdns knows (senderNames.request).
var probeStatements = [3][2]probeStatement{
	{newProbeStatement(ProbeStatement, probeSQL, true, 0), newProbeStatement(ProbeStatusStatement, probeStatusSQL, true, 1)},
	{newProbeStatement(ProbeReplicaStatement, probeReplicaSQL, false, 0), newProbeStatement(ProbeReplicaStatusStatement, probeReplicaStatusSQL, false, 1)},
	{newProbeStatement(ProbeKnownStatement, probeKnownSQL, true, 0), newProbeStatement(ProbeKnownStatusStatement, probeKnownStatusSQL, true, 1)},
}

// knownVariant is the kind of probeStatements that probeKnownSQL is.
const knownVariant = 2

// statement is the variant a probe of c due by by (zero: no deadline)
// runs: a replica variant only while the last probe found the server in
// recovery and its round trip leaves room for a second before by, which
// a promotion costs (query): on a path whose round trip is a good part
// of probe.timeout the primary's statement is run on every host, so that
// a promotion never costs a probe its deadline and its session (review
// 5, F14).
func (c *pgChecker) statement(by time.Time) *probeStatement {
	replica := c.replica && (by.IsZero() || 3*c.lastRTT < time.Until(by))
	return &probeStatements[b2i(replica)][b2i(c.readsStatus)]
}

// sameTimeline reports whether a replica's receiver timeline read again
// after its replay position (timelineAgainColumn) is timeline, the one read
// before it.
func sameTimeline(row *probeRow, timeline int64) bool {
	again, err := strconv.ParseInt(string(row.values[timelineAgainColumn]), 10, 64)
	return err == nil && again == timeline
}

// probeRow is one row of probeSQL in text format: its columns are slices
// of the session's reply (set), and what is kept of them from probe to
// probe is copied into buffers of its own.
type probeRow struct {
	// The columns of the probe under way (take, drop): nil between
	// probes.
	*rowColumns

	// The strings read from the last row that did not change, kept so
	// that an unchanged value costs no allocation.
	conninfo       []byte
	clusterName    []byte
	appName        string // walReceiverAppName(conninfo, clusterName), when appNameOK
	appNameWhy     string
	appNameOK      bool
	receiver       string // the receiver column as read
	receiverStatus string
	senderHost     string
	senderPort     int
	slot           string
	drain          string
	offline        string

	// senders: the names of the primary's WAL senders, by pid, which the
	// primary's statements send back (senders.go).
	senders senderNames
}

// rowColumns are the columns of one probe's row. A checker holds them only
// while its probe runs (take, drop), from a pool: they are slices of the
// session's reply, valid until its next exchange, so nothing reads them
// after the probe, and kept in every checker they were 576 bytes a host,
// which kept it in the 1,536-byte size class (896 since, 6.1 MiB less
// live heap at ten thousand hosts: issue 28). The probes under way at
// once, a few dozen, share a few dozen of them.
type rowColumns struct {
	values [probeColumns][]byte
	null   [probeColumns]bool
}

var rowColumnsPool = sync.Pool{New: func() any { return new(rowColumns) }}

// take gives row columns for the probe under way, unless it has them.
func (row *probeRow) take() {
	if row.rowColumns == nil {
		row.rowColumns = rowColumnsPool.Get().(*rowColumns)
	}
}

// drop gives the probe's columns back at its end; cleared, so that the
// pool keeps no session's buffer.
func (row *probeRow) drop() {
	if c := row.rowColumns; c != nil {
		row.rowColumns = nil
		*c = rowColumns{}
		rowColumnsPool.Put(c)
	}
}

// prepare prepares the probe's statements (probeStatements) on pc, a new
// session, and reads the session's settings sources (shadow.go): all in
// one pipelined round trip, so that a new session costs a slow link (a
// WAN, TestOneSidedProbeDelayIsNoLag's 1.5 s proxy) no more round trips
// than the preparation alone did. Preparing probeStatusSQL needs no
// privilege (PostgreSQL checks EXECUTE when a statement runs).
func (c *pgChecker) prepare(ctx context.Context, pc *pgconn.PgConn) error {
	p := pc.StartPipeline(ctx)
	// The SET first, in a transaction of its own: the transaction it runs
	// in keeps the isolation it started with (shadow.go).
	p.SendQueryParams(isolationSetSQL, nil, nil, nil, nil)
	p.SendPipelineSync()
	for _, v := range probeStatements {
		for _, st := range v {
			p.SendPrepare(st.name, st.sql, nil)
		}
	}
	p.SendQueryParams(sessionSQL, nil, nil, nil, nil)
	p.SendQueryParams(sourcesSQL, nil, nil, nil, nil)
	if err := p.Sync(); err != nil {
		_ = p.Close()
		return fmt.Errorf("prepare: %w", err)
	}
	var columns []int
	rr, err := pipelineResult[*pgconn.ResultReader](p)
	if err == nil {
		_, err = rr.Close()
	}
	if err == nil {
		_, err = pipelineResult[*pgconn.PipelineSync](p)
	}
	if err != nil {
		_ = p.Close()
		return fmt.Errorf("prepare: %s: %w", isolationSetSQL, poolerHint(err))
	}
	for range 2 * len(probeStatements) {
		var sd *pgconn.StatementDescription
		if sd, err = pipelineResult[*pgconn.StatementDescription](p); err != nil {
			break
		}
		columns = append(columns, len(sd.Fields))
	}
	if err != nil {
		_ = p.Close()
		return fmt.Errorf("prepare: %w", poolerHint(err))
	}
	rr, err = pipelineResult[*pgconn.ResultReader](p)
	if err == nil {
		err = c.readSession(rr)
	}
	if err == nil {
		rr, err = pipelineResult[*pgconn.ResultReader](p)
	}
	if err == nil {
		err = c.readSources(rr)
	}
	if err != nil {
		_ = p.Close()
		return fmt.Errorf("reading pg_db_role_setting: %w", err)
	}
	if err := p.Close(); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	for _, n := range columns {
		if n != probeColumns {
			return fmt.Errorf("prepare: statements of %v columns, want %d", columns, probeColumns)
		}
	}
	return nil
}

// pipelineResult is p's next result, which must be a T.
func pipelineResult[T any](p *pgconn.Pipeline) (T, error) {
	var zero T
	res, err := p.GetResults()
	if err != nil {
		return zero, err
	}
	t, ok := res.(T)
	if !ok {
		return zero, fmt.Errorf("unexpected pipeline result %T", res)
	}
	return t, nil
}

// probeRequest runs the prepared probeSQL: Bind (the parameters of no
// known WAL sender, every column in text format), Execute, Sync. The same
// bytes on every probe of every session that knows no sender, encoded
// once (as every probeStatement's). The row
// description is the one the statement was prepared with (prepare checked
// its columns), so the server is not asked for it again.
var probeRequest = probeStatements[0][0].run

// encode is msgs in the wire format, one after the other.
func encode(msgs ...pgproto3.FrontendMessage) []byte {
	var b []byte
	for _, m := range msgs {
		var err error
		if b, err = m.Encode(b); err != nil {
			panic(err) // a fixed message that does not encode is a bug
		}
	}
	return b
}

// set makes row the one row of probeSQL in r, the probe's reply. Its
// columns are slices of the reply's buffer, valid until the session's
// next exchange (parseProbeRow copies what it keeps).
func (row *probeRow) set(r reply) error {
	if r.rows != 1 {
		return fmt.Errorf("%d rows, want 1", r.rows)
	}
	n, err := dataRowColumns(r.row, row.values[:], row.null[:])
	if err == nil && n != probeColumns {
		err = fmt.Errorf("%d columns, want %d", n, probeColumns)
	}
	return err
}

var errMalformedRow = errors.New("a malformed data row")

// dataRowColumns splits the body of a DataRow into its columns, at most
// len(values) of them, and says how many it has: NULL ones are nil with
// null set, the others slices of body.
func dataRowColumns(body []byte, values [][]byte, null []bool) (int, error) {
	bad := errMalformedRow
	if len(body) < 2 {
		return 0, bad
	}
	n := int(binary.BigEndian.Uint16(body))
	if n > len(values) {
		return n, nil
	}
	body = body[2:]
	for i := range n {
		if len(body) < 4 {
			return 0, bad
		}
		size := int(int32(binary.BigEndian.Uint32(body)))
		body = body[4:]
		values[i], null[i] = nil, size < 0
		if size < 0 {
			continue
		}
		if size > len(body) {
			return 0, bad
		}
		values[i], body = body[:size:size], body[size:]
	}
	return n, nil
}

// statementLost: the session no longer knows the probe's statement
// (26000 invalid_sql_statement_name): someone deallocated it, or a
// pooler between pgdns and the server moved the session to another
// backend. It is prepared again and the probe retried, once.
func statementLost(err error) bool {
	if err == nil {
		return false // errors.As would cost an allocation on every probe
	}
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "26000"
}

// parseProbeRow fills s from one row of probeSQL, as the checks of the
// pgx scan it replaces did: no column may be NULL (the query coalesces
// every one that could be), a boolean is t or f, integers are decimal,
// LSNs are PostgreSQL's X/X or empty.
func parseProbeRow(row *probeRow, s *Sample) error {
	if err := parseProbeFields(row, s); err != nil {
		return err
	}
	return parseProbeStandbys(row, s)
}

// parseProbeStandbys reads a primary's WAL senders from row into s, after
// parseProbeFields has returned: its frame (close to a KiB) and the
// senders' reader (senderNames.read) together took a primary's goroutine
// past the 4 KiB a host's probe fits in (TestHostStack).
//
//go:noinline
func parseProbeStandbys(row *probeRow, s *Sample) (err error) {
	s.Standbys, err = parseStandbys(row.values[8], s.StartedAt.UnixMicro(), s.End, s.InsertLSN, &row.senders)
	return err
}

// parseProbeFields is parseProbeRow but for the WAL senders.
//
//go:noinline
func parseProbeFields(row *probeRow, s *Sample) error {
	for i, null := range row.null {
		if null {
			return fmt.Errorf("column %d is NULL", i+1)
		}
	}
	v := &row.values
	var err error
	if s.InRecovery, err = parseBool(v[0]); err != nil {
		return fmt.Errorf("pg_is_in_recovery(): %w", err)
	}
	if s.InsertLSN, err = optionalLSN(string(v[1])); err == nil {
		if s.ReceiveLSN, err = optionalLSN(string(v[2])); err == nil {
			s.ReplayLSN, err = optionalLSN(string(v[3]))
		}
	}
	if err != nil {
		return err
	}
	block, err1 := strconv.ParseUint(string(v[13]), 10, 64)
	segment, err2 := strconv.ParseUint(string(v[14]), 10, 64)
	if err1 != nil || err2 != nil || block == 0 || segment == 0 || segment%block != 0 {
		return fmt.Errorf("bad wal_block_size %q or wal_segment_size %q", v[13], v[14])
	}
	s.WALBlockSize, s.WALSegmentSize = block, segment
	// No record ends inside a page header (probeSQL).
	s.InsertLSN = s.InsertLSN.PageBoundary(block, segment)
	if !s.InRecovery {
		s.ReplayLSN = s.InsertLSN
	}
	timeline, err1 := strconv.ParseInt(string(v[4]), 10, 64)
	ckptTimeline, err2 := strconv.ParseInt(string(v[5]), 10, 64)
	id, err3 := strconv.ParseInt(string(v[6]), 10, 64)
	started, err4 := strconv.ParseInt(string(v[7]), 10, 64)
	if err := errors.Join(err1, err2, err4); err != nil {
		return err
	}
	s.TimelineHidden = timeline == -1 && s.InRecovery // a WAL receiver whose timeline is hidden
	if s.TimelineHidden {
		timeline = 0
	}
	if err3 != nil || timeline < 0 || timeline > 1<<32-1 || (timeline == 0 && !s.InRecovery) ||
		ckptTimeline <= 0 || ckptTimeline > 1<<32-1 {
		return fmt.Errorf("bad system identifier %q or timeline %d/%d", v[6], timeline, ckptTimeline)
	}
	s.SystemID, s.Timeline, s.CheckpointTimeline = uint64(id), uint32(timeline), uint32(ckptTimeline)
	if s.InRecovery && s.Timeline != 0 && !sameTimeline(row, timeline) {
		// The receiver's timeline moved while the statement read it
		// (probeSQL): the replay position may be past where the first
		// read's timeline ended. Not known, as without a receiver.
		s.Timeline = 0
	}
	s.StartedAt = time.UnixMicro(started)
	if !row.appNameOK || !bytes.Equal(v[9], row.conninfo) || !bytes.Equal(v[18], row.clusterName) { // the same on every probe of one WAL receiver
		row.conninfo, row.clusterName, row.appNameOK = append(row.conninfo[:0], v[9]...), append(row.clusterName[:0], v[18]...), true
		row.appName, row.appNameWhy = walReceiverAppName(string(v[9]), string(v[18]))
	}
	s.AppName, s.AppNameWhy = row.appName, row.appNameWhy
	if string(v[17]) != row.receiver {
		row.receiver = string(v[17])
		row.receiverStatus, row.senderHost, row.senderPort = parseReceiver(row.receiver)
	}
	s.Receiver, s.SenderHost, s.SenderPort = row.receiverStatus, row.senderHost, row.senderPort
	if string(v[10]) != row.slot {
		row.slot = string(v[10])
	}
	s.SlotName = row.slot
	if s.TimelineHidden {
		s.AppName, s.AppNameWhy = "", "" // the conninfo is hidden, not empty
	}
	row.drain = reuse(row.drain, v[15])
	row.offline = reuse(row.offline, v[16])
	s.DrainSetting, s.OfflineSetting = row.drain, row.offline
	visible, err5 := parseBool(v[11])
	s.StatsHidden = !visible
	var err6 error
	s.SyncNamesSet, err6 = parseBool(v[12])
	var err7 error
	s.DefaultReadOnly, err7 = parseOnOff(v[19])
	if !s.InRecovery && err7 == nil {
		var flush []byte
		if flush, s.StatsReset, err7 = splitStatsReset(v[20]); err7 == nil {
			s.FlushLSN, err7 = optionalLSN(string(flush))
		}
		if err7 == nil {
			s.FlushLSN = s.FlushLSN.PageBoundary(block, segment)
		}
	}
	return errors.Join(err5, err6, err7)
}

// parseOnOff reads a boolean setting as current_setting shows it.
func parseOnOff(v []byte) (bool, error) {
	switch {
	case bytes.Equal(v, []byte("on")):
		return true, nil
	case bytes.Equal(v, []byte("off")):
		return false, nil
	}
	return false, fmt.Errorf("%q is not on or off", v)
}

// reuse returns last when it holds v, else v as a new string: a setting
// that does not change costs no allocation per probe.
func reuse(last string, v []byte) string {
	if string(v) == last {
		return last
	}
	return string(v)
}

// parseBool reads a boolean column in text format.
func parseBool(v []byte) (bool, error) {
	switch {
	case bytes.Equal(v, []byte("t")):
		return true, nil
	case bytes.Equal(v, []byte("f")):
		return false, nil
	}
	return false, fmt.Errorf("%q is not a boolean", v)
}
