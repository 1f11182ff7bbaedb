//go:build unix

package probe

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"
)

// Every wait between probes ends by its read deadline: the next tick, or
// a kick that moves the deadline into the past (session.go, alarm). net's
// RawConn.Read, like its Conn.Read, wraps that deadline's error in a new
// net.OpError, so each wait ended by an allocation: about one a probe,
// 19% of the objects pgdns allocated at 10,000 hosts every 1s, with
// the collector's share of its CPU to match (issue 28). An *os.File's
// RawConn reads the same descriptor under the same runtime poller
// (deadlines, parking, a kick that cuts a wait) and returns the poller's
// own error as it is. So once the session is taken over from pgx its
// socket is held as an *os.File (ownSocket): a duplicate of the
// descriptor, registered with the poller as net's was, and net's
// connection is closed (the socket stays open while the duplicate does).
// It keeps less too: no net.TCPConn, netFD or the two addresses'
// net.TCPAddr and sockaddr, 320 bytes a session against 160 (the file,
// its RawConn, fileConn). Its failures read as net's would: fileConn
// words them as net.Conn does, and sockread.go's rawRead its own reads'.

// fileConn is a session's TCP socket held as an *os.File: a net.Conn
// whose errors read as net's. Its local address is read from the socket
// when asked (only a failure's message asks), its peer's is kept.
type fileConn struct {
	f    *os.File
	peer netip.AddrPort
}

// ownSocket is conn, a connected TCP socket that pgx has let go, held as
// an *os.File (fileConn), and conn closed; conn itself when it has no
// descriptor to take, or the duplicate could not be made pollable.
func ownSocket(conn net.Conn) net.Conn {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return conn
	}
	ta, ok := conn.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return conn
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return conn
	}
	nfd, derr := -1, error(nil)
	if err := raw.Control(func(fd uintptr) { nfd, derr = dupCloseOnExec(int(fd)) }); err != nil || derr != nil {
		return conn
	}
	f := os.NewFile(uintptr(nfd), "") // non-blocking, as net left it: registered with the poller
	if f == nil {
		_ = syscall.Close(nfd)
		return conn
	}
	if err := f.SetReadDeadline(time.Time{}); err != nil { // not pollable: keep net's
		_ = f.Close()
		return conn
	}
	_ = conn.Close() // the duplicate keeps the socket open
	return &fileConn{f: f, peer: ta.AddrPort()}
}

func (c *fileConn) Read(b []byte) (int, error) {
	n, err := c.f.Read(b)
	return n, c.wrap("read", err)
}

func (c *fileConn) Write(b []byte) (int, error) {
	n, err := c.f.Write(b)
	return n, c.wrap("write", err)
}

func (c *fileConn) Close() error {
	if err := c.f.Close(); err != nil {
		return c.wrap("close", err)
	}
	return nil
}

// LocalAddr reads the socket's local address: nil if it cannot.
func (c *fileConn) LocalAddr() net.Addr {
	raw, err := c.f.SyscallConn()
	if err != nil {
		return nil
	}
	var sa syscall.Sockaddr
	if err := raw.Control(func(fd uintptr) { sa, _ = syscall.Getsockname(int(fd)) }); err != nil {
		return nil
	}
	switch sa := sa.(type) {
	case *syscall.SockaddrInet4:
		return &net.TCPAddr{IP: sa.Addr[:], Port: sa.Port}
	case *syscall.SockaddrInet6:
		return &net.TCPAddr{IP: sa.Addr[:], Port: sa.Port}
	}
	return nil
}

func (c *fileConn) RemoteAddr() net.Addr { return net.TCPAddrFromAddrPort(c.peer) }

func (c *fileConn) SetDeadline(t time.Time) error      { return c.f.SetDeadline(t) }
func (c *fileConn) SetReadDeadline(t time.Time) error  { return c.f.SetReadDeadline(t) }
func (c *fileConn) SetWriteDeadline(t time.Time) error { return c.f.SetWriteDeadline(t) }

// SyscallConn is the file's: its Read returns the poller's errors as they
// are (rawRead).
func (c *fileConn) SyscallConn() (syscall.RawConn, error) { return c.f.SyscallConn() }

// wrap words err, the file's failure of op, as net.Conn's would be: a
// *net.OpError whose Err is the system call's error, os.ErrDeadlineExceeded,
// or net.ErrClosed for a socket closed on our side.
func (c *fileConn) wrap(op string, err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	var errno syscall.Errno
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		err = os.ErrDeadlineExceeded
	case errors.Is(err, os.ErrClosed):
		err = net.ErrClosed
	case errors.As(err, &errno):
		err = os.NewSyscallError(op, errno)
	}
	return c.opError(op, err)
}

// dupCloseOnExec is a duplicate of fd, closed on exec, as net's
// File makes it (a fork between the two steps would leak it otherwise).
func dupCloseOnExec(fd int) (int, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	nfd, err := syscall.Dup(fd)
	if err == nil {
		syscall.CloseOnExec(nfd)
	}
	return nfd, err
}

// opError is err as net's failure of op on c.
func (c *fileConn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
