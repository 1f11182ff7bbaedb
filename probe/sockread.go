//go:build unix

package probe

import (
	"io"
	"net"
	"os"
	"syscall"
)

// A probe's exchange on a socket of our own (no TLS) writes its request
// and reads its reply through the socket's descriptor (syscall.RawConn),
// which saves a system call and the netpoller's bookkeeping of a second
// operation on every probe. net.Conn's Read always tries a read before it
// waits, and after a write that read can only find nothing: the reply
// cannot come before its request. So the request is written by the read
// of its reply (send, rawStep): the read arms the socket's readiness
// first, writes, and waits for the reply without trying a read first;
// every later read of the reply, and every read between probes, tries
// first and waits after, as net.Conn's does. A write that would block or
// is cut short (never seen with a request of a few dozen bytes on an
// idle socket) is finished by net.Conn's Write, which waits as it must.
// Failures read as net.Conn's would: the same error, kept as the socket's
// first failure (socket.go).

// rawSocket is the descriptor of conn, a dialed TCP socket, for rawRead;
// nil when it has none.
func rawSocket(conn net.Conn) syscall.RawConn {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return raw
}

// send writes req, or leaves it to the next read (rawRead) when that read
// will be of req's reply: nothing read and not yet parsed is in buf.
func (s *session) send(req []byte) error {
	if s.raw != nil && s.r == s.w {
		s.out = req
		return nil
	}
	_, err := s.conn.Write(req)
	return err
}

// unsent forgets a request left to a read that never came (the exchange
// ended without one).
func (s *session) unsent() { s.out, s.outFailed = nil, false }

// rawRead is the socket's Read into b, and first the write of the request
// send left to it, if any.
func (s *session) rawRead(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	s.in, s.got, s.gotErr = b, 0, nil
	err := s.raw.Read(s.step)
	s.in = nil
	switch {
	case s.outErr != nil:
		werr := &net.OpError{Op: "write", Net: "tcp", Source: s.sock.LocalAddr(), Addr: s.sock.RemoteAddr(), Err: os.NewSyscallError("write", s.outErr)}
		s.rest, s.outErr, s.outFailed = nil, nil, true
		s.sock.note(werr)
		return 0, werr
	case s.rest != nil:
		rest := s.rest
		s.rest = nil
		if _, werr := s.sock.Write(rest); werr != nil { // waits for room, notes a failure
			s.outFailed = true
			return 0, werr
		}
		return s.rawRead(b)
	case err == os.ErrDeadlineExceeded:
		// The deadline (by, the next tick, the alarm) from a socket held
		// as a file (sockfile.go): the poller's own error, as it is, so
		// that the wait allocates nothing. Only errors.Is reads it.
		return 0, err
	case err != nil:
		// The deadline from net's RawConn, or the socket closed: the
		// wait's own failure, worded as net.Conn's Read words it.
		if oe, ok := err.(*net.OpError); ok {
			oe.Op = "read"
			return 0, err
		}
		// A file's poller says only that it is closed (ours: abandon,
		// close), in its own words.
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: s.sock.LocalAddr(), Addr: s.sock.RemoteAddr(), Err: net.ErrClosed}
	case s.gotErr != nil:
		rerr := &net.OpError{Op: "read", Net: "tcp", Source: s.sock.LocalAddr(), Addr: s.sock.RemoteAddr(), Err: os.NewSyscallError("read", s.gotErr)}
		s.sock.note(rerr)
		return 0, rerr
	case s.got == 0:
		s.sock.note(io.EOF)
		return 0, io.EOF
	}
	return s.got, nil
}

// rawStep is rawRead's work on the descriptor, each time the socket may
// be read: the pending request's write, then a read. It reports whether
// it is done (false: wait until the socket is readable, and call again).
func (s *session) rawStep(fd uintptr) bool {
	if out := s.out; out != nil {
		s.out = nil
		n, err := ignoringEINTR(syscall.Write, int(fd), out)
		switch {
		case err == nil && n == len(out):
			return false // the reply cannot have come yet: wait for it
		case err == syscall.EAGAIN:
			s.rest = out
		case err != nil:
			s.outErr = err
		default:
			s.rest = out[n:]
		}
		return true
	}
	n, err := ignoringEINTR(syscall.Read, int(fd), s.in)
	if err == syscall.EAGAIN {
		return false
	}
	s.got, s.gotErr = max(n, 0), err
	return true
}

// ignoringEINTR is op(fd, b), again while a signal interrupts it.
func ignoringEINTR(op func(int, []byte) (int, error), fd int, b []byte) (int, error) {
	for {
		n, err := op(fd, b)
		if err != syscall.EINTR {
			return n, err
		}
	}
}
