package probe

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrNotServing marks a probe failure that proves the server is not
// serving: the host leaves the answers on the first one, not after
// max_fails. Connection refused, a connection reset or closed by the
// server, and the server's own shutdown and startup errors (SQLSTATE
// 57P01 admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now)
// are definitive. Timeouts, name resolution and authentication failures
// are ambiguous (a slow network, a DNS hiccup, a password being rotated)
// and count toward max_fails.
var ErrNotServing = errors.New("the server is not serving")

// notServing is a definitive failure: its message is the cause's, and it
// matches both the cause and ErrNotServing.
type notServing struct{ err error }

func (e notServing) Error() string   { return e.err.Error() }
func (e notServing) Unwrap() []error { return []error{e.err, ErrNotServing} }

// classify marks err as definitive when it proves the server is not
// serving; other errors come back as they are.
func classify(err error) error {
	if err == nil || errors.Is(err, ErrNotServing) || !definitive(err) {
		return err
	}
	return notServing{err}
}

func definitive(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "57P01", "57P02", "57P03":
			return true
		}
		return false // the server answered: authentication, permissions...
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return false
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed)
}

// FailureClasses are the classes FailureClass returns, every one, so that
// a metric by class can start each at zero.
var FailureClasses = []string{"not_serving", "timeout", "auth", "server_error", "dns", "other"}

// FailureClass names the class of a failed probe's err, for the host_down
// event (zone.Host.FailClass) and the probe errors metric by class: not_serving (a definitive failure: refused,
// reset, the server's shutdown or startup), timeout (the probe's deadline),
// auth (the server refused the probe role: SQLSTATE class 28), server_error
// (another error the server answered with), dns (a host name that did not
// resolve), other.
func FailureClass(err error) string {
	var pgErr *pgconn.PgError
	var dnsErr *net.DNSError
	var netErr net.Error
	switch {
	case errors.Is(err, ErrNotServing):
		return "not_serving"
	case errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "28"):
		return "auth"
	case errors.As(err, &pgErr):
		return "server_error"
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	case errors.As(err, &dnsErr):
		return "dns"
	}
	return "other"
}

// terminated reports whether err is the server ending the session with
// admin_shutdown (57P01): a fast shutdown, or pg_terminate_backend.
func terminated(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "57P01"
}

// A crash of one of a server's processes (a backend killed by the OOM
// killer) makes the postmaster end every session (57P02, or just the end
// of the socket) and reinitialise the server: crash recovery, then the
// same run (pg_postmaster_start_time() unchanged) writable again, without
// the WAL it had not written out, asynchronous commits included (review
// 7, H5; rule 13). While it does, it refuses every new session with 57P03
// "the database system is in recovery mode" (postmaster.c,
// canAcceptConnections: CAC_RECOVERY, after a crash, FatalError set). The
// other refusals with that code come before a run ever admits a session
// (CAC_STARTUP "starting up", CAC_NOTCONSISTENT "not yet accepting
// connections": neither once FatalError is set, which only the end of
// crash recovery clears) or as it ends for good (CAC_SHUTDOWN "shutting
// down": a shutdown is never called off). So a run seen writable that
// refuses a session with 57P03 and is later writable again was
// reinitialised. The server may translate the message (lc_messages): one
// that is not the English text of the other three is taken for crash
// recovery, which for a run seen writable, and seen again, is what it
// must be.

// otherRefusals are the English messages of PostgreSQL's 57P03 refusals
// other than crash recovery's (PostgreSQL 10 to 17).
var otherRefusals = []string{
	"the database system is starting up",
	"the database system is shutting down",
	"the database system is not yet accepting connections",
	"the database system is not accepting connections",
}

// crashRecovery reports whether err shows a new session refused by a
// server in crash recovery: 57P03 with a message other than those of the
// refusals that are not (otherRefusals). A session that only ended (57P01,
// 57P02, a reset) or a connect that failed otherwise proves nothing of
// the kind; the refusal a failure was followed by does (refusedAfter).
func crashRecovery(err error) bool {
	var ra refusedAfter
	if errors.As(err, &ra) {
		err = ra.refusal
	}
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "57P03" && !slices.Contains(otherRefusals, pgErr.Message)
}

// refusedAfter is a definitive failure, the end of a session (err), that a
// new session refused as a stopping or crashed server refuses it
// (refusal) made definitive: its message and errors.Is and errors.As are
// err's, and crashRecovery reads the refusal.
type refusedAfter struct{ err, refusal error }

func (e refusedAfter) Error() string { return e.err.Error() }
func (e refusedAfter) Unwrap() error { return e.err }
