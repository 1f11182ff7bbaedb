package probe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
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
// A session then has one reader goroutine for as long as it lives. It
// reads every message the server sends, into one small buffer that grows
// only for a message that needs it: the replies to the checker's requests
// (a probe's Bind, Execute, Sync: bytes that are the same on every probe,
// encoded once), and whatever comes unasked between them: a FATAL error
// as the server ends the session (57P01 from a shutdown or
// pg_terminate_backend), notices, parameter reports, and the end of the
// socket. So the reader is also what watches the idle session: when it
// stops, gone is closed, and a host's goroutine waiting for its next tick
// sees it at once, without a goroutine or a context of its own per idle
// period (intake.go).

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
type session struct {
	conn net.Conn   // the hijacked connection: our *socket, or TLS above it
	ip   netip.Addr // the address connected to

	// mu guards reply: the reader fills it while a reply comes in, the
	// checker reads it once replied says the reply is complete.
	mu    sync.Mutex
	reply reply
	// replied has a value for each ReadyForQuery, the end of a reply.
	replied chan struct{}

	// gone is closed when the reader stops: the session ended. end says
	// why, and is set before gone is closed.
	gone chan struct{}
	end  error

	// The reader's buffer: buf[r:w] is read and not yet parsed.
	buf  []byte
	r, w int
}

// reply is what the server answered one request with, up to its
// ReadyForQuery.
type reply struct {
	rows int    // DataRows
	row  []byte // the first DataRow's body (its column count and columns)
	err  error  // the first ErrorResponse, a *pgconn.PgError
}

// startSession takes over pc, an idle session pgx has set up, and starts
// its reader. pc is unusable afterwards, whatever the outcome.
func startSession(pc *pgconn.PgConn) (*session, error) {
	if pc.Frontend().ReadBufferLen() != 0 {
		// Bytes that pgconn has read and not parsed would be lost with
		// its buffer: nothing is sent unasked to an idle session but a
		// notice, a parameter report or the session's end, and none of
		// them is worth the risk.
		pc.Conn().Close()
		return nil, errors.New("the session was not idle when taken over")
	}
	hc, err := pc.Hijack()
	if err != nil {
		return nil, err
	}
	return newSession(hc.Conn), nil
}

// newSession starts the reader of conn, an idle session's connection.
func newSession(conn net.Conn) *session {
	s := &session{
		conn:    conn,
		replied: make(chan struct{}, 1),
		gone:    make(chan struct{}),
		buf:     make([]byte, initialReadBuffer),
	}
	if ta, ok := s.conn.RemoteAddr().(*net.TCPAddr); ok {
		s.ip = ta.AddrPort().Addr().Unmap()
	}
	go s.read()
	return s
}

// ended reports whether the session is over (its reader stopped).
func (s *session) ended() bool {
	select {
	case <-s.gone:
		return true
	default:
		return false
	}
}

// exchange sends req, one or more messages ending with a Sync, and waits
// for the reply: nil when it came (the server's error, if any, is in
// reply.err), else why it did not: the session's end (the server's FATAL
// error, or the socket's), or the caller's deadline (errTimedOut, and the
// session is closed): done closing or expiry firing, either may be nil.
// The reply's row is valid until the next exchange.
func (s *session) exchange(req []byte, done <-chan struct{}, expiry <-chan time.Time) (reply, error) {
	s.mu.Lock()
	s.reply.rows, s.reply.err = 0, nil
	s.mu.Unlock()
	if _, err := s.conn.Write(req); err != nil {
		return reply{}, err
	}
	select {
	case <-s.replied:
	case <-s.gone:
		return reply{}, s.end
	case <-done:
		return reply{}, s.abandon()
	case <-expiry:
		return reply{}, s.abandon()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reply, nil
}

// abandon ends the session under a reply that may still come: nothing
// could tell it from the reply to the next request. It returns
// errTimedOut.
func (s *session) abandon() error {
	_ = s.conn.Close()
	return errTimedOut
}

// errTimedOut: an exchange's deadline came (done closed, expiry fired) before its reply.
var errTimedOut = errors.New("timed out")

// terminateMessage is the Terminate message a client ends a session with.
var terminateMessage = []byte{'X', 0, 0, 0, 4}

// close ends the session as a client does (Terminate, then the socket)
// and waits for its reader to stop.
func (s *session) close() {
	_ = s.conn.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	_, _ = s.conn.Write(terminateMessage)
	_ = s.conn.Close()
	<-s.gone
}

// read is the session's reader: it parses every message the server sends
// until the socket fails or closes.
func (s *session) read() {
	defer close(s.gone)
	var fatal error // a FATAL or PANIC error: the server ends the session, and says why
	for {
		typ, body, err := s.next()
		if err != nil {
			s.end = err
			if fatal != nil {
				s.end = fatal // why the server ended it
			} else if f := socketFailure(s.conn); f != nil {
				s.end = f // the kernel's word, in the words socket.go gives it
			}
			return
		}
		switch typ {
		case 'D': // DataRow
			s.mu.Lock()
			if s.reply.rows == 0 {
				if cap(s.reply.row) > largeReadBuffer && len(body) <= largeReadBuffer {
					s.reply.row = nil // a large row was read once (a history file): not kept for every one after
				}
				s.reply.row = append(s.reply.row[:0], body...)
			}
			s.reply.rows++
			s.mu.Unlock()
		case 'E': // ErrorResponse
			var msg pgproto3.ErrorResponse
			if derr := msg.Decode(body); derr != nil {
				s.end = fmt.Errorf("a malformed error message from the server: %w", derr)
				_ = s.conn.Close()
				return
			}
			pe := pgconn.ErrorResponseToPgError(&msg)
			if pe.Severity == "FATAL" || pe.Severity == "PANIC" || pe.SeverityUnlocalized == "FATAL" || pe.SeverityUnlocalized == "PANIC" {
				fatal = pe
			}
			s.mu.Lock()
			if s.reply.err == nil {
				s.reply.err = pe
			}
			s.mu.Unlock()
		case 'Z': // ReadyForQuery: the reply is complete
			select {
			case s.replied <- struct{}{}:
			default:
			}
		}
		// Everything else is read and let go: ParseComplete,
		// BindComplete, RowDescription, CommandComplete, NoData; a
		// NoticeResponse, ParameterStatus or NotificationResponse, which
		// may come at any time.
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
				return 0, nil, fmt.Errorf("a malformed message from the server (type %q, %d bytes)", s.buf[s.r], size)
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
		n, err := s.conn.Read(s.buf[s.w:])
		s.w += n
		if err != nil && n == 0 {
			return 0, nil, err
		}
	}
}
