package probe

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// A server stopping in smart mode (pg_ctl stop -m smart, the default of
// many scripts) refuses every new session with 57P03 "the database system
// is shutting down", lets the open ones run, and stops only once they have
// all ended. The probe's own session, open between probes, sees nothing
// of it in shared memory or the catalog: probes kept succeeding, the host
// stayed in the answers while no application could connect to it, and
// pgdns's session alone kept the shutdown from ever completing. So a
// checker whose session is open learns, on each probe, whether its server
// still admits a new session, in one of two ways.
//
// When the probe role may read server files (a superuser, or EXECUTE on
// pg_read_file(text, bigint, bigint, boolean): the grant that also lets it
// read timeline history files), each probe reads the postmaster's status
// in the probe's own statement (probeStatusSQL), at no cost to either end
// beyond a small file read: line 8 of postmaster.pid. The postmaster
// writes "stopping" there (pmdie, PostgreSQL 10 and later) at the moment a
// shutdown request (smart, fast or immediate) stops it admitting sessions,
// and "ready" once it admits them (a primary, or a hot standby that has
// reached consistency; "standby", hot_standby off, admits none, and
// "starting" none yet). So "stopping" is the refusal a new session would
// get (definitive: the host leaves the answers, and the session is closed
// so that the stop can complete), within one probe and without a session
// opened; "ready" is an admission. Anything else (the file missing, a
// line that is not one of these, "standby" or "starting" while a session
// is open) proves nothing, and that probe asks with a new session as
// below: never taken as admitted. A role without the grant is seen on each
// session's first probe (probeSQL's last column asks has_function_privilege,
// which writes nothing to the server's log), and a grant revoked in the
// middle of a session fails the statement with 42501: that probe runs
// probeSQL instead and asks with a new session, and so do the next ones
// until probeSQL finds the grant back. What the status does not show is a
// refusal that is not the server's own: a packet filter rejecting new
// connections to a server that runs (a REJECT added to drain the host, a
// security group changed, conntrack keeping only the established flow),
// which sends every client pgdns answers it to a refused connect while
// pgdns's own session works. So while the status says "ready", the
// checker still connects to the server's address now and then (reach:
// at most once every reachIntervals admission intervals, 4 s by default;
// every startupReaches-th time it sends the startup packet instead, as
// below, since a backend reads pg_hba.conf only after it)
// and waits for a backend's answer to an SSLRequest, then leaves: the
// forked backend exits without a word in the log, no session is started,
// and a connect refused or reset, or the "could not fork" of a postmaster
// that cannot start a backend, takes the host out as a refused session
// does, and so do two attempts in a row that get no answer while the open
// session answers fast (a packet filter dropping new connections, review
// 7 H7; a postmaster frozen alone, whose kernel completes the connects it
// never accepts, review 8 R8-1); no answer with the session slow too is
// load, and proves nothing. The new-session attempts below are judged the
// same way. A host reached through a proxy or pooler that accepts and
// answers for the server is the operator's business: its answer is taken
// for the server's. A server full (53300) is not a shutdown either way.
//
// Otherwise the checker asks the server, now and then, whether it still
// admits a new session. The question costs the server a backend start,
// so it is asked at most once every admitProbes probes and at most once
// every admission interval (probe.admission_interval,
// DefaultAdmissionInterval: with the default probe.interval of 250ms,
// once a second, every fourth probe), and it is asked cheaply: the
// attempt stops at the server's first reply, which is the refusal
// (PostgreSQL refuses a session at the end of reading its startup
// packet, in the forked backend, before it authenticates it) or a
// request for a password. A refusal by pg_hba.conf of the probe's own
// connect is definitive (tryAdmission, hbaRefusal). Under trust (or cert, peer) authentication
// there is nothing to stop at: the first reply, AuthenticationOk, comes
// only after the backend has authenticated, and it goes on to load the
// database's caches without reading the socket again, so leaving then
// would save the server nothing. The attempt is then a whole session,
// closed at once, and its cost (docs/operating.md) is what the interval
// trades against how soon a smart shutdown is seen. An admission interval
// of 0 turns both ways off.

const admitProbes = 4

