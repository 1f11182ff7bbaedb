//go:build linux

package probe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// An admission attempt (tryAdmission: the startup packet, read up to the
// server's first decisive reply) is made by every host once every
// admission interval while its role may not read the postmaster's status,
// and every third reach otherwise: at ten thousand hosts every 1s,
// hundreds a second. Dialed on a goroutine of its own, each cost the
// goroutine and its stack growth, a context and its timer, net's dialer
// (address parsing, socket options), the netpoller's registration and
// removal, and a wake-up of the goroutine for every step: 7-10% of
// pgdns's CPU at 10,000 hosts (issue 28). So an attempt in plaintext to
// an IP address is a non-blocking socket of pgdns's own, as reach.go's
// bare connect, but moved along by one poller that every checker shares
// (admitPoller: one goroutine, one epoll descriptor), not by the host's
// probes: the attempt's end is read the moment the server sends it, and
// the conversation ends then as tryAdmission ends it (a request for a
// password left unanswered, a whole session under trust ended by a
// Terminate), so no backend waits for the next probe. What it sends and
// how it judges what it reads are tryAdmission's (the startup packet of
// the probe's session, the same messages decisive, its errors in the
// shapes net gives: refused or reset definitive, a timeout before the
// server's first byte noAnswer); the checker reads its end at its next
// probe, from the same channel as a dialed attempt's (admissionResult).
// An attempt over TLS (an sslmode that asks for it, or allows it after a
// plaintext refusal), to a host name or a Unix socket, is dialed as
// before.

// admitTick is the longest the poller waits while attempts are under
// way, so that an attempt that hears nothing ends within this much of its
// bound.
const admitTick = 50 * time.Millisecond

// rawAdmit is an admission attempt on a socket of pgdns's own, moved along
// by admitPoller.
type rawAdmit struct {
	fd      int
	sa      unix.Sockaddr
	addr    netip.AddrPort
	by      time.Time // its bound: no answer by then is a timeout
	startup []byte    // the startup packet, buf's start until it is sent
	made    bool      // the connection is made
	sent    int       // bytes of startup sent
	// What has been read and not yet taken is buf[r:w]; answered: the
	// server has sent a byte; authenticated: AuthenticationOk was read.
	buf           []byte
	r, w          int
	answered      bool
	authenticated bool
	done          chan error // its end, once: buffered
	ended         bool
}

// admitPoller moves every rawAdmit along: one goroutine and one epoll
// descriptor of its own for all of them (edge-triggered: each event is
// read until the socket has nothing more). The goroutine waits in Go's
// netpoller, on that descriptor (readable when one of its sockets has an
// event), not in epoll_wait: a thread blocked in a system call is one
// the scheduler hands its work away from and back to at every wake-up.
type admitPoller struct {
	mu     sync.Mutex
	epfd   int
	file   *os.File        // epfd, in Go's netpoller
	rc     syscall.RawConn // file's
	live   map[int32]*rawAdmit
	wake   chan struct{}
	events []unix.EpollEvent
}

var (
	rawAdmissions atomic.Int64 // attempts made on the poller, for the tests
	admitPollOnce sync.Once
	admitPoll     *admitPoller // nil: no epoll, attempts are dialed
)

// sharedAdmitPoller returns the poller, started by the first attempt.
func sharedAdmitPoller() *admitPoller {
	admitPollOnce.Do(func() {
		fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			return
		}
		if err := unix.SetNonblock(fd, true); err != nil {
			_ = unix.Close(fd)
			return
		}
		p := &admitPoller{epfd: fd, file: os.NewFile(uintptr(fd), "admission poller"), live: map[int32]*rawAdmit{},
			wake: make(chan struct{}, 1), events: make([]unix.EpollEvent, 64)}
		if p.rc, err = p.file.SyscallConn(); err != nil {
			_ = p.file.Close()
			return
		}
		admitPoll = p
		go p.run()
	})
	return admitPoll
}

