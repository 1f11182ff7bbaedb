package pgtest

import (
	"errors"
	"net"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// PasswordTrap is a fake PostgreSQL server that does what a hostile one
// would: it refuses TLS (answers an SSLRequest with 'N'), asks every
// client for its password in clear text (AuthenticationCleartextPassword)
// and keeps what it is given. A client that was told to require TLS must
// never get as far as sending it.
type PasswordTrap struct {
	ln net.Listener

	mu        sync.Mutex
	startups  int
	passwords []string
	done      sync.WaitGroup
}

// NewPasswordTrap listens on addr (loopback, from Addrs) until the test ends.
func NewPasswordTrap(t testing.TB, addr string) *PasswordTrap {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	p := &PasswordTrap{ln: ln}
	p.done.Add(1)
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.done.Wait()
	})
	return p
}

// Addr is the address the trap listens on.
func (p *PasswordTrap) Addr() string { return p.ln.Addr().String() }

// Passwords are the passwords clients sent, in order.
func (p *PasswordTrap) Passwords() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.passwords...)
}

// Startups is how many clients sent a startup message in the clear: got
// past TLS negotiation, so far as to name their user.
func (p *PasswordTrap) Startups() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.startups
}

func (p *PasswordTrap) accept() {
	defer p.done.Done()
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		conns.Add(1)
		go func() {
			defer conns.Done()
			defer c.Close()
			_ = p.serve(c)
		}()
	}
}

func (p *PasswordTrap) serve(c net.Conn) error {
	be := pgproto3.NewBackend(c, c)
	for {
		msg, err := be.ReceiveStartupMessage()
		if err != nil {
			return err
		}
		if _, ok := msg.(*pgproto3.StartupMessage); ok {
			break
		}
		if _, err := c.Write([]byte("N")); err != nil { // no TLS, no GSS encryption
			return err
		}
	}
	p.mu.Lock()
	p.startups++
	p.mu.Unlock()
	be.Send(&pgproto3.AuthenticationCleartextPassword{})
	if err := be.Flush(); err != nil {
		return err
	}
	if err := be.SetAuthType(pgproto3.AuthTypeCleartextPassword); err != nil {
		return err
	}
	msg, err := be.Receive()
	if err != nil {
		return err
	}
	pw, ok := msg.(*pgproto3.PasswordMessage)
	if !ok {
		return errors.New("not a password message")
	}
	p.mu.Lock()
	p.passwords = append(p.passwords, pw.Password)
	p.mu.Unlock()
	be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: "28P01", Message: "password authentication failed"})
	return be.Flush()
}
