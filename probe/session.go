package probe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// A probe is one tiny statement on a session that is already open, so its
// floor is a write, a read and a wake-up. pgx sets the session up (connect
// with TLS, SCRAM, a passfile; the probe's statement prepared and the
// settings sources read, check.go and proberow.go), and then the checker
// takes its socket over (pgconn's Hijack) and drops the rest of pgx's
// connection: its type map, statement cache, buffers, and the goroutine
// and context pgconn spends watching each call's context. At a thousand
// hosts every 250 ms those were most of pgdns's CPU and memory (issue 28).
//
// The session is then read by the host's own goroutine, and by no other:
// a probe writes its request (a Bind, Execute, Sync: bytes that are the
// same on every probe, encoded once) and reads the reply (exchange), and
// between probes the same goroutine waits on the socket (wait) until its
// next tick, a kick, or something the server sends unasked: a FATAL error
// as the server ends the session (57P01 from a shutdown or
// pg_terminate_backend), notices, parameter reports, the end of the
// socket. Every read has a deadline (the probe's, the next tick), and an
// alarm cuts a wait short from another goroutine (a kick, the end of the
// prober's context) by moving the deadline into the past. A reader
// goroutine of its own per session cost each host a second stack and a
// hand-over per probe (issue 28).

// initialReadBuffer is a session's read buffer to begin with: a probe's
// whole reply (a row of a few hundred bytes: 158 from a primary without
// standbys, and four small messages) in one read. A larger message grows it to its size, and it stays that size (a
// primary's row with many standbys is larger on every probe) unless it
// has grown past largeReadBuffer (a history file, say): then it goes back
// to this size once the message is read.
const (
	initialReadBuffer = 1024
	largeReadBuffer   = 64 << 10
)

// maxMessage bounds what a session accepts in one message: a history file
// (historySQL reads up to 1 MiB) and its framing, with room to spare.
const maxMessage = 4 << 20

// session is an open PostgreSQL session whose socket the checker drives.
// Only one goroutine at a time uses it (the host's, or Watch's while the
// host's waits for it); the alarm is what other goroutines touch.
type session struct {
	conn net.Conn   // the hijacked connection: our *socket, or TLS above it
	sock *socket    // conn when it is our *socket (no TLS), else nil
	ip   netip.Addr // the address connected to
	// pid and key are the session's BackendKeyData (0 when the server
	// sent none, or a key that is not 4 bytes): what a CancelRequest for
	// it carries (reach.go, startRawCancel).
	pid, key uint32

	reply reply // the reply being read, or the last one
	// rowInBuf: reply.row lies in buf, read in place (take); pinned is
	// where it is copied to when buf must be read into again before the
	// reply ends (pin), which a reply read in one read never needs.
	rowInBuf bool
	pinned   []byte

	// end says why the session ended (the server's FATAL error, or the
	// socket's); nil while it is open. fatal is a FATAL or PANIC error
	// the server sent, which ends it.
	end   error
	fatal error
	// crashed: the server sent the notice it ends every session with as
	// it reinitialises after a crash of one of its processes (57P02,
	// "terminating connection because of crash of another server
	// process"; quickdie, PostgreSQL 14 and later a WARNING to the client
	// only), before the end of the socket.
	crashed bool
	// closing: what light probes on the session need (closing.go); nil
	// until a full probe on it finds the server writable.
	closing *closingState
	// stopping: the server was found shutting down (the failure that
	// said so) while other client sessions on it remained (lingering.go);
	// nil otherwise. It admits no new session for the rest of its run.
	stopping error

	// The buffer read into: buf[r:w] is read and not yet parsed.
	buf  []byte
	r, w int

	// raw is sock's descriptor, read by rawStep (rawRead), nil without
	// sock; step is s.rawStep, made once rather than at every read.
	// While a read runs: out is a request still to be written, which the
	// read writes first (send); in is where it reads to, got and gotErr
	// what it read; rest and outErr what is left of a request it could
	// not write in full, and why. outFailed: the request's write failed,
	// which the exchange returns as it is (a failed Write did).
	raw       syscall.RawConn
	step      func(fd uintptr) bool
	out, in   []byte
	got       int
	gotErr    error
	rest      []byte
	outErr    error
	outFailed bool
}