// startRawAdmission starts cfg's admission attempt on the shared poller,
// bounded by bound, and returns the channel its end comes on and what
// stops it; nil when the attempt must be dialed (tryAdmission): TLS asked
// for or allowed, a host that is not an IP address, no epoll.
func startRawAdmission(cfg *connConfig, bound time.Duration) (chan error, func()) {
	c := &cfg.Config
	if c.TLSConfig != nil {
		return nil, nil
	}
	for _, f := range c.Fallbacks {
		if f.Host == c.Host && f.Port == c.Port && f.TLSConfig != nil {
			return nil, nil // sslmode=allow: TLS after a refusal in plaintext (tryAdmission)
		}
	}
	ip, err := netip.ParseAddr(c.Host)
	if err != nil || ip.Zone() != "" {
		return nil, nil
	}
	p := sharedAdmitPoller()
	if p == nil {
		return nil, nil
	}
	if t := c.ConnectTimeout; t > 0 && t < bound {
		bound = t // withConnectTimeout
	}
	ip = ip.Unmap()
	a := &rawAdmit{fd: -1, addr: netip.AddrPortFrom(ip, c.Port), by: time.Now().Add(bound), done: make(chan error, 1)}
	a.startup = startupPacket(cfg)
	a.buf = a.startup[:cap(a.startup)]
	domain := unix.AF_INET
	if ip.Is4() {
		a.sa = &unix.SockaddrInet4{Port: int(c.Port), Addr: ip.As4()}
	} else {
		domain = unix.AF_INET6
		a.sa = &unix.SockaddrInet6{Port: int(c.Port), Addr: ip.As16()}
	}
	if a.fd, err = unix.Socket(domain, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0); err != nil {
		a.fd = -1
		a.end(unanswered(a.opError("dial", "socket", err)))
		return a.done, func() {}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if done, err := a.connect(); done {
		a.end(err)
		return a.done, func() {}
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(a.fd)}
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, a.fd, &ev); err != nil {
		_ = unix.Close(a.fd)
		return nil, nil // dialed after all
	}
	p.live[int32(a.fd)] = a
	rawAdmissions.Add(1)
	if len(p.live) == 1 {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
	return a.done, func() { p.stop(a) }
}

// run is the poller's goroutine: it waits for an event of the sockets
// under way, or the earliest of their bounds (admitTick at the most), and
// moves along those that have one and ends those past their bound.
func (p *admitPoller) run() {
	for {
		p.mu.Lock()
		next := time.Now().Add(admitTick)
		for _, a := range p.live {
			if a.by.Before(next) {
				next = a.by
			}
		}
		idle := len(p.live) == 0
		p.mu.Unlock()
		if idle {
			<-p.wake
			continue
		}
		_ = p.file.SetReadDeadline(next)
		err := p.rc.Read(func(fd uintptr) bool {
			k, err := unix.EpollWait(int(fd), p.events, 0)
			if err != nil || k <= 0 {
				return err != nil && err != unix.EINTR && err != unix.EAGAIN // none yet: wait in the netpoller
			}
			p.mu.Lock()
			for _, ev := range p.events[:k] {
				if a := p.live[ev.Fd]; a != nil {
					if done, err := a.step(); done {
						p.finish(a, err)
					}
				}
			}
			p.mu.Unlock()
			return true
		})
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			time.Sleep(admitTick) // not expected: epfd is ours
		}
		p.mu.Lock()
		now := time.Now()
		for _, a := range p.live {
			if !now.Before(a.by) {
				p.finish(a, a.timedOut())
			}
		}
		p.mu.Unlock()
	}
}

// stop ends a, if it has not ended (stopAdmission); what it ended with
// is not read.
func (p *admitPoller) stop(a *rawAdmit) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !a.ended {
		p.finish(a, errors.New("admission attempt stopped"))
	}
}

// finish ends a with err (p.mu held): its socket closed, which takes it
// out of the epoll set.
func (p *admitPoller) finish(a *rawAdmit, err error) {
	delete(p.live, int32(a.fd))
	a.end(err)
}

// end closes a's socket and sends its end.
func (a *rawAdmit) end(err error) {
	if a.ended {
		return
	}
	a.ended = true
	if a.fd >= 0 {
		_ = unix.Close(a.fd) // a FIN, as tryAdmission's Close
		a.fd = -1
	}
	a.done <- err
}

// forking reports whether what a has read is the old-style error of a
// postmaster that cannot fork ('E' and no length: admitter.next).
func (a *rawAdmit) forking() bool {
	return a.w-a.r >= 5 && a.buf[a.r] == 'E' && a.buf[a.r+1] != 0
}

// forkFailure is that error's refusal, of the text read.
func (a *rawAdmit) forkFailure() error {
	return forkFailure(bytes.NewReader(a.buf[a.r+1 : a.w]))
}

// timedOut is a's end at its bound: no answer (noAnswer) before the
// server's first byte, as answerConn.judge has it.
func (a *rawAdmit) timedOut() error {
	if a.forking() {
		return a.forkFailure() // what came before the deadline (forkFailure's ReadFull)
	}
	op := "read"
	if !a.made {
		op = "dial"
	}
	err := a.opError(op, "", os.ErrDeadlineExceeded)
	if a.answered {
		return err
	}
	return unanswered(err)
}

