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

// failureClass names the class of a failed probe's err, for the host_down
// event (zone.Host.FailClass): not_serving (a definitive failure: refused,
// reset, the server's shutdown or startup), timeout (the probe's deadline),
// auth (the server refused the probe role: SQLSTATE class 28), server_error
// (another error the server answered with), dns (a host name that did not
// resolve), other.
func failureClass(err error) string {
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

// Watcher is a Checker that can also watch its connection between probes.
type Watcher interface {
	// Watch blocks until ctx is done (it then returns ctx's error) or the
	// connection reports that the server went away (a definitive error).
	Watch(ctx context.Context) error
}

// Watch implements Watcher: it keeps a read pending on the idle
// connection, so that a shutdown message or a closed socket is seen the
// moment it arrives rather than at the next probe.
func (c *pgChecker) Watch(ctx context.Context) error {
	if (c.conn == nil || c.conn.IsClosed()) && c.rewatch {
		// The host may still be answered, yet its connection is gone
		// (lost after a good probe, or closed by one that failed
		// ambiguously, a timeout say): open another at once rather than
		// stay blind until the next probe. Once per probe, so a failing
		// host is tried at most twice as often; never after a definitive
		// failure, which has ended the host already.
		c.rewatch = false
		conn, err := c.connect(ctx)
		if err == nil {
			c.conn = conn
		} else if err := classify(connectError(err)); ctx.Err() == nil && errors.Is(err, ErrNotServing) {
			return err
		}
	}
	if c.conn == nil || c.conn.IsClosed() {
		<-ctx.Done()
		return ctx.Err()
	}
	for {
		err := c.conn.PgConn().WaitForNotification(ctx)
		if ctx.Err() != nil {
			return ctx.Err() // our own wake-up: the connection stays open
		}
		if err == nil {
			continue // a notification: nobody listens, so none comes; read on
		}
		err = c.failure(err)
		c.Close()
		if !terminated(err) {
			return classify(err)
		}
		// pg_terminate_backend ends one session with the same 57P01 that
		// a fast shutdown sends to all: only a new session tells them
		// apart. A server shutting down refuses it (57P03), one that
		// ended our session alone (a DBA, a job killing idle sessions)
		// accepts it, and is still serving: watch the new one. Once per
		// termination, so no faster than sessions are killed.
		conn, cerr := c.connect(ctx)
		if ctx.Err() != nil {
			if cerr == nil {
				c.conn = conn
			}
			return ctx.Err()
		}
		if cerr != nil {
			if cerr := classify(connectError(cerr)); errors.Is(cerr, ErrNotServing) {
				return cerr
			}
			return classify(err) // no session either way: as before, gone
		}
		c.conn = conn
	}
}

// terminated reports whether err is the server ending the session with
// admin_shutdown (57P01): a fast shutdown, or pg_terminate_backend.
func terminated(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "57P01"
}