// reachIntervals: a bare connect (reach) is made at most once every this
// many admission intervals. It costs the server a fork and an exit, about
// 2.8 ms of its CPU on PostgreSQL 15 (half a whole session's 5.4 ms,
// measured back to back), more than the probes of a second (4 × 0.3-0.44
// ms at the default probe.interval); at 4 s it adds about half of that.
const reachIntervals = 4

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
	if err := c.admissionResult(); err != nil || c.attempting() {
		return err
	}
	if c.sinceAdmitted < admitProbes || time.Since(c.admittedAt) < c.admitEvery {
		return nil
	}
	c.sinceAdmitted, c.admittedAt = 0, time.Now()
	if c.trialDue(c.admittedAt) {
		c.startTrial(deadline) // a whole session start now and then (trial.go)
		return nil
	}
	c.startAdmit(deadline)
	c.reachTry, c.reachBound, c.reachSlowest = true, c.boundOf(deadline), c.lastRTT // its silence is judged as reach's
	return nil
}

// reach is admission when the postmaster's status says "ready": the
// server admits sessions, but whether a new connection still gets to it
// (a packet filter's REJECT added to drain the host, a security group
// changed, conntrack keeping only the established flow) the status cannot
// show, nor whether the postmaster still takes a connection at all (one
// frozen or stuck leaves the kernel completing connects it never
// answers), and every client pgdns sends there needs one. So now and
// then it connects to the server's address, sends an SSLRequest and
// waits for its one-byte answer (reach.go, or tryConnect for a host
// name; a cancel of the session's own backend when it may, answered by
// the server's close: reachcancel.go), and judges a failure as a refused session is judged: refused,
// reset or a fork failure is definitive; no answer counts only twice in a
// row with the session fast meanwhile. At most once every reachIntervals
// admission intervals, while the last probe's status said "ready"; it
// starts before the probe's query, so that the handshake's round trip
// runs beside the probe's, and is read by that probe's afterProbe and
// the ones after, until it has ended or its bound has passed.
func (c *pgChecker) reach(deadline time.Time) {
	if !c.ready || c.attempting() || time.Since(c.reachedAt) < reachIntervals*c.admitEvery {
		return
	}
	c.reachedAt = time.Now()
	c.reachTry, c.reachBound, c.reachSlowest = true, c.boundOf(deadline), c.lastRTT
	if c.reaches++; c.reaches >= startupReaches {
		// pg_hba.conf is read after the SSLRequest's answer: now and
		// then the startup packet goes too (review 8, R8-2).
		c.reaches = 0
		if c.trialDue(c.reachedAt) {
			c.startTrial(deadline) // and past authentication, now and then (trial.go; R8-6)
			return
		}
		c.startAdmit(deadline)
		return
	}
	if c.reachRaw = c.startReach(); c.reachRaw != nil {
		c.reachTry = false // a socket of our own (a cancel, reachcancel.go), read by admissionResult
		return
	}
	c.startAdmission(deadline, tryConnect) // a host name: dialed as the probe's session was
}

// attempting reports whether an admission attempt or a bare connect is
// under way.
func (c *pgChecker) attempting() bool { return c.admitting != nil || c.reachRaw != nil }

// startupReaches: every this many reaches (12 s by default), the reach is
// an admission attempt (tryAdmission: the startup packet read up to the
// server's first reply) in place of the bare connect, so that a
// pg_hba.conf reloaded to refuse every client (hbaRefusal) is seen while
// the status says "ready" (review 8, R8-2): the backend reads pg_hba.conf
// only after the startup packet. Under password (or SASL, GSS)
// authentication the attempt stops at the request for it and costs the
// server what the bare connect does, a fork and an exit; under trust it
// is a whole session (docs/operating.md: what pgdns costs your database).
const startupReaches = 3

// reachTimeoutsOut: this many attempts in a row (bare connects or new
// sessions) that get no answer while the open session's probes answer
// fast take the host out (review 7, H7; review 8, R8-1). No answer is a
// timeout before the server sent a byte (noAnswer): a packet filter that
// DROPs new connections (a security group, conntrack keeping only the
// established flow) lets no connect complete, and a postmaster that
// accepts nothing (frozen, stuck in the kernel) leaves completed connects
// in the kernel's listen queue unanswered; either way pgdns's own session
// works and every client sent there hangs in its connect. A timeout while
// the session is slow too (its slowest probe during the attempt took half
// the attempt's bound or more) is load and proves nothing, and so does a
// timeout after the server's first byte (a session slow to start).
const reachTimeoutsOut = 2

// errDropsNew is the probe's failure when new connections get no answer.
var errDropsNew = notServing{errors.New("new connections get no answer (the open session still works): a packet filter drops them, or the postmaster accepts none")}

