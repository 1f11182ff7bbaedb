//go:build linux

package probe

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"
)

// A bare connect (admission.go, reach) is made every 4 s by every host:
// 2,500 a second at ten thousand hosts. Dialed as pgx dials, on a
// goroutine of its own (tryConnect), each cost a goroutine and its stack
// growth, a context and its timer, the dialer's address parsing, socket
// options, the netpoller's registration and removal, and a wake-up for
// the connect and another for the answer: 21% of pgdns's CPU at 10,000
// hosts every 1s and 13% at 1,000 every 250ms before it waited for an
// answer at all, the connect(2) and close(2) themselves less than half of
// it (issue 28). So a bare connect to an address is a non-blocking socket
// of the checker's own, with no goroutine, no timer and no netpoller,
// moved along by the host's probes (poll): the probe that starts it calls
// connect(2), which returns at once with the handshake under way, before
// its query; by the end of that probe the handshake is most often done
// (connect(2) again says how it went without waiting: EALREADY still
// under way, 0 or EISCONN made, else why not, ECONNREFUSED for a reset to
// the SYN), the SSLRequest is sent and the answer read if it is in
// already; a later probe reads it otherwise (a backend is forked first).
// An 'N' is the common answer: the socket is closed (a FIN, and the
// backend, waiting for a startup packet, ends without a word in its log).
// An 'S' (a server with ssl on) or an 'E' (a postmaster that cannot fork)
// needs the rest of tryConnect's conversation (the TLS handshake and its
// close_notify; the error's text): the socket becomes a net.Conn and that
// rest runs on a goroutine as before (afterAnswer). What is judged is
// tryConnect's: refused or reset is definitive, no answer within the
// attempt's bound (the connect, or the answer) is noAnswer. A host named
// by a DNS name (or a Unix socket) is dialed as before: its address is
// the resolver's.

// rawConnect is a bare connect on a socket of the checker's own.
type rawConnect struct {
	fd      int // -1 once closed or handed over
	sa      unix.Sockaddr
	addr    netip.AddrPort
	started time.Time
	bound   time.Duration
	asked   bool // made, and the SSLRequest sent: its answer awaited
	// ended: the attempt ended as it started (refused at once, as over
	// loopback, or no socket); err says how.
	ended bool
	err   error
	// rest: the answer ('S', 'E') whose conversation goes on in conn.
	rest byte
	conn net.Conn
}

// startRawConnect starts a bare connect to host and port, bounded by
// bound, when host is an IP address; nil otherwise (tryConnect dials it).
// The probes read it by poll.
func startRawConnect(host string, port uint16, bound time.Duration) *rawConnect {
	ip, err := netip.ParseAddr(host)
	if err != nil || ip.Zone() != "" {
		return nil
	}
	ip = ip.Unmap()
	r := &rawConnect{fd: -1, addr: netip.AddrPortFrom(ip, port), started: time.Now(), bound: bound}
	domain := unix.AF_INET
	if ip.Is4() {
		r.sa = &unix.SockaddrInet4{Port: int(port), Addr: ip.As4()}
	} else {
		domain = unix.AF_INET6
		r.sa = &unix.SockaddrInet6{Port: int(port), Addr: ip.As16()}
	}
	if r.fd, err = unix.Socket(domain, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0); err != nil {
		r.fd, r.ended, r.err = -1, true, r.opError("dial", "socket", err)
		return r
	}
	done, err := r.connect()
	if done && err == nil { // made at once: ask at once
		done, err = r.ask()
	}
	if done {
		r.ended, r.err = true, err
		r.close()
	}
	return r
}

