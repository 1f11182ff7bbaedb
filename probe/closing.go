package probe

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgdns/pgdns/zone"
)

// The closing probe of a round (rounds.go) is there for one figure: a
// primary position read after the round's replica samples ended, which
// their byte bounds need (lag.go: p_j, read by the first primary probe
// that started at or after the replica's end). It ran the whole probe
// statement, a quarter of every probe pgdns made (1,330 of 5,329 a second
// at 1,000 hosts) and half of a primary's (issue 28). So it is a light
// probe: one statement of its own (closingSQL) that reads the primary's
// insert position, as the full statement does, and the backend's pid, on
// the session whose last probe was a full one that found the server
// writable:
//
//   - the same session is the same server run on the same timeline, still
//     writable: a server cannot enter recovery, nor change its timeline,
//     without a restart, which ends every session. The backend's pid,
//     the one the session's BackendKeyData named, shows that nothing
//     between pgdns and the server handed the session to another backend;
//     a pid that differs, or none known, makes the probe a full one;
//   - the position is read back across a WAL page header with the
//     wal_block_size and wal_segment_size that full probe read, which
//     cannot change while a server runs;
//   - it feeds the primary's WAL clock (the lag bounds) and the round's
//     bookkeeping alone (takeClosing): the host's role, timeline, server
//     run, WAL senders, settings, admission and the age of its facts
//     (ProbedAt) still come from full probes only (ticks, refreshes,
//     flux), and a light result never reaches record, where a sample
//     without them would read as a host with timeline 0 and no standbys;
//   - a light probe that fails is a failed probe, as a failed closing
//     probe was: an error the server answered closes the session and is
//     classified as the full statement's is, and a session cut under it
//     (nothing proving the server gone) is probed in full on a new one,
//     as check does with a session found ended;
//   - only a round's closing kick asks for it (kickClosing): a probe
//     round's (rounds.go), or a Refresh round's (finishRefreshes), unless
//     the next Refresh round may start while it is in flight and take it
//     for its own probe of the primary; a host kicked for anything else
//     meanwhile (a Refresh, flux) gets a full probe (kick), as does
//     everything a Refresh waits for.
//
// The statement is prepared on a session by its first light probe, in
// the same round trip (Close, Parse, Bind, Execute, Sync: a Close of a
// statement that does not exist is no error, so the request may be sent
// again whatever became of the last one), not with the others when the
// session opens: a replica never runs it. A session that lost it
// (26000) prepares it again in the same probe, as the others do.

// ClosingStatement is the name of the closing probe's prepared statement
// in its session (pg_prepared_statements.name).
const ClosingStatement = "pgdns_probe_closing"

// ClosingSQL is the text of the closing probe's statement, for tools that
// must answer or measure it as PostgreSQL does (the bench's fake servers).
const ClosingSQL = closingSQL

// closingSQL reads what a round's byte bounds need of the primary: its
// insert position (Sample.InsertLSN), and pg_backend_pid(), which ties
// the answer to the session's backend. Schema-qualified, as probeSQL.
const closingSQL = `SELECT pg_catalog.pg_current_wal_insert_lsn()::pg_catalog.text, pg_catalog.pg_backend_pid()`

// closingColumns is the number of columns of closingSQL.
const closingColumns = 2

// The closing statement's requests: run it, and prepare it and run it.
var (
	closingRun        = runRequest(ClosingStatement, nil)
	closingPrepareRun = encode(&pgproto3.Close{ObjectType: 'S', Name: ClosingStatement},
		&pgproto3.Parse{Name: ClosingStatement, Query: closingSQL},
		&pgproto3.Bind{PreparedStatement: ClosingStatement}, &pgproto3.Execute{}, &pgproto3.Sync{})
)

// closingState is what a session keeps for light probes: whether its
// last probe was a full one that found the server writable, and what that
// probe read that a light one does not. It lives and ends with its
// session (a new one starts without), and is made by the session's first
// full probe that finds a primary: a replica's session has none.
type closingState struct {
	ready          bool   // the last probe was a full one of a writable server
	block, segment uint64 // wal_block_size, wal_segment_size
	startedAt      time.Time
	systemID       uint64
	timeline       uint32
	prepared       bool // closingSQL is prepared on the session
	noLight        bool // the backend's pid did not match: full probes only
}