// reachTimedOut judges an attempt that ended with err (not definitive):
// no answer with the session fast counts toward reachTimeoutsOut,
// anything else starts the count again.
func (c *pgChecker) reachTimedOut(err error) error {
	var silent noAnswer
	if !errors.As(err, &silent) || 2*c.reachSlowest >= c.reachBound {
		c.reachTimeouts = 0
		return nil
	}
	if c.reachTimeouts++; c.reachTimeouts < reachTimeoutsOut {
		return nil
	}
	c.reachTimeouts = 0
	return errDropsNew
}

// boundOf is the bound startAdmission gives an attempt by deadline.
func (c *pgChecker) boundOf(deadline time.Time) time.Duration {
	d := time.Second
	if !deadline.IsZero() {
		d = time.Until(deadline)
	}
	if t := c.configs.base.ConnectTimeout; t > 0 && t < d {
		d = t
	}
	return d
}

// admissionResult reads the attempt under way, if it has ended: a
// definitive error when it was refused as a stopping (or unreachable)
// server refuses it, nil otherwise (c.admitting stays set while it runs).
func (c *pgChecker) admissionResult() error {
	if r := c.reachRaw; r != nil { // a bare connect on a socket of our own (reach.go)
		done, err := r.poll()
		if !done {
			if try, by := r.handOver(); try != nil {
				// An 'S' or an 'E': the rest on a goroutine, as tryConnect has it.
				c.reachRaw = nil
				c.startAdmission(by, try)
				c.reachTry = true
			}
			c.reachSlowest = max(c.reachSlowest, c.lastRTT)
			return nil
		}
		c.reachRaw = nil
		c.cancelEnded(r)
		return c.attempted(err, true)
	}
	if c.admitting == nil {
		return nil
	}
	select {
	case err := <-c.admitting:
		c.admitting, c.admitStop = nil, nil
		reached := c.reachTry
		c.reachTry = false
		return c.attempted(err, reached)
	default:
		c.reachSlowest = max(c.reachSlowest, c.lastRTT)
	}
	return nil
}

// attempted judges an attempt that ended with err, judged as a bare
// connect's when reached: refused as a stopping (or unreachable) server
// refuses it is definitive; no answer counts toward reachTimeoutsOut.
func (c *pgChecker) attempted(err error, reached bool) error {
	if err != nil && (definitive(err) || errors.Is(err, ErrNotServing)) {
		c.reachTimeouts = 0
		return classify(fmt.Errorf("a new session was refused (the open one still works): %w", connectError(err)))
	}
	if reached {
		return c.reachTimedOut(err)
	}
	return nil
}

// startAdmission runs try beside the probe. The probe's deadline bounds
// the attempt too, from a context of its own: the probe's ends when the
// probe does.
func (c *pgChecker) startAdmission(deadline time.Time, try func(context.Context, *connConfig) error) {
	timeout := time.Second
	if !deadline.IsZero() {
		timeout = time.Until(deadline)
	}
	actx, cancel := context.WithTimeout(context.Background(), timeout)
	done := make(chan error, 1)
	cfg := c.config()
	go func() {
		defer cancel()
		done <- try(actx, cfg)
	}()
	c.admitting, c.admitStop = done, cancel
}

// startAdmit starts tryAdmission's attempt: on the shared poller
// (admitpoll.go) when it may, else dialed on a goroutine of its own.
func (c *pgChecker) startAdmit(deadline time.Time) {
	timeout := time.Second
	if !deadline.IsZero() {
		timeout = time.Until(deadline)
	}
	if done, stop := startRawAdmission(c.config(), timeout); done != nil {
		c.admitting, c.admitStop = done, stop
		return
	}
	c.startAdmission(deadline, tryAdmission)
}

// The postmaster's status as line 8 of postmaster.pid has it, padded
// with spaces to 8 characters (PostgreSQL's pidfile.h).
var (
	pmStatusReady    = []byte("ready")
	pmStatusStopping = []byte("stopping")
)

// errStopping is the probe's failure when the server's status says it
// is stopping.
var errStopping = notServing{errors.New(`the server is shutting down (postmaster.pid says "stopping"): it admits no new session, the open one still works`)}

