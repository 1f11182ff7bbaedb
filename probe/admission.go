package probe

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A server stopping in smart mode (pg_ctl stop -m smart, the default of
// many scripts) refuses every new session with 57P03 "the database system
// is shutting down", lets the open ones run, and stops only once they have
// all ended. The probe's own session, open between probes, sees nothing
// of it: probes kept succeeding, the host stayed in the answers while no
// application could connect to it, and pgdns's session alone kept the
// shutdown from ever completing. So a checker whose session is open asks
// the server, now and then, whether it still admits a new one.
//
// The question costs the server a backend start, so it is asked at most
// once every admitProbes probes and at most once every admission interval
// (probe.admission_interval, DefaultAdmissionInterval: with the default
// probe.interval of 250ms, once a second, every fourth probe), and it is
// asked cheaply: the attempt stops at the server's first reply, which is
// the refusal (PostgreSQL refuses a session at the end of reading its
// startup packet, in the forked backend, before it authenticates it) or a
// request for a password. Under trust (or cert, peer) authentication there
// is nothing to stop at: the first reply, AuthenticationOk, comes only
// after the backend has authenticated, and it goes on to load the
// database's caches without reading the socket again, so leaving then
// would save the server nothing. The attempt is then a whole session,
// closed at once, and its cost (docs/operating.md) is what the interval
// trades against how soon a smart shutdown is seen. Nothing else tells a
// running session of a smart shutdown: the postmaster stops admitting
// sessions (and writes "stopping" into postmaster.pid, which only a role
// that may read server files can see) and changes nothing in shared
// memory until the last session has ended.

const admitProbes = 4

// DefaultAdmissionInterval is the default of probe.admission_interval: a
// checker asks its server whether it admits a new session at most this
// often.
const DefaultAdmissionInterval = time.Second

// A CheckerOption changes how PostgresCheckers' checkers probe.
type CheckerOption func(*pgChecker)

// AdmissionInterval makes checkers ask whether their server admits a new
// session at most once every d (and once every 4 probes at most); 0 never
// asks, and a server stopping smartly then stays in the answers, its open
// probe session keeping the stop from completing, until that session ends.
func AdmissionInterval(d time.Duration) CheckerOption {
	return func(c *pgChecker) { c.admitEvery = d }
}

// errAsked ends an admission attempt once the server has asked the client
// to authenticate: it admits the session (see firstReply). It is a
// timeout to pgx, on purpose: after any other read error pgx sends the
// server a cancel request on yet another new connection (one more backend
// started for nothing, and a goroutine draining the socket for up to 15
// s); after a timeout it just closes the socket.
var errAsked error = askedError{}

type askedError struct{}

func (askedError) Error() string   { return "the server asks for authentication: it admits new sessions" }
func (askedError) Timeout() bool   { return true }
func (askedError) Temporary() bool { return true }

// admission tells whether the server of c's open session still admits a
// new session (the probe's deadline, zero when it has none, bounds the
// attempt), as far as the last attempt found, and starts the next
// attempt when it is due. It returns a definitive error (ErrNotServing)
// when a new session was refused as a stopping server refuses it, and nil
// otherwise: when it was admitted, when the answer proves nothing, and
// while the attempt is under way. The attempt runs beside the probe, not
// before it, so that it delays no probe (a refresh for an lsn- lookup
// waits for its probes), and it is read at the next probe: a refusal
// takes at most one probe interval longer to count. Too many clients
// (53300) is load, not a shutdown: the host keeps serving the sessions it
// has, and taking it out of the answers would move all its clients onto
// the others.
func (c *pgChecker) admission(deadline time.Time) error {
	if c.admitEvery <= 0 {
		return nil // asked never (probe.admission_interval: 0)
	}
	c.sinceAdmitted++
	if c.admitting != nil {
		select {
		case err := <-c.admitting:
			c.admitting, c.admitStop = nil, nil
			if err != nil && definitive(err) {
				return classify(fmt.Errorf("a new session was refused (the open one still works): %w", connectError(err)))
			}
		default:
			return nil
		}
	}
	if c.sinceAdmitted < admitProbes || time.Since(c.admittedAt) < c.admitEvery {
		return nil
	}
	// The probe's deadline bounds the attempt too, from a context of its
	// own: the probe's ends when the probe does.
	timeout := time.Second
	if !deadline.IsZero() {
		timeout = time.Until(deadline)
	}
	actx, cancel := context.WithTimeout(context.Background(), timeout)
	done := make(chan error, 1)
	go func() {
		defer cancel()
		done <- tryAdmission(actx, c.cfg)
	}()
	c.admitting, c.admitStop = done, cancel
	c.sinceAdmitted, c.admittedAt = 0, time.Now()
	return nil
}

// stopAdmission ends the admission attempt under way, if any, and waits
// for it: its connection is closed when this returns.
func (c *pgChecker) stopAdmission() {
	if c.admitting == nil {
		return
	}
	c.admitStop()
	<-c.admitting
	c.admitting, c.admitStop = nil, nil
}

// tryAdmission starts a new session to the server of base (which it does
// not change) and stops at the server's first reply: nil when it asks for
// authentication (or, without any, completes the session), else the
// refusal or the failure.
func tryAdmission(ctx context.Context, base *pgx.ConnConfig) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var asked atomic.Bool
	cfg := base.Copy()
	cfg.AfterNetConnect = func(_ context.Context, _ *pgconn.Config, conn net.Conn) (net.Conn, error) {
		// After TLS: the reader sees PostgreSQL's messages in clear.
		return &firstReply{Conn: conn, asked: func() {
			asked.Store(true)
			cancel() // no fallback configuration (sslmode=prefer) is tried after it
		}}, nil
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil {
		cctx, ccancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer ccancel()
		return conn.Close(cctx) // a whole session (trust): end it cleanly, as a client does
	}
	if asked.Load() {
		return nil
	}
	return err
}

// firstReply reads a new session's connection and fails the first read
// that completes an authentication request other than AuthenticationOk:
// the server has admitted the session, and leaving before sending a
// password costs it nothing more (it logs nothing when a client goes away
// there). Every other first message (a refusal, AuthenticationOk, a
// protocol negotiation) passes through unread.
type firstReply struct {
	net.Conn
	head  [9]byte // message type, length, authentication code
	n     int
	done  bool
	asked func()
}

func (r *firstReply) Read(b []byte) (int, error) {
	n, err := r.Conn.Read(b)
	if r.done || n == 0 {
		return n, err
	}
	r.n += copy(r.head[r.n:], b[:n])
	if r.head[0] != 'R' {
		r.done = true
		return n, err
	}
	if r.n < len(r.head) {
		return n, err
	}
	r.done = true
	if binary.BigEndian.Uint32(r.head[5:]) == 0 { // AuthenticationOk: no password asked
		return n, err
	}
	r.asked()
	return 0, errAsked
}
