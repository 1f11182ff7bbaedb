//go:build linux

package probe

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"time"

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
// A CancelRequest for the checker's own session (reachcancel.go) goes
// only at the end of a probe (send), and its answer is the server's close.
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
	// req is what is sent (sslRequest, or a CancelRequest). cancel: a
	// CancelRequest for the checker's own session (reachcancel.go), sent
	// only when the probe is done with that session (send), not as soon
	// as the connection is made; made: the connection is made, the
	// request not sent yet; signalled: the server closed the connection
	// after reading it, the session's backend signalled.
	req                     []byte
	cancel, made, signalled bool
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
	return startRaw(host, port, bound, sslRequest, false)
}

// startRawCancel is startRawConnect for a CancelRequest for the session
// of backend pid and key (reachcancel.go): the connect starts now, the
// request goes when send is called. The forked backend signals that
// session, idle then, which ignores the signal, and closes without a reply
// (processCancelRequest, at DEBUG2 only): the close is the answer.
func startRawCancel(host string, port uint16, bound time.Duration, pid, key uint32) *rawConnect {
	req := make([]byte, 16)
	copy(req, cancelRequest[:])
	binary.BigEndian.PutUint32(req[8:], pid)
	binary.BigEndian.PutUint32(req[12:], key)
	return startRaw(host, port, bound, req, true)
}

// startRaw starts a bare connect sending req.
func startRaw(host string, port uint16, bound time.Duration, req []byte, cancel bool) *rawConnect {
	ip, err := netip.ParseAddr(host)
	if err != nil || ip.Zone() != "" {
		return nil
	}
	ip = ip.Unmap()
	r := &rawConnect{fd: -1, addr: netip.AddrPortFrom(ip, port), started: time.Now(), bound: bound, req: req, cancel: cancel}
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
	if done && err == nil { // made at once: ask at once (a cancel: at send)
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
	switch {
	case r.asked:
		done, err = r.answer()
	case !r.made:
		if done, err = r.connect(); done && err == nil {
			done, err = r.ask()
		}
	}
	if !done && r.conn == nil && time.Since(r.started) >= r.bound {
		op := "dial"
		switch {
		case r.asked:
			op = "read"
		case r.made: // a cancel no probe's end sent: the server was never asked
			r.close()
			return true, errCancelUnsent
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
// if it is in already; a cancel's connection made is only noted (send).
func (r *rawConnect) ask() (done bool, err error) {
	if r.cancel && !r.made {
		r.made = true
		return false, nil
	}
	for {
		if err = unix.Sendto(r.fd, r.req, unix.MSG_NOSIGNAL, nil); err != unix.EINTR {
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
	case n == 0 && r.cancel:
		r.signalled = true // the backend read the cancel, signalled, and closed
		return true, nil
	case n == 0:
		return true, io.EOF // closed before any answer: as tryConnect's read
	}
	if r.cancel && b[0] != 'E' {
		return true, fmt.Errorf("unexpected answer %q to a CancelRequest", b[0])
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

// send sends a cancel's request once its connection is made (the probe
// is done with the session: reachcancel.go), reading the answer if it is
// in already, and reports whether the request is out. An attempt that
// ends here keeps its end for poll.
func (r *rawConnect) send() (sent bool) {
	if r.ended || r.asked || r.fd < 0 {
		return r.asked
	}
	done, err := false, error(nil)
	if !r.made {
		done, err = r.connect()
		if done && err == nil {
			done, err = r.ask() // notes it made
		}
	}
	if !done && r.made {
		done, err = r.ask()
	}
	if done {
		r.ended, r.err = true, err
		r.close()
	}
	return r.asked
}

// settle waits, at most until by, for the end of a cancel whose request
// is out (its answer: the server's close), and reports whether it has
// ended (or handed its rest over). An attempt that ends here keeps its
// end for poll.
func (r *rawConnect) settle(by time.Time) bool {
	for {
		if r.ended || r.conn != nil {
			return true
		}
		if !r.asked || r.fd < 0 {
			return false
		}
		done, err := r.answer()
		if done {
			r.ended, r.err = true, err
			r.close()
			return true
		}
		if r.conn != nil {
			return true
		}
		ms := int((time.Until(by) + time.Millisecond - 1) / time.Millisecond)
		if ms <= 0 {
			return false
		}
		fds := []unix.PollFd{{Fd: int32(r.fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, ms); err != nil && err != unix.EINTR {
			return false
		}
	}
}

// handOver is the rest of the conversation an 'S' or an 'E' asks for, to
// run as an attempt of its own (startAdmission), and when it must end;
// nil when there is none.
func (r *rawConnect) handOver() (try func(context.Context, *connConfig) error, by time.Time) {
	if r.conn == nil {
		return nil, time.Time{}
	}
	conn, answer := r.conn, r.rest
	r.conn = nil
	return func(ctx context.Context, cfg *connConfig) error {
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