// closingSampled notes the end of a full probe on c's session, which
// read s unless it failed with err (check).
func (c *pgChecker) closingSampled(s *Sample, err error) {
	sess := c.sess
	if sess == nil {
		return
	}
	cs := sess.closing
	if err != nil || sess.ended() || s.InRecovery {
		if cs != nil {
			cs.ready = false
		}
		return
	}
	if cs == nil {
		cs = &closingState{}
		sess.closing = cs
	}
	cs.ready, cs.block, cs.segment = !cs.noLight, s.WALBlockSize, s.WALSegmentSize
	cs.startedAt, cs.systemID, cs.timeline = s.StartedAt, s.SystemID, s.Timeline
}

// closingChecker is a Checker that can probe lightly (checkClosing).
type closingChecker interface {
	// checkClosing is a closing probe, by timeout from now, into s: a
	// light one when it may (light), else a full one (check).
	checkClosing(ctx context.Context, timeout time.Duration, s *Sample) (light bool, err error)
}

// checkProbe is one probe of checker, by timeout from now, into s: a
// light one when light asks for it and the checker can (light reports
// whether it was), else checkWithin's.
//
//go:noinline
func checkProbe(ctx context.Context, checker Checker, timeout time.Duration, s *Sample, light bool) (bool, error) {
	if cc, ok := checker.(closingChecker); ok && light {
		return cc.checkClosing(ctx, timeout, s)
	}
	return false, checkWithin(ctx, checker, timeout, s)
}

// errClosingBackend: the closing statement ran on another backend than the
// session's (a pooler between pgdns and the server).
var errClosingBackend = errors.New("the closing statement's backend is not the session's")

// checkClosing implements closingChecker.
func (c *pgChecker) checkClosing(ctx context.Context, timeout time.Duration, s *Sample) (bool, error) {
	by := time.Now().Add(timeout)
	if c.sess == nil || c.sess.ended() || c.sess.closing == nil || !c.sess.closing.ready || c.sess.pid == 0 {
		return false, c.check(ctx, by, s)
	}
	cs := c.sess.closing
	*s = Sample{}
	c.settleCancel(by) // a cancel of ours out finds the session idle (reachcancel.go)
	start, end, lsn, err := c.queryClosing(ctx, by)
	if err == nil {
		s.Start, s.End, s.IP = start, end, c.sess.ip
		s.InsertLSN = lsn.PageBoundary(cs.block, cs.segment) // as parseProbeFields reads it
		s.ReplayLSN = s.InsertLSN
		s.StartedAt, s.SystemID, s.Timeline = cs.startedAt, cs.systemID, cs.timeline
		c.rewatch = true
		c.sendCancel() // the probe is done with the session
		return true, nil
	}
	if errors.Is(err, errClosingBackend) {
		cs.ready, cs.noLight = false, true
		return false, c.check(ctx, by, s)
	}
	// As check has a failed statement.
	c.Close()
	c.rewatch = true
	if late(ctx, by) {
		return false, errors.New("probe query: timed out (probe.timeout)")
	}
	if !unproven(err) {
		err = classify(err)
		c.rewatch = !errors.Is(err, ErrNotServing)
		return false, err
	}
	// Cut with nothing that proves the server gone: a new session tells,
	// probed in full.
	if ferr := c.check(ctx, by, s); ferr != nil {
		return false, fmt.Errorf("%w (after the closing probe's session ended: %v)", ferr, err)
	}
	return false, nil
}

// queryClosing runs closingSQL on c's session by by, preparing it when
// the session has not (or lost it), and returns the position it read and
// the frame of the round trip that read it.
func (c *pgChecker) queryClosing(ctx context.Context, by time.Time) (start, end time.Time, lsn zone.LSN, err error) {
	cs := c.sess.closing
	for reruns := 0; ; reruns++ {
		req := closingRun
		if !cs.prepared {
			req = closingPrepareRun
		}
		start = time.Now()
		var r reply
		r, err = c.sess.exchange(ctx, &c.alarm, req, by)
		if err == nil && statementLost(r.err) {
			start = time.Now()
			r, err = c.sess.exchange(ctx, &c.alarm, closingPrepareRun, by)
		}
		end = time.Now()
		if err != nil {
			return start, end, 0, fmt.Errorf("probe query: %w", c.failure(err))
		}
		if reruns < cancelReruns && c.cancelledByUs(r.err) && time.Until(by) > end.Sub(start)*3/2 {
			cs.prepared = false // Parse may not have run: prepare again (its Close makes that safe)
			c.settleCancelled(by)
			continue
		}
		if r.err != nil {
			return start, end, 0, fmt.Errorf("probe query: closing statement: %w", poolerHint(r.err))
		}
		cs.prepared = true
		lsn, err = c.closingRow(r)
		if err != nil && !errors.Is(err, errClosingBackend) {
			err = fmt.Errorf("probe query: closing statement: %w", err)
		}
		return start, end, lsn, err
	}
}

