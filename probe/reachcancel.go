package probe

import (
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// The bare connect (reach) proves that a new connection gets to a backend
// the postmaster forked for it. An SSLRequest does it with the backend's
// one-byte answer, but a server with ssl = on answers 'S', and leaving
// then is logged unless the TLS handshake is made: 1.4-2 ms of pgdns's CPU
// and 4 ms of the server's each time, every 4 s a host, about 35% of a
// core at 1,000 hosts for the bare connects alone (review 8, R8-4). So
// when the checker's session is open and has its BackendKeyData, the bare
// connect is a CancelRequest for that session's own backend: the forked
// backend reads it (ProcessStartupPacket, before pg_hba and before any
// TLS, whatever ssl is), signals the matching backend with SIGINT
// (processCancelRequest; a match is logged at DEBUG2 only, where a wrong
// pid or key would be logged at LOG) and exits: the server's close of the
// connection is the answer, and proves the fork as the 'N' did. A
// postmaster that cannot fork answers "E..." in place of a backend, as to
// an SSLRequest; a refused or reset connect, or no answer, is judged as
// before.
//
// The signal must find the session idle. PostgreSQL takes a cancel while
// a backend waits for a command (DoingCommandRead, PostgresMain's step
// (5) and ProcessInterrupts) as a no-op, and cancels whatever statement
// runs otherwise (57014, "canceling statement due to user request"). So:
//
//   - the connect starts beside a probe's query, as the SSLRequest's did,
//     but the request goes only at the end of a probe (sendCancel), after
//     its last exchange (the history read included): the session is idle
//     until the next probe;
//   - the next probe, before it sends anything, waits for the server's
//     close at most cancelWait (settleCancel). Once the close is read the
//     signals have been sent (signal_child signals the backend and then
//     its process group, before the forked backend exits), and a signal
//     pending at an idle backend is taken before it reads the next
//     command, and ignored. The cap keeps a slow fork (a loaded server)
//     from spending a probe's budget (probe/historybudget_test.go): past
//     it the probe goes on;
//   - so a cancel may still land in a query: a slow fork past the cap, or
//     the cancels a frozen postmaster keeps in its listen queue and reads
//     when it thaws. A probe's statement that gets 57014 while cancels
//     of ours are out (cancelsOut: sent, their close not read, on this
//     session; it pins statement_timeout to 0, so a 57014 is a request's)
//     runs again in the same probe, after the cancel's close (up to
//     cancelReruns times: query), and counts nothing; the history
//     privilege asked is not taken as denied for it (facts.go);
//   - a session whose round trip leaves no room for running a statement
//     again in a probe (cancelRoom) keeps the SSLRequest, and so do a
//     checker with no session key (none sent, or PostgreSQL 18's longer
//     key) and a host named by a DNS name (tryConnect).
//
// The cancel is sent in clear, as libpq's before PostgreSQL 17: whoever
// reads it can cancel the probe's statements, which an attacker on the
// path can disrupt anyway.

// cancelWait is the longest a probe waits for the close of a cancel of
// ours before it sends its statement: a fork takes about a millisecond on
// a quiet server.
const cancelWait = 20 * time.Millisecond

// cancelRoom: the cancel is used only while this many of the session's
// round trips (its last probe's) fit in the attempt's bound, so that a
// probe its signal reaches has room to run its statement again.
const cancelRoom = 4

// errCancelUnsent ends a cancel whose connection was made but whose
// request no probe sent before its bound (the probes failed meanwhile):
// the server was not asked, which proves nothing.
var errCancelUnsent = errors.New("the bare connect's cancel was never sent (no probe ended meanwhile)")

// cancelRequest is PostgreSQL's CancelRequest before its pid and key:
// length 16, code 80877102.
var cancelRequest = [8]byte{0, 0, 0, 16, 0x04, 0xd2, 0x16, 0x2e}

// startReach starts a bare connect on a socket of the checker's own: a
// cancel of the session's own backend when it may (above), else an
// SSLRequest; nil for a host name.
func (c *pgChecker) startReach() *rawConnect {
	if s := c.sess; s != nil && s.pid != 0 && cancelRoom*c.lastRTT < c.reachBound {
		return startRawCancel(c.host, c.port, c.reachBound, s.pid, s.key)
	}
	return startRawConnect(c.host, c.port, c.reachBound)
}

// sendCancel sends the request of the cancel under way once the probe is
// done with the session (the end of a probe that succeeded), if its
// connection is made; else a later probe's end sends it.
func (c *pgChecker) sendCancel() {
	if r := c.reachRaw; r != nil && r.cancel && !r.asked && r.send() {
		c.cancelsOut++
	}
}

// settleCancel waits at most cancelWait (and a tenth of what is left of
// the probe due by by) for the close of the cancel of ours that is out,
// before the probe sends anything; its end stays for admissionResult.
func (c *pgChecker) settleCancel(by time.Time) {
	r := c.reachRaw
	if r == nil || !r.cancel || !r.asked {
		return
	}
	wait := cancelWait
	if !by.IsZero() {
		wait = min(wait, time.Until(by)/10)
	}
	r.settle(time.Now().Add(wait))
}

// cancelEnded notes the end of a bare connect: a cancel whose close was
// read signals the session no more.
func (c *pgChecker) cancelEnded(r *rawConnect) {
	if r.signalled && c.cancelsOut > 0 {
		c.cancelsOut--
	}
}

// cancelReruns: a probe's statement that a cancel of ours reached runs
// again at most this many times: the backend that reads a cancel signals
// its target twice, the process and then its process group
// (signal_child), and under load the second signal may come after the
// first one's error, into the statement run again.
const cancelReruns = 2

// settleCancelled waits, after a statement got a cancel of ours, for the
// close of the cancel under way, at most 5 cancelWait and a quarter of
// what is left of the probe: once it is read both signals have been sent,
// and the session, idle, takes them before it reads the statement again.
func (c *pgChecker) settleCancelled(by time.Time) {
	r := c.reachRaw
	if r == nil || !r.cancel || !r.asked {
		return
	}
	wait := 5 * cancelWait
	if !by.IsZero() {
		wait = min(wait, time.Until(by)/4)
	}
	r.settle(time.Now().Add(wait))
}

// cancelledByUs reports whether err, a statement's error, may be a cancel
// of ours: 57014 (query_canceled; the session pins statement_timeout to
// 0, so a request's, whatever lc_messages words it) while cancels of ours
// are out.
func (c *pgChecker) cancelledByUs(err error) bool {
	if err == nil || c.cancelsOut == 0 {
		return false
	}
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "57014"
}