// poll moves the attempt along and reports whether it has ended, and how
// (its socket then closed): answered 'N' (nil), refused or reset (its
// error), no answer within its bound (noAnswer), or answered so that the
// rest of the conversation is to be had on r.conn (done false, r.conn set:
// handOver).
func (r *rawConnect) poll() (done bool, err error) {
	switch {
	case r.ended:
		return true, r.err
	case r.conn != nil:
		return false, nil // answered: the rest is handOver's
	}
	if !r.asked {
		if done, err = r.connect(); done {
			if err == nil {
				done, err = r.ask()
			}
		}
	} else {
		done, err = r.answer()
	}
	if !done && r.conn == nil && time.Since(r.started) >= r.bound {
		op := "dial"
		if r.asked {
			op = "read"
		}
		done, err = true, unanswered(r.opError(op, "", os.ErrDeadlineExceeded))
	}
	if done {
		r.close()
	}
	return done, err
}

// connect calls connect(2) on the socket: the first call starts the
// handshake, each later one says how it went.
func (r *rawConnect) connect() (done bool, err error) {
	for {
		if err = unix.Connect(r.fd, r.sa); err != unix.EINTR {
			break
		}
	}
	switch err {
	case nil, unix.EISCONN:
		return true, nil
	case unix.EINPROGRESS, unix.EALREADY:
		return false, nil
	}
	return true, r.opError("dial", "connect", err)
}

// ask sends the SSLRequest on the connection made, and reads the answer
// if it is in already.
func (r *rawConnect) ask() (done bool, err error) {
	for {
		if err = unix.Sendto(r.fd, sslRequest, unix.MSG_NOSIGNAL, nil); err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return true, r.opError("write", "", err)
	}
	r.asked = true
	return r.answer()
}

// answer reads the server's one-byte answer to the SSLRequest, if it has
// come.
func (r *rawConnect) answer() (done bool, err error) {
	var b [1]byte
	var n int
	for {
		if n, err = unix.Read(r.fd, b[:]); err != unix.EINTR {
			break
		}
	}
	switch {
	case err == unix.EAGAIN:
		return false, nil
	case err != nil:
		return true, r.opError("read", "", err)
	case n == 0:
		return true, io.EOF // closed before any answer: as tryConnect's read
	}
	switch b[0] {
	case 'N':
		return true, nil
	case 'S', 'E':
		f := os.NewFile(uintptr(r.fd), "")
		conn, cerr := net.FileConn(f) // a copy of the descriptor, in the netpoller
		_ = f.Close()
		r.fd = -1
		if cerr != nil {
			return true, nil // the server answered; what is left proves nothing
		}
		r.rest, r.conn = b[0], conn
		return false, nil
	}
	return true, fmt.Errorf("unexpected answer %q to an SSLRequest", b[0])
}

// handOver is the rest of the conversation an 'S' or an 'E' asks for, to
// run as an attempt of its own (startAdmission), and when it must end;
// nil when there is none.
func (r *rawConnect) handOver() (try func(context.Context, *pgx.ConnConfig) error, by time.Time) {
	if r.conn == nil {
		return nil, time.Time{}
	}
	conn, answer := r.conn, r.rest
	r.conn = nil
	return func(ctx context.Context, cfg *pgx.ConnConfig) error {
		a := &answerConn{Conn: conn, answered: true}
		defer a.Close()
		stop := context.AfterFunc(ctx, func() { _ = a.SetDeadline(time.Unix(1, 0)) })
		defer stop()
		return afterAnswer(ctx, a, cfg, answer)
	}, r.started.Add(r.bound)
}

// opError is err as net words it ("dial tcp 10.0.0.1:5432: connect:
// connection refused"), keeping errors.Is for the errno (classify).
func (r *rawConnect) opError(op, call string, err error) error {
	if errno, ok := err.(unix.Errno); ok {
		if call == "" {
			call = op
		}
		err = os.NewSyscallError(call, errno)
	}
	return &net.OpError{Op: op, Net: "tcp", Addr: net.TCPAddrFromAddrPort(r.addr), Err: err}
}

// close closes the socket: a FIN when the connection was made.
func (r *rawConnect) close() {
	if r.fd >= 0 {
		_ = unix.Close(r.fd)
		r.fd = -1
	}
	if r.conn != nil {
		_ = r.conn.Close()
		r.conn = nil
	}
}