// closingRow reads closingSQL's row in r: the insert position, and the
// backend's pid, which must be the session's.
func (c *pgChecker) closingRow(r reply) (zone.LSN, error) {
	if r.rows != 1 {
		return 0, fmt.Errorf("%d rows, want 1", r.rows)
	}
	var values [closingColumns][]byte
	var null [closingColumns]bool
	n, err := dataRowColumns(r.row, values[:], null[:])
	switch {
	case err != nil:
		return 0, err
	case n != closingColumns:
		return 0, fmt.Errorf("%d columns, want %d", n, closingColumns)
	case null[0] || null[1]:
		return 0, errors.New("a NULL column")
	}
	lsn, err := zone.ParseLSN(string(values[0]))
	if err != nil {
		return 0, err
	}
	pid, err := strconv.ParseUint(string(values[1]), 10, 32)
	if err != nil {
		return 0, err
	}
	if uint32(pid) != c.sess.pid {
		return 0, errClosingBackend
	}
	return lsn, nil
}

// Kick modes: what a host's next kicked probe is to be (Prober.kickModes).
// A round's closing kick asks for a light probe (kickClosing), every other
// kick for a full one (kick); full wins over light, and a host's goroutine
// takes the mode as it starts a kicked probe (lightKicked). A full kick
// stores its mode before it sends its kick, so the first probe started
// after it is a full one whichever kick that probe answers.
const (
	kickNone int32 = iota
	kickLight
	kickFull
)

// kickClosing kicks host flat, a round's primary, for the round's closing
// probe: a light one, unless another kick asks for a full one.
func (p *Prober) kickClosing(flat int) bool {
	p.kickModes[flat].CompareAndSwap(kickNone, kickLight)
	return p.sendKick(flat)
}

// lightKicked reports whether the probe of host flat that starts now,
// kicked, is to be a light one.
func (p *Prober) lightKicked(flat int) bool {
	return p.kickModes[flat].Swap(kickNone) == kickLight
}

// takeClosing takes r, the result of a light probe (the closing probe of
// a round), and reports it steady (it changes no host's standing): it
// moves the primary's WAL clock and the round along, and nothing else.
func (p *Prober) takeClosing(r result) bool {
	p.markSteady(r.cluster) // the replicas' byte bounds (build.go); it ends the round, so no deferral (hold.go)
	p.noteClosing(r)
	p.recordClosing(r)
	p.advanceRound(r)
	return true
}

// recordClosing adds r's position to the WAL clock of its host, provided
// the host is, as the aggregator knows it, the writable server of the
// run and timeline the light probe's session found (a full result of
// that session came before it): otherwise it adds nothing.
func (p *Prober) recordClosing(r result) {
	h := &p.state[r.cluster].Hosts[r.host]
	s := &r.sample
	w := p.history[h]
	if w == nil || !h.Seen || h.Fails != 0 || h.InRecovery || !h.StartedAt.Equal(s.StartedAt) ||
		h.SystemID != s.SystemID || h.Timeline != s.Timeline || !w.of(s.SystemID, s.StartedAt, s.Timeline) {
		return
	}
	w.add(s.Start, s.InsertLSN) // the primary was at most there at Start (lag.go)
}

// noteClosing is noteRefreshed for a light result: it is the closing
// probe a finished Refresh round asked for, if it started after (which
// only clears closingPending, so that the next round probes the primary
// itself), and never the fresh result a running round waits for.
func (p *Prober) noteClosing(res result) {
	p.refreshMu.Lock()
	defer p.refreshMu.Unlock()
	rs := p.refreshing[p.state[res.cluster].Name]
	if rs == nil {
		return
	}
	if flat := p.flatIndex(res.cluster, res.host); rs.closingPending && flat == rs.closingPrimary && !res.started.Before(rs.closing) {
		rs.closingPending = false
	}
}