// reply is what the server answered one request with, up to its
// ReadyForQuery.
type reply struct {
	rows int    // DataRows
	row  []byte // the first DataRow's body (its column count and columns)
	err  error  // the first ErrorResponse, a *pgconn.PgError
}

// drop lets the last reply's row go: the next read may reuse its bytes.
func (s *session) drop() {
	s.reply.row, s.rowInBuf = nil, false
	if cap(s.pinned) > largeReadBuffer {
		s.pinned = nil // a large row was pinned (a history file): not kept for every reply after
	}
}

// pin copies the reply's row out of buf, which is about to be read into
// again (next).
func (s *session) pin() {
	s.pinned = append(s.pinned[:0], s.reply.row...)
	s.reply.row, s.rowInBuf = s.pinned, false
}

// startSession takes over pc, an idle session pgx has set up, by ctx's
// end. pc is unusable afterwards, whatever the outcome.
//
// pgconn may still be reading the socket when its last call returns: a
// write of its that takes over 15 ms (its slowWriteTimer: a writer
// descheduled on a loaded machine) starts a background reader, which
// reads the server's reply while the writer is away and then starts
// another read; the writer stops it, but the stop waits for that read.
// pgx's own calls take their results from that reader and never notice.
// Taken over then, the socket kept that read, which held the descriptor's
// read lock: the session's first probe could not send its request (the
// read that writes it waits for the lock, sockread.go) and waited until
// its deadline, and anything the server sent meanwhile went to pgx's
// buffer, lost (TestFirstProbeAfterASlowSetupWrite; at load 30-50 the
// first probe of a new session failed, "probe query: timed out"). So
// SyncConn first, as Hijack's documentation asks: at no cost when no
// read is under way and nothing is buffered, else a ping whose reply
// ends that read, until neither holds.
func startSession(ctx context.Context, pc *pgconn.PgConn) (*session, error) {
	if err := pc.SyncConn(ctx); err != nil || pc.Frontend().ReadBufferLen() != 0 {
		// Bytes that pgconn has read and not parsed would be lost with
		// its buffer, and a read of its under way would take what
		// follows.
		pc.Conn().Close()
		if err == nil {
			err = errors.New("pgconn's read buffer is not empty")
		}
		return nil, fmt.Errorf("the session was not idle when taken over: %w", err)
	}
	hc, err := pc.Hijack()
	if err != nil {
		return nil, err
	}
	return newSession(hc.Conn), nil
}

// newSession makes a session of conn, an idle session's connection.
func newSession(conn net.Conn) *session {
	s := &session{conn: conn, buf: make([]byte, initialReadBuffer)}
	if ta, ok := s.conn.RemoteAddr().(*net.TCPAddr); ok {
		s.ip = ta.AddrPort().Addr().Unmap()
	}
	s.sock, _ = conn.(*socket)
	if s.sock != nil {
		// Held as a file of our own from now on (sockfile.go): a wait
		// that ends by its deadline then allocates nothing.
		s.sock.Conn = ownSocket(s.sock.Conn)
		if s.raw = rawSocket(s.sock.Conn); s.raw != nil {
			s.step = s.rawStep
		}
	}
	return s
}

// ended reports whether the session is over.
func (s *session) ended() bool { return s.end != nil }

// exchange sends req, one or more messages ending with a Sync, and reads
// the reply by by (zero: no deadline) unless a ends ctx's wait: nil when
// it came (the server's error, if any, is in reply.err), else why it did
// not: the session's end (the server's FATAL error, or the socket's), or
// the deadline or ctx's end (errTimedOut, and the session is closed). The
// reply's row is valid until the session is read again (an exchange, a
// wait): it is read in place, in the session's buffer.
func (s *session) exchange(ctx context.Context, a *alarm, req []byte, by time.Time) (reply, error) {
	if s.end != nil {
		return reply{}, s.end
	}
	s.reply.rows, s.reply.err = 0, nil
	s.drop()
	if !a.arm(ctx, s.conn, by, false) {
		a.disarm()
		return reply{}, s.abandon()
	}
	defer a.disarm()
	if err := s.send(req); err != nil {
		return reply{}, err
	}
	defer s.unsent()
	for {
		typ, body, err := s.next()
		if err != nil {
			if s.outFailed {
				return reply{}, err // the request's write failed
			}
			if errors.Is(err, os.ErrDeadlineExceeded) && s.end == nil {
				return reply{}, s.abandon() // by passed, or the alarm rang
			}
			return reply{}, s.finish(err)
		}
		if s.take(typ, body) {
			return s.reply, nil
		}
		if s.end != nil {
			return reply{}, s.end
		}
	}
}

