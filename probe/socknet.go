//go:build !unix

package probe

import (
	"net"
	"syscall"
)

// Elsewhere a session's socket is read and written through net.Conn alone
// (sockread.go is Unix's): rawSocket gives no descriptor, so rawRead and
// rawStep are never called.

func rawSocket(net.Conn) syscall.RawConn { return nil }

// ownSocket keeps net's connection (sockfile.go is Unix's).
func ownSocket(conn net.Conn) net.Conn { return conn }

// send writes req.
func (s *session) send(req []byte) error {
	_, err := s.conn.Write(req)
	return err
}

func (s *session) unsent() {}

func (s *session) rawRead(b []byte) (int, error) { return s.conn.Read(b) }

func (s *session) rawStep(uintptr) bool { return true }