// afterProbe reads admission from the last probe's row (c.row): on a
// session whose role may read server files, the postmaster's status
// (probeStatusSQL's last column); otherwise whether the role may
// (probeSQL's), for the next probe. asked says that admission was asked
// before the query (or need not be); when it was not and the row proves
// nothing, admission is asked now. It returns a definitive error when the
// server is stopping, or when a new session was refused.
func (c *pgChecker) afterProbe(by time.Time, asked bool) error {
	col := c.row.values[statusColumn]
	c.ready = false
	if !c.rowStatus {
		c.readsStatus = c.admitEvery > 0 && len(col) == 1 && col[0] == 't'
		if !asked { // the grant was revoked under this probe (query)
			return c.admission(by)
		}
		return nil
	}
	switch col = bytes.TrimRight(col, " "); {
	case bytes.Equal(col, pmStatusReady):
		// Admitted. Should the status stop telling (a file that no
		// longer reads as expected), the next probe asks with a new
		// session at once, not admitProbes probes later.
		c.sinceAdmitted = admitProbes
		c.ready = true
		return c.admissionResult() // and is the path to it open? (reach: started before this probe's query)
	case bytes.Equal(col, pmStatusStopping):
		return errStopping
	}
	return c.admission(by) // nothing proved: ask with a new session
}

// privilegeLost: the statement failed for want of a privilege (42501
// insufficient_privilege): the probe role may no longer read server
// files.
func privilegeLost(err error) bool {
	if err == nil {
		return false // errors.As would cost an allocation on every probe
	}
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42501"
}

// stopAdmission ends the admission attempt under way, if any, and waits
// for it: its connection is closed when this returns.
func (c *pgChecker) stopAdmission() {
	if c.reachRaw != nil {
		c.reachRaw.close()
		c.reachRaw = nil
	}
	if c.admitting == nil {
		return
	}
	c.admitStop()
	<-c.admitting
	c.admitting, c.admitStop, c.reachTry = nil, nil, false
}

// tryAdmission starts a new session to the server of cfg (which it does
// not change) and stops at the server's first decisive reply: nil when it
// asks for authentication (or, without any, completes the session), else
// the refusal or the failure. It speaks the protocol itself on a socket
// dialed as pgx dials it (cfg's DialFunc, address and connect_timeout),
// not through pgx.ConnectConfig, whose config copy, fallbacks, buffers and
// message decoding were 37% of pgdns's CPU at 1,000 hosts (issue 28).
//
// The startup packet is the one the probe's own session sends (user,
// database and every runtime parameter: application_name, search_path,
// the pinned settings), so the server answers as it would answer the
// probe. PostgreSQL decides admission right after reading it
// (ProcessStartupPacket: 57P03 while it shuts down or starts up, 53300
// when full), before pg_hba or authentication. Under an sslmode that
// asks for TLS the attempt asks for it as pgx does (SSLRequest, then the
// handshake with cfg's TLS configuration), so no user or database name
// goes out in clear where the DSN says it must not; when the server
// declines and the DSN allows plaintext (sslmode=prefer) the startup
// packet follows on the same socket, which PostgreSQL accepts after an
// 'N'.
//
// A refusal by pg_hba.conf (hbaRefusal: a "reject" line, or no line for
// the probe's role, database and encryption) is definitive (notServing)
// when every way the probe's own connect would try is refused so: under
// sslmode=prefer (or allow) a client refused over TLS (or in plaintext)
// tries the other way, as pgx and libpq do, so the attempt tries it too
// before it counts. Such a refusal is not about the probe's credentials:
// the server's hba file refuses the connection before any password is
// asked, every client of that host, address and encryption alike (a host
// fenced or retired by its hba file, a config-management run gone
// wrong). A refusal of the probe's role alone once the hba file lets it
// through (a wrong password, 28P01; a role dropped or NOLOGIN, 28000)
// proves nothing about the clients, which use roles of their own: the
// host stays while the probe's open session works, and rule 3 takes it
// down when pgdns must connect anew.
func tryAdmission(ctx context.Context, cfg *connConfig) error {
	c := &cfg.Config
	ctx, cancel := withConnectTimeout(ctx, c)
	defer cancel()
	err := admitOnce(ctx, cfg, c.TLSConfig)
	if !hbaRefusal(err) {
		return err
	}
	for _, f := range c.Fallbacks {
		if f.Host != c.Host || f.Port != c.Port || (f.TLSConfig == nil) == (c.TLSConfig == nil) {
			continue
		}
		if err = admitOnce(ctx, cfg, f.TLSConfig); !hbaRefusal(err) {
			return err
		}
		break
	}
	return notServing{err}
}

