package probe

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// A writable server stopping in smart mode lets its open sessions run,
// and they may write for as long as they last (minutes, under a pooler or
// a long job). pgdns used to close its own session at once, so that the
// stop could complete, and then saw nothing of what they wrote: their
// writes lay above every insert position pgdns had seen of the writer,
// so rule 9's window after a failover, and rule 13's after a restart,
// ended below them, and their tokens without a timeline, lost when the
// stop was escalated to immediate (or by a crash), were answered by hosts
// that lacked them (review 13a, finding 2). So while other client
// sessions remain on a stopping writable server, the checker keeps its
// session and probes it as before: the host is out of every answer
// (Sample.Stopping: zone sets it aside as stopping), and the writer's
// insert positions keep coming in up to the last probe before the end.
// Once pgdns's session is the last client session, it closes it, and
// the stop completes: a smart stop waits at most one probe interval
// longer than its last client.
//
// What counts is PostgreSQL's own rule: a smart shutdown waits for the
// server's client backends (CountChildren(BACKEND_TYPE_NORMAL) in
// PostmasterStateMachine), not for background workers nor WAL senders,
// which are stopped after them. pg_stat_activity's backend_type tells
// client backends apart, and pgdns counts those other than its own
// session (pg_backend_pid()) and other than pgdns's (its application
// name: a second pgdns instance with the same name keeps its session for
// the same reason, and two that counted each other would keep the stop
// from ever completing). PostgreSQL 15 shows backend_type of another
// role's backend only to a role with pg_read_all_stats (pg_monitor), or
// a superuser (pgstatfuncs.c, HAS_PGSTAT_PERMISSIONS; measured: NULL for a
// LOGIN-only role, whose pid, datid, usesysid and application_name it
// does show), and the visible columns do not tell a client backend from a
// background worker connected to a database (a subscription's apply
// worker, an extension's), which the stop does not wait for: counted, it
// would keep pgdns's session, and so the stop, forever. So a backend
// whose type is hidden is not counted, and a probe role without
// pg_read_all_stats closes its session as before unless its own role's
// sessions remain (docs/operating.md).

// lingeringSQL counts the client backends of the server other than the
// probe's session and pgdns's.
const lingeringSQL = `SELECT pg_catalog.count(*) FROM pg_catalog.pg_stat_get_activity(NULL) a
  WHERE a.backend_type OPERATOR(pg_catalog.=) 'client backend' AND a.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()
    AND a.application_name OPERATOR(pg_catalog.<>) pg_catalog.current_setting('application_name')`

// lingeringRequest runs lingeringSQL as an unnamed statement: it runs
// only while a writable server is stopping, never at rest.
var lingeringRequest = encode(&pgproto3.Parse{Query: lingeringSQL}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{})

// shutdownRefusal is the message of PostgreSQL's 57P03 refusal of a new
// session by a server shutting down (CAC_SHUTDOWN).
const shutdownRefusal = "the database system is shutting down"

// shuttingDown reports whether err, a probe's definitive failure, says
// that the server is shutting down: its postmaster.pid says "stopping"
// (errStopping), or a new session was refused with the shutdown's 57P03.
// A server that does so never admits a session again in this run (a
// shutdown is never called off). Another refusal (crash recovery, a
// translated message) is not taken for one: the session is closed.
func shuttingDown(err error) bool {
	if errors.Is(err, errStopping) {
		return true
	}
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "57P03" && pgErr.Message == shutdownRefusal
}

// linger decides what a probe that read s on a session of a server found
// shutting down (stopping, the failure that says so) does: when s is of a
// writable server and other client sessions remain on it, it keeps the
// session, marks s Stopping and returns nil; otherwise it returns
// stopping, and the caller closes the session (so that the stop can
// complete) and fails the probe, as before. The finding is kept on the
// session: the server admits no new session for the rest of its run.
func (c *pgChecker) linger(ctx context.Context, by time.Time, s *Sample, stopping error) error {
	if s.InRecovery {
		return stopping
	}
	n, err := c.lingering(ctx, by)
	if err != nil || n == 0 {
		return stopping
	}
	c.sess.stopping = stopping
	s.Stopping = true
	return nil
}

// lingering counts the client backends on c's server other than its
// session and pgdns's (lingeringSQL).
func (c *pgChecker) lingering(ctx context.Context, by time.Time) (int, error) {
	r, err := c.sess.exchange(ctx, &c.alarm, lingeringRequest, by)
	if err != nil {
		return 0, c.failure(err)
	}
	if r.err != nil {
		return 0, r.err
	}
	if r.rows != 1 {
		return 0, fmt.Errorf("%d rows, want 1", r.rows)
	}
	var values [1][]byte
	var null [1]bool
	if n, err := dataRowColumns(r.row, values[:], null[:]); err != nil || n != 1 || null[0] {
		return 0, fmt.Errorf("lingering sessions: an unreadable row (%v)", err)
	}
	n, err := strconv.Atoi(string(values[0]))
	return n, err
}