// wait reads what the server sends between requests, until until (zero:
// none), a kick on kick (taken), the alarm, or the session's end; it
// reports whether it was kicked and whether the session is still open.
func (s *session) wait(ctx context.Context, a *alarm, until time.Time, kick <-chan struct{}) (kicked, open bool) {
	if s.end != nil {
		return false, false
	}
	s.drop()
	armed := a.arm(ctx, s.conn, until, kick != nil)
	defer a.disarm()
	select {
	case <-kick: // kicked before the alarm was armed: it rang for nobody
		return true, true
	default:
	}
	if !armed {
		return false, true
	}
	for {
		typ, body, err := s.next()
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) && s.end == nil {
				select {
				case <-kick:
					return true, true
				default:
					return false, true
				}
			}
			s.finish(err)
			return false, false
		}
		s.take(typ, body)
		if s.end != nil {
			return false, false
		}
	}
}

// finish ends the session after a read failed with err, and returns why
// it ended: the server's FATAL error when it sent one, else the socket's
// failure as socket.go words it, else err.
func (s *session) finish(err error) error {
	switch {
	case s.end != nil:
	case s.fatal != nil:
		s.end = s.fatal // why the server ended it
	default:
		s.end = err
		if f := socketFailure(s.conn); f != nil {
			s.end = f // the kernel's word, in the words socket.go gives it
		}
	}
	return s.end
}

// abandon ends the session under a reply that may still come: nothing
// could tell it from the reply to the next request. It returns
// errTimedOut.
func (s *session) abandon() error {
	_ = s.conn.Close()
	if s.end == nil {
		s.end = net.ErrClosed
	}
	return errTimedOut
}

// errTimedOut: an exchange's deadline came (by passed, or ctx ended) before its reply.
var errTimedOut = errors.New("timed out")

// terminateMessage is the Terminate message a client ends a session with.
var terminateMessage = []byte{'X', 0, 0, 0, 4}

// close ends the session as a client does (Terminate, then the socket).
func (s *session) close() {
	if s.end == nil {
		_ = s.conn.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		_, _ = s.conn.Write(terminateMessage)
		s.end = net.ErrClosed
	}
	_ = s.conn.Close()
}

// take parses one message the server sent, into the reply, and reports
// whether it ended the reply (ReadyForQuery). Everything but a DataRow,
// an ErrorResponse and a ReadyForQuery is read and let go:
// ParseComplete, BindComplete, RowDescription, CommandComplete, NoData;
// a NoticeResponse, ParameterStatus or NotificationResponse, which may
// come at any time.
func (s *session) take(typ byte, body []byte) bool {
	switch typ {
	case 'D': // DataRow
		if s.reply.rows == 0 {
			// In place: a copy of the row kept for every session was
			// 250 to 550 bytes a host (issue 28); next pins it when it
			// must read into buf before the reply ends.
			s.reply.row, s.rowInBuf = body, true
		}
		s.reply.rows++
	case 'E': // ErrorResponse
		s.takeError(body)
	case 'N': // NoticeResponse
		var msg pgproto3.NoticeResponse
		if msg.Decode(body) == nil && msg.Code == "57P02" {
			s.crashed = true
		}
	case 'Z': // ReadyForQuery: the reply is complete
		return true
	}
	return false
}

// takeError parses an ErrorResponse: the reply's error, unless it has
// one; a FATAL or PANIC one ends the session, and says why.
func (s *session) takeError(body []byte) {
	var msg pgproto3.ErrorResponse
	if derr := msg.Decode(body); derr != nil {
		s.end = fmt.Errorf("a malformed error message from the server: %w", derr)
		_ = s.conn.Close()
		return
	}
	pe := pgconn.ErrorResponseToPgError(&msg)
	if pe.Severity == "FATAL" || pe.Severity == "PANIC" || pe.SeverityUnlocalized == "FATAL" || pe.SeverityUnlocalized == "PANIC" {
		s.fatal = pe
	}
	if s.reply.err == nil {
		s.reply.err = pe
	}
}