// hbaRefusal: err is PostgreSQL's refusal of a connection by pg_hba.conf
// (28000, from ClientAuthentication before any authentication: "pg_hba.conf
// rejects connection for host ..." for a reject line, "no pg_hba.conf
// entry for host ..." for none). The message is the only mark 28000's
// other uses lack; a server whose lc_messages is not English words it
// otherwise, and its refusal proves nothing, as before (docs/decisions.md,
// rule 3).
func hbaRefusal(err error) bool {
	var pgErr *pgconn.PgError
	return err != nil && errors.As(err, &pgErr) && pgErr.Code == "28000" &&
		(strings.HasPrefix(pgErr.Message, "pg_hba.conf rejects connection") || strings.HasPrefix(pgErr.Message, "no pg_hba.conf entry"))
}

// admitOnce is one admission attempt, asking for TLS with tc when it is
// not nil.
func admitOnce(ctx context.Context, cfg *connConfig, tc *tls.Config) error {
	c := &cfg.Config
	raw, err := dialServer(ctx, c)
	if err != nil {
		return unanswered(err)
	}
	conn := &answerConn{Conn: raw}
	defer conn.Close()
	// The attempt's end (its deadline, or stopAdmission) ends its wait at
	// once: one timer, ctx's, not the socket's read and write deadlines
	// as well (as tryConnect), which ended it at the same moment with the
	// same timeout.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	a := &admitter{conn: conn}
	if tc != nil {
		if err := a.startTLS(ctx, cfg, tc); err != nil {
			return conn.judge(err)
		}
	}
	return conn.judge(a.exchange(cfg))
}

// withConnectTimeout bounds ctx by c's connect_timeout, when it has one.
func withConnectTimeout(ctx context.Context, c *pgconn.Config) (context.Context, context.CancelFunc) {
	if c.ConnectTimeout > 0 {
		return context.WithTimeout(ctx, c.ConnectTimeout)
	}
	return ctx, func() {}
}

// dialServer connects to c's server as the probe's session was dialed:
// c's DialFunc (a plain net.Dialer without one) and address.
func dialServer(ctx context.Context, c *pgconn.Config) (net.Conn, error) {
	dial := c.DialFunc
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	network, addr := pgconn.NetworkAddress(c.Host, c.Port)
	return dial(ctx, network, addr)
}

// tryConnect connects to the server of cfg as the probe's session was
// dialed (cfg's DialFunc, address and connect_timeout), sends an
// SSLRequest and waits for the server's one-byte answer, then leaves.
// The kernel completes a connect from its listen queue without the
// postmaster: only an answer shows that a new connection gets to a
// backend (review 8, R8-1: a frozen postmaster left every connect
// complete and every client hanging). PostgreSQL forks a backend for the
// connection, which answers 'N' (no TLS) or 'S' before it reads anything
// else, pg_hba and authentication included, and then exits without a word
// in the log when the client goes away ("If we get no data at all, don't
// clutter the log", ProcessStartupPacket, which names a client leaving
// after the SSLRequest's answer as such a case): the same fork and exit
// as a connect closed at once. After an 'S' the backend is in its TLS
// handshake, and a client leaving there is logged ("could not accept SSL
// connection"), so the handshake is made and the connection closed with
// TLS's close_notify, which the backend takes as the same silent end
// (only on a server with ssl on: the handshake's CPU on both ends). A
// postmaster that cannot fork answers, in place of a backend, "E" and
// its old-style error text ("could not fork new process for connection:
// ..."): a refusal of every new session, definitive (forkFailure).
// No answer within the bound is noAnswer.
func tryConnect(ctx context.Context, cfg *connConfig) error {
	c := &cfg.Config
	ctx, cancel := withConnectTimeout(ctx, c)
	defer cancel()
	raw, err := dialServer(ctx, c)
	if err != nil {
		return unanswered(err)
	}
	conn := &answerConn{Conn: raw}
	defer conn.Close()
	// The attempt's end (its deadline, or stopAdmission) ends the wait:
	// one timer, ctx's, not a deadline of the socket's as well.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := conn.Write(sslRequest); err != nil {
		return err
	}
	var b [1]byte
	if _, err := io.ReadFull(conn, b[:]); err != nil {
		return conn.judge(err)
	}
	return afterAnswer(ctx, conn, cfg, b[0])
}