// connect calls connect(2): the first call starts the handshake, each
// later one says how it went; once made, the startup packet is sent and
// whatever the server has sent is read (step).
func (a *rawAdmit) connect() (done bool, err error) {
	for {
		if err = unix.Connect(a.fd, a.sa); err != unix.EINTR {
			break
		}
	}
	switch err {
	case nil, unix.EISCONN:
		a.made = true
		return a.step()
	case unix.EINPROGRESS, unix.EALREADY:
		return false, nil
	}
	return true, unanswered(a.opError("dial", "connect", err))
}

// step moves a along as far as its socket lets it: the connection, the
// startup packet, then the server's messages, read until the decisive
// one (exchange's rules) or until the socket has nothing more.
func (a *rawAdmit) step() (done bool, err error) {
	if !a.made {
		return a.connect()
	}
	for a.sent < len(a.startup) {
		n, err := unix.SendmsgN(a.fd, a.startup[a.sent:], nil, nil, unix.MSG_NOSIGNAL)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return false, nil
		case err != nil:
			return true, a.opError("write", "", err)
		}
		a.sent += n
		if a.sent == len(a.startup) {
			a.r, a.w = 0, 0 // the buffer is the packet's: read into it from here
		}
	}
	for {
		if done, err := a.messages(); done {
			return true, err
		}
		if a.w == len(a.buf) {
			if a.r > 0 {
				a.w = copy(a.buf, a.buf[a.r:a.w])
				a.r = 0
			} else {
				b := make([]byte, 2*len(a.buf))
				copy(b, a.buf[:a.w])
				a.buf = b
			}
		}
		n, err := unix.Read(a.fd, a.buf[a.w:])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return false, nil
		case (err != nil || n == 0) && a.forking():
			return true, a.forkFailure() // its text ends at the close, or a reset (forkFailure's ReadFull)
		case err != nil:
			return true, a.opError("read", "", err)
		case n == 0:
			// As admitter.fill's: io.EOF before any byte of the header,
			// or of a body after its whole header; else in the middle.
			if rem := a.w - a.r; rem != 0 && rem != 5 {
				return true, io.ErrUnexpectedEOF
			}
			return true, io.EOF
		}
		a.w += n
		a.answered = true
	}
}

// messages takes the whole messages read, as exchange does, and reports
// whether one of them ended the attempt, and how.
func (a *rawAdmit) messages() (done bool, err error) {
	for a.w-a.r >= 5 {
		h := a.buf[a.r : a.r+5]
		typ, n := h[0], int(binary.BigEndian.Uint32(h[1:5]))-4
		if a.forking() {
			// The old-style error of a postmaster that cannot fork: its
			// text up to the close (read on), or 256 bytes of it.
			if a.w-a.r-1 >= 256 {
				return true, a.forkFailure()
			}
			return false, nil
		}
		if n < 0 || n > maxAdmissionMessage {
			return true, fmt.Errorf("a message %q of %d bytes in a new session", typ, n)
		}
		if a.w-a.r < 5+n {
			if 5+n > len(a.buf) {
				b := make([]byte, 5+n)
				a.w = copy(b, a.buf[a.r:a.w])
				a.buf, a.r = b, 0
			}
			return false, nil
		}
		body := a.buf[a.r+5 : a.r+5+n]
		a.r += 5 + n
		switch typ {
		case 'E':
			// A refusal by pg_hba.conf is the server not serving, as
			// tryAdmission judges it: the poller takes plaintext attempts
			// only, with no TLS fallback to try before it counts.
			e := pgErrorOf(body)
			if hbaRefusal(e) {
				return true, notServing{e}
			}
			return true, e
		case 'R':
			if len(body) < 4 {
				return true, errors.New("a short authentication message")
			}
			if binary.BigEndian.Uint32(body) != 0 {
				return true, nil // a request for a password: admitted (exchange)
			}
			a.authenticated = true
		case 'Z':
			if !a.authenticated {
				return true, errors.New("ReadyForQuery before authentication")
			}
			// A whole session (trust): ended with a Terminate, as exchange.
			for {
				_, err = unix.SendmsgN(a.fd, []byte{'X', 0, 0, 0, 4}, nil, nil, unix.MSG_NOSIGNAL)
				if err != unix.EINTR {
					break
				}
			}
			if err != nil {
				return true, a.opError("write", "", err)
			}
			return true, nil
		case 'S', 'K', 'N', 'v':
		default:
			return true, fmt.Errorf("unexpected message %q in a new session", typ)
		}
	}
	return false, nil
}

// opError is err as net words it, as rawConnect.opError.
func (a *rawAdmit) opError(op, call string, err error) error {
	if errno, ok := err.(unix.Errno); ok {
		if call == "" {
			call = op
		}
		err = os.NewSyscallError(call, errno)
	}
	return &net.OpError{Op: op, Net: "tcp", Addr: net.TCPAddrFromAddrPort(a.addr), Err: err}
}