// next returns the next message's type and body, valid until the next
// call, reading from the socket as needed.
func (s *session) next() (byte, []byte, error) {
	for {
		if n := s.w - s.r; n >= 5 {
			size := int(binary.BigEndian.Uint32(s.buf[s.r+1:])) + 1 // with the type byte
			if size < 5 || size > maxMessage {
				_ = s.conn.Close()
				s.end = fmt.Errorf("a malformed message from the server (type %q, %d bytes)", s.buf[s.r], size)
				return 0, nil, s.end
			}
			if n >= size {
				typ, body := s.buf[s.r], s.buf[s.r+5:s.r+size]
				s.r += size
				return typ, body, nil
			}
			if size > len(s.buf) {
				grown := make([]byte, size)
				s.w = copy(grown, s.buf[s.r:s.w])
				s.r, s.buf = 0, grown
			}
		}
		if s.rowInBuf {
			s.pin() // what follows reuses buf's bytes, the row's among them
		}
		switch {
		case s.r == s.w:
			s.r, s.w = 0, 0
			if len(s.buf) > largeReadBuffer {
				s.buf = make([]byte, initialReadBuffer) // a large message is read: let its buffer go
			}
		case s.r > 0:
			s.w = copy(s.buf, s.buf[s.r:s.w])
			s.r = 0
		}
		var n int
		var err error
		switch {
		case s.raw != nil:
			n, err = s.rawRead(s.buf[s.w:])
		case s.sock != nil:
			// The socket's Read without its frame: the read a host's
			// goroutine parks in between probes is the deepest point of
			// its stack all its life, which must stay under a quarter of
			// 8 KiB for the collector to halve a stack that grew (intake.go).
			n, err = s.sock.Conn.Read(s.buf[s.w:])
			s.sock.note(err)
		default:
			n, err = s.conn.Read(s.buf[s.w:])
		}
		s.w += n
		if err != nil && n == 0 {
			return 0, nil, err
		}
	}
}

// past is a read deadline that has passed: it cuts a read at once.
var past = time.Unix(1, 0)

// alarm cuts a wait on a session's socket short, from another goroutine:
// a kick (a wait between probes only), or the end of the context the wait
// is under (any wait). Both move the socket's read deadline into the past,
// under the lock the waiting goroutine sets its own deadline under, so
// that neither undoes the other.
type alarm struct {
	mu   sync.Mutex
	conn net.Conn // the socket waited on; nil while no wait is armed
	idle bool     // the wait is between probes: a kick cuts it

	// ctx is the context whose end cuts every wait (context.AfterFunc),
	// and stop undoes that: a host's goroutine probes under one context
	// all its life, so this is set up once per checker.
	ctx  context.Context
	stop func() bool
}

// arm sets conn's read deadline to by (zero: none) for a wait under ctx,
// one that a kick cuts when idle, and reports whether ctx is still
// live: when it is not, the wait is over before it began.
func (a *alarm) arm(ctx context.Context, conn net.Conn, by time.Time, idle bool) bool {
	a.mu.Lock()
	if a.ctx != ctx {
		if a.stop != nil {
			a.stop()
		}
		a.ctx, a.stop = ctx, nil
		if ctx.Done() != nil {
			a.stop = context.AfterFunc(ctx, func() { a.rung(ctx) })
		}
	}
	a.conn, a.idle = conn, idle
	_ = conn.SetReadDeadline(by)
	a.mu.Unlock()
	return ctx.Err() == nil
}

// disarm ends the wait armed last.
func (a *alarm) disarm() {
	a.mu.Lock()
	a.conn = nil
	a.mu.Unlock()
}

// kick cuts a wait between probes, if one is armed.
func (a *alarm) kick() {
	a.mu.Lock()
	if a.conn != nil && a.idle {
		_ = a.conn.SetReadDeadline(past)
	}
	a.mu.Unlock()
}

// rung cuts the wait armed under ctx, which has ended.
func (a *alarm) rung(ctx context.Context) {
	a.mu.Lock()
	if a.conn != nil && a.ctx == ctx {
		_ = a.conn.SetReadDeadline(past)
	}
	a.mu.Unlock()
}

// release undoes the alarm's hold on its context.
func (a *alarm) release() {
	a.mu.Lock()
	if a.stop != nil {
		a.stop()
	}
	a.ctx, a.stop = nil, nil
	a.mu.Unlock()
}