// afterAnswer ends a bare connect whose server answered the SSLRequest
// with answer, on conn (tryConnect; reach.go's socket, handed over).
func afterAnswer(ctx context.Context, conn net.Conn, cfg *connConfig, answer byte) error {
	switch answer {
	case 'N':
		// A plain close (FIN), not a reset (SO_LINGER 0): a reset makes
		// the backend log "could not receive data from client:
		// Connection reset by peer". The cost is a socket in TIME_WAIT
		// on pgdns's side for a minute, about 15 per host at the default
		// interval.
		return nil
	case 'S':
		leaveTLS(ctx, conn, cfg)
		return nil
	case 'E':
		return forkFailure(conn)
	}
	return fmt.Errorf("unexpected answer %q to an SSLRequest", answer)
}

// leaveTLS makes the handshake a server began by answering 'S' and ends
// it as a client does, so that the backend logs nothing: close_notify,
// then the server's close_notify and EOF read (with TLS 1.3's session
// tickets, which left unread would make the close a reset). Nothing is
// sent inside the handshake and nothing read from it is trusted: the
// server's answer was the 'S'; so without a TLS configuration of the
// probe's own (sslmode=disable against a server with ssl on) no
// certificate is checked. Its failures change nothing: the server
// answered.
func leaveTLS(ctx context.Context, conn net.Conn, cfg *connConfig) {
	tc := cfg.TLSConfig
	if tc == nil {
		tc = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // nothing is sent or trusted: see above
	}
	t := tls.Client(conn, tc)
	if t.HandshakeContext(ctx) != nil {
		return
	}
	if t.CloseWrite() != nil {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(t, maxAdmissionMessage))
}

// answerConn is a connection that notes whether the server has sent a
// byte: a timeout before the first one is no answer (noAnswer), one
// after it is a slow server, which proves nothing.
type answerConn struct {
	net.Conn
	answered bool
}

func (a *answerConn) Read(b []byte) (int, error) {
	n, err := a.Conn.Read(b)
	a.answered = a.answered || n > 0
	return n, err
}

// judge is err, marked noAnswer when it is a timeout before the server
// sent anything.
func (a *answerConn) judge(err error) error {
	if err == nil || a.answered {
		return err
	}
	return unanswered(err)
}

// noAnswer is an attempt's timeout before the server sent a byte: the
// connect itself (no SYN-ACK: a packet filter's DROP), or the wait for the
// first answer of a connection the kernel completed (a postmaster that
// accepts nothing: frozen, stuck in the kernel). reachTimedOut counts it.
type noAnswer struct{ err error }

func (e noAnswer) Error() string { return e.err.Error() }
func (e noAnswer) Unwrap() error { return e.err }

// unanswered marks err noAnswer when it is a timeout.
func unanswered(err error) error {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return noAnswer{err}
	}
	return err
}

// forkFailure reads the rest of the error a postmaster that cannot fork
// writes in place of a backend ('E' already read; report_fork_failure_to_client:
// old-style, the text then a newline and a NUL, then it closes) and
// returns it as definitive: such a postmaster refuses every new session,
// a superuser's too, and unlike a server full (53300) it serves no one
// who is not connected yet.
func forkFailure(r io.Reader) error {
	var b [256]byte
	n, _ := io.ReadFull(r, b[:]) // to the close (EOF or a reset): the text is short
	msg, _, _ := bytes.Cut(b[:n], []byte{0})
	return notServing{fmt.Errorf("the postmaster answered %q", strings.TrimSpace(string(msg)))}
}

// admitter is one admission attempt's connection and buffer: the bytes
// read and not yet taken are buf[r:w].
type admitter struct {
	conn net.Conn
	buf  []byte
	r, w int
}

// sslRequest is PostgreSQL's SSLRequest: length 8, code 80877103.
var sslRequest = []byte{0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f}

func (a *admitter) startTLS(ctx context.Context, cfg *connConfig, tc *tls.Config) error {
	if _, err := a.conn.Write(sslRequest); err != nil {
		return err
	}
	var b [1]byte
	if _, err := io.ReadFull(a.conn, b[:]); err != nil {
		return err
	}
	switch b[0] {
	case 'S':
		t := tls.Client(a.conn, tc)
		if err := t.HandshakeContext(ctx); err != nil {
			return tlsRefusal(cfg, err)
		}
		a.conn = t
		return nil
	case 'N':
		if plaintextAllowed(cfg) {
			return nil // sslmode=prefer (or allow): the startup packet follows in plaintext
		}
		return tlsRefusal(cfg, errTLSRefused)
	case 'E':
		return forkFailure(a.conn)
	}
	return fmt.Errorf("unexpected answer %q to an SSLRequest", b[0])
}

