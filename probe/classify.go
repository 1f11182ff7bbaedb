package probe

import (
	"context"
	"errors"
	"io"
	"net"
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
