package probe

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgconn"
)

// pgx does not always say why a connection broke: when the server closes
// it while a query waits for its first result, pgx reads the EOF, closes
// the connection, drops the error and reports "conn closed", which proves
// nothing. A server crashing (pg_ctl stop -m immediate) in the middle of
// a probe did just that, and the host stayed in the answers until its
// next probe was refused. So the checker's sockets keep what the kernel
// said: the first failure of a read or a write on them. The session
// (session.go) reports its socket's failure the same way, and
// a failure while pgx still sets the session up (prepare) is read from
// it too.

// socket is a dialed connection that keeps its first failure.
type socket struct {
	net.Conn
	failed atomic.Pointer[error]
}

// recordFailures makes cfg dial sockets that keep their first failure
// (socketFailure reads it). It wraps the dialer rather than the
// connection pgx ends up with, so that TLS sits above it unchanged (SCRAM
// channel binding needs pgx to see the *tls.Conn).
func recordFailures(cfg *pgconn.Config) {
	dial := cfg.DialFunc
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &socket{Conn: conn}, nil
	}
}

func (s *socket) Read(b []byte) (int, error) {
	n, err := s.Conn.Read(b)
	s.note(err)
	return n, err
}

func (s *socket) Write(b []byte) (int, error) {
	n, err := s.Conn.Write(b)
	s.note(err)
	return n, err
}

// note keeps err if it is the socket's first failure. A deadline is how
// pgx interrupts a wait, and a closed socket is one we closed: neither
// says anything about the server.
func (s *socket) note(err error) {
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, net.ErrClosed) {
		return
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return
	}
	// A copy: taking err's own address would move it to the heap on
	// every call, a successful read or write included.
	kept := err
	s.failed.CompareAndSwap(nil, &kept)
}

// socketFailure is the first failure of nc's socket (TLS or not), nil if
// it has none (or nc was not dialed by a config recordFailures set up).
func socketFailure(nc net.Conn) error {
	if t, ok := nc.(*tls.Conn); ok {
		nc = t.NetConn()
	}
	s, ok := nc.(*socket)
	if !ok {
		return nil
	}
	p := s.failed.Load()
	if p == nil {
		return nil
	}
	if errors.Is(*p, io.EOF) {
		return fmt.Errorf("the server closed the connection: %w", *p)
	}
	return *p
}