// errTLSRefused is an 'N' to the SSLRequest, worded as pgconn words it.
var errTLSRefused = errors.New("server refused TLS connection")

// tlsRefusal judges err, the TLS part of a new session's start (an
// admission attempt's, a trial's, the probe's own connect): definitive
// (notServing) when it refuses every client that connects as probe.dsn
// says, err as it is otherwise. When probe.dsn allows no connection
// without TLS (sslmode require, verify-ca, verify-full), a server that
// declines TLS (an 'N': ssl turned off by a config push that lost the
// line) refuses every such client, and when it verifies the certificate
// (verify-ca, verify-full, require with a root certificate), a handshake
// that fails verification (x509: expired or not yet valid, another
// authority, under verify-full a name the certificate lacks) refuses
// every client that verifies: a renewal that failed on that host, a
// rotation to another CA, reloaded while pgdns's session, whose handshake
// was made before, works on (review 9, R9-1). A network error or a
// timeout in the handshake proves what it proves elsewhere (definitive,
// noAnswer), and a failure on pgdns's side (no system roots) nothing.
// Under sslmode=prefer or allow nothing here is a refusal: the client
// goes on without TLS.
func tlsRefusal(cfg *connConfig, err error) error {
	if err == nil || plaintextAllowed(cfg) {
		return err
	}
	if errors.Is(err, errTLSRefused) || strings.HasSuffix(err.Error(), errTLSRefused.Error()) { // or pgconn's own
		return notServing{shortError{msg: "it refuses TLS, which probe.dsn's sslmode requires (ssl = off?): " + errTLSRefused.Error(), err: err}}
	}
	if cause := unverified(err); cause != nil {
		return notServing{shortError{msg: "its certificate does not verify: " + cause.Error(), err: err}}
	}
	return err
}

// unverified is the cause when err is a TLS handshake's failure to
// verify the server's certificate, nil otherwise: pgx's
// VerifyPeerCertificate (verify-ca) returns x509's error as it is,
// crypto/tls's own verification (verify-full) wraps it in a
// CertificateVerificationError.
func unverified(err error) error {
	var (
		ve *tls.CertificateVerificationError
		ie x509.CertificateInvalidError
		ue x509.UnknownAuthorityError
		he x509.HostnameError
		ce x509.UnhandledCriticalExtension
	)
	switch {
	case errors.As(err, &ve):
		return ve.Err
	case errors.As(err, &ie):
		return ie
	case errors.As(err, &ue):
		return ue
	case errors.As(err, &he):
		return he
	case errors.As(err, &ce):
		return ce
	}
	return nil
}

// plaintextAllowed: cfg's connect may go on without TLS (sslmode=prefer,
// allow or disable): cfg itself, or a fallback to its host, has no TLS.
func plaintextAllowed(cfg *connConfig) bool {
	if cfg.TLSConfig == nil {
		return true
	}
	for _, f := range cfg.Fallbacks {
		if f.TLSConfig == nil && f.Host == cfg.Host && f.Port == cfg.Port {
			return true
		}
	}
	return false
}

// maxAdmissionMessage bounds a message the attempt reads: an error
// response or a parameter status is far shorter.
const maxAdmissionMessage = 1 << 16

// exchange writes the startup packet and reads until the first decisive
// message.
func (a *admitter) exchange(cfg *connConfig) error {
	b := startupPacket(cfg)
	if _, err := a.conn.Write(b); err != nil {
		return err
	}
	a.buf, a.r, a.w = b[:cap(b)], 0, 0
	authenticated := false
	for {
		typ, body, err := a.next()
		if err != nil {
			return err
		}
		switch typ {
		case 'E':
			return pgErrorOf(body)
		case 'R':
			if len(body) < 4 {
				return errors.New("a short authentication message")
			}
			if binary.BigEndian.Uint32(body) != 0 {
				// A request for a password (or SASL, GSS): the server
				// admits the session, and leaving now costs it nothing
				// more; it logs nothing when a client goes away there.
				return nil
			}
			authenticated = true // AuthenticationOk (trust): read on
		case 'Z':
			if !authenticated {
				return errors.New("ReadyForQuery before authentication")
			}
			// A whole session (trust): end it as a client does, so
			// that the server logs nothing (a reset before it has read
			// the Terminate would log "could not receive data").
			_, err := a.conn.Write([]byte{'X', 0, 0, 0, 4})
			return err
		case 'S', 'K', 'N', 'v':
			// ParameterStatus, BackendKeyData, NoticeResponse,
			// NegotiateProtocolVersion: read on.
		default:
			return fmt.Errorf("unexpected message %q in a new session", typ)
		}
	}
}

// startupPacket is the startup packet of the probe's session (cfg): its
// user, database and every runtime parameter.
func startupPacket(cfg *connConfig) []byte {
	b := make([]byte, 8, 256)
	binary.BigEndian.PutUint32(b[4:], 196608) // protocol 3.0
	b = append(append(append(b, "user"...), 0), cfg.User...)
	b = append(b, 0)
	if cfg.Database != "" {
		b = append(append(append(b, "database"...), 0), cfg.Database...)
		b = append(b, 0)
	}
	for k, v := range cfg.RuntimeParams {
		b = append(append(append(b, k...), 0), v...)
		b = append(b, 0)
	}
	b = append(b, 0)
	binary.BigEndian.PutUint32(b, uint32(len(b)))
	return b
}

// next reads one message: its type and body (valid until the next call).
// It reads what the connection has, not a message's header and then its
// body: a session start under trust is a dozen messages the server sends
// at once (AuthenticationOk, its parameters, BackendKeyData,
// ReadyForQuery), which were two read(2)s each, about 30 system calls an
// attempt at every fourth admission interval of every host (issue 28).
// Only messages of the session's start go through it, after any TLS
// handshake (startTLS reads the SSLRequest's answer byte by itself), so
// nothing read ahead is ever read past the point where the connection
// changes.
func (a *admitter) next() (byte, []byte, error) {
	if err := a.fill(5, 0); err != nil {
		return 0, nil, err
	}
	h := a.buf[a.r : a.r+5]
	typ, n := h[0], int(binary.BigEndian.Uint32(h[1:5]))-4
	if typ == 'E' && h[1] != 0 {
		// Not a length (an error message is far shorter than 16 MiB):
		// the old-style error of a postmaster that cannot fork.
		return 0, nil, forkFailure(io.MultiReader(bytes.NewReader(a.buf[a.r+1:a.w]), a.conn))
	}
	if n < 0 || n > maxAdmissionMessage {
		return 0, nil, fmt.Errorf("a message %q of %d bytes in a new session", typ, n)
	}
	if err := a.fill(5+n, 5); err != nil {
		return 0, nil, err
	}
	body := a.buf[a.r+5 : a.r+5+n]
	a.r += 5 + n
	return typ, body, nil
}

// fill reads until buf[r:] holds at least n bytes, of which the first had
// were there already (a message's header, when its body is read). Its
// errors are io.ReadFull's for the n-had bytes wanted: io.EOF when the
// connection ended before any of them, io.ErrUnexpectedEOF in the middle.
func (a *admitter) fill(n, had int) error {
	if a.w-a.r >= n {
		return nil
	}
	if a.r+n > len(a.buf) { // no room after r: move what is left to the start, or grow
		if n > len(a.buf) {
			b := make([]byte, max(n, 2*len(a.buf)))
			a.w = copy(b, a.buf[a.r:a.w])
			a.buf = b
		} else {
			a.w = copy(a.buf, a.buf[a.r:a.w])
		}
		a.r = 0
	}
	for a.w-a.r < n {
		m, err := a.conn.Read(a.buf[a.w:])
		a.w += m
		if err != nil {
			if a.w-a.r >= n {
				return nil
			}
			if err == io.EOF && a.w-a.r > had {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// pgErrorOf decodes an ErrorResponse's fields into the *pgconn.PgError
// that classify and definitive read, as pgx would have returned it.
func pgErrorOf(body []byte) error {
	e := &pgconn.PgError{}
	for len(body) > 1 {
		f := body[0]
		end := bytes.IndexByte(body[1:], 0)
		if end < 0 {
			break
		}
		v := string(body[1 : 1+end])
		body = body[2+end:]
		switch f {
		case 'S':
			e.Severity = v
		case 'V':
			e.SeverityUnlocalized = v
		case 'C':
			e.Code = v
		case 'M':
			e.Message = v
		case 'D':
			e.Detail = v
		case 'H':
			e.Hint = v
		}
	}
	return e
}
