package dnsserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/miekg/dns"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"

	"github.com/pgdns/pgdns/zone"
)

// batchSize is how many datagrams one recvmmsg/sendmmsg moves at most.
const batchSize = 64

// readBufSize is the largest query a reader takes whole; a query needs
// far less, and what is cut off fails to unpack and gets FORMERR.
const readBufSize = 4096

// udpServer answers UDP for a Handler without miekg/dns's server loop:
// one reader per core, each with its own SO_REUSEPORT socket so that the
// kernel spreads clients across them, reading and writing batches of
// datagrams with recvmmsg/sendmmsg and answering each one inline, in the
// reader, on the fast path (answerFast) or through miekg/dns (answerSlow).
// Only an lsn- query that may wait for a re-probe leaves the reader, so
// that its wait holds up no other query, and only as many as waitSlots
// holds: past that, one is answered at once, as with lsn_wait 0.
type udpServer struct {
	h       *Handler
	limiter *RateLimiter // nil: no rate limit
	conns   []*net.UDPConn

	waitSlots chan struct{} // one per lsn- query waiting off the readers (Limits.MaxLSNWaits)
	onFull    func()        // Limits.OnLSNWaitFull

	readers  sync.WaitGroup
	waiting  sync.WaitGroup // lsn- queries answered off the readers
	stopping atomic.Bool    // a read error is the shutdown's deadline
}

// batchConn is what ipv4.PacketConn and ipv6.PacketConn share.
type batchConn interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
}

// reusePort sets SO_REUSEPORT on a socket before it is bound, so that
// several sockets of this process share one address and the kernel spreads
// datagrams over them.
func reusePort(_, _ string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	}); err != nil {
		return err
	}
	return serr
}

// listenUDP binds n sockets with SO_REUSEPORT on addr. First, a guard
// socket without SO_REUSEPORT is bound and closed: it fails with "address
// already in use" when another process holds the port, with or without
// SO_REUSEPORT, so that pgdns never silently shares its port with a second
// server. With port 0 the guard picks the port.
func listenUDP(addr string, n int) ([]*net.UDPConn, error) {
	guard, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, err
	}
	bound := guard.LocalAddr().String()
	guard.Close()
	lc := net.ListenConfig{Control: reusePort}
	var conns []*net.UDPConn
	for range n {
		pc, err := lc.ListenPacket(context.Background(), "udp", bound)
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
			return nil, err
		}
		conns = append(conns, pc.(*net.UDPConn))
	}
	return conns, nil
}

// udpReaders is how many sockets and readers serve UDP: one per core.
func udpReaders() int { return max(1, runtime.GOMAXPROCS(0)) }

// serve starts one reader per socket; errc gets the first error that
// stops one (never a close by shutdown).
func (s *udpServer) serve(errc chan<- error) {
	for _, c := range s.conns {
		s.readers.Add(1)
		go func() {
			defer s.readers.Done()
			if err := s.read(c); err != nil {
				errc <- err
			}
		}()
	}
}

// read is one reader: a batch in, each datagram answered, the replies out
// in at most two batches (the fast path's first).
func (s *udpServer) read(conn *net.UDPConn) error {
	var pc batchConn = ipv4.NewPacketConn(conn)
	if conn.LocalAddr().(*net.UDPAddr).IP.To4() == nil {
		pc = ipv6.NewPacketConn(conn)
	}
	in := make([]ipv4.Message, batchSize)
	out := make([]ipv4.Message, batchSize)
	outBufs := make([][]byte, batchSize)
	for i := range in {
		in[i].Buffers = [][]byte{make([]byte, readBufSize)}
		out[i].Buffers = make([][]byte, 1)
		outBufs[i] = make([]byte, 0, readBufSize)
	}
	sc := &scratch{hosts: make([]*zone.Host, 0, 64)}
	pending := make([]int, 0, batchSize) // datagrams of the batch the fast path left
	local := conn.LocalAddr()
	onLat := s.h.onLat
	for {
		n, err := pc.ReadBatch(in, 0)
		if err != nil {
			if s.stopping.Load() || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("udp read: %w", err)
		}
		// The fast path's answers are timed per batch: their replies leave
		// together, so each one's latency is the batch's, and a clock read
		// per answer would cost the fast path a large share of its time on
		// a machine whose clock is slow to read. (The slow path's answers
		// time themselves: Handler.serve.)
		var batchStart time.Time
		if onLat != nil {
			batchStart = time.Now()
		}
		sc.fast = 0
		// Two passes: the fast path's answers first, sent at once, then
		// what the slow path answers (SRV, TXT, NXDOMAIN...), so that an A
		// query never waits for a slower answer read in its batch.
		k := 0
		pending = pending[:0]
		for i := range in[:n] {
			ua, ok := in[i].Addr.(*net.UDPAddr)
			if !ok {
				continue
			}
			src := ua.AddrPort()
			req := in[i].Buffers[0][:in[i].N]
			reply, wait, later := s.answerFirst(req, local, src, outBufs[k][:0], sc)
			switch {
			case later:
				pending = append(pending, i)
				continue
			case wait:
				reply = s.answerWaiting(conn, req, local, src, outBufs[k][:0], sc)
			}
			if reply != nil {
				out[k].Buffers[0], out[k].Addr = reply, in[i].Addr
				k++
			}
		}
		timeFast(onLat, sc, batchStart)
		if err := writeAll(pc, out[:k]); err != nil {
			return nil
		}
		k = 0
		for _, i := range pending {
			src := in[i].Addr.(*net.UDPAddr).AddrPort()
			req := in[i].Buffers[0][:in[i].N]
			reply, wait := s.answerLater(req, local, src, outBufs[k][:0], sc)
			if wait {
				reply = s.answerWaiting(conn, req, local, src, outBufs[k][:0], sc)
			}
			if reply != nil {
				out[k].Buffers[0], out[k].Addr = reply, in[i].Addr
				k++
			}
		}
		// An lsn- query that could not wait (every slot taken) may have
		// been answered on the fast path in this pass: timed too.
		timeFast(onLat, sc, batchStart)
		if err := writeAll(pc, out[:k]); err != nil {
			return nil
		}
	}
}

// timeFast reports the latency of the sc.fast answers the fast path gave
// since the batch was read, and resets the count.
func timeFast(onLat func(Path, int, time.Duration), sc *scratch, batchStart time.Time) {
	if onLat == nil || sc.fast == 0 {
		return
	}
	took := time.Since(batchStart)
	for range sc.fast {
		onLat(PathFast, dns.RcodeSuccess, took)
	}
	sc.fast = 0
}

// writeAll sends the replies of out; a non-nil error means the socket is
// closed (the server stops). A reply that cannot be sent (the client's
// port is gone, say) is skipped: the rest are sent.
func writeAll(pc batchConn, out []ipv4.Message) error {
	for sent := 0; sent < len(out); {
		m, err := pc.WriteBatch(out[sent:], 0)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			m = 1
		}
		sent += m
	}
	return nil
}

// answer answers one datagram into out. wait: it is an lsn- query that
// may wait, to be answered off the reader. A panic on the fast path is
// answered again by the slow path, whose handler turns it into SERVFAIL.
func (s *udpServer) answer(req []byte, local net.Addr, src netip.AddrPort, out []byte, sc *scratch) (reply []byte, wait bool) {
	reply, wait, later := s.answerFirst(req, local, src, out, sc)
	if later {
		return s.answerLater(req, local, src, out, sc)
	}
	return reply, wait
}

// answerFirst is answer's first part, the reader's first pass: the rate
// limiter's answer, or the fast path's. later: neither answered it, and
// answerLater does, once the batch's first replies are sent.
func (s *udpServer) answerFirst(req []byte, local net.Addr, src netip.AddrPort, out []byte, sc *scratch) (reply []byte, wait, later bool) {
	if s.limiter != nil && !s.limiter.Allow(src.Addr()) {
		return s.limited(req, local, src, out, sc), false, false
	}
	if reply, res := s.fast(req, out, src.Addr(), sc); res == fastDone {
		sc.fast++
		return reply, false, false
	} else if res == fastWait {
		return nil, true, false
	}
	return nil, false, true
}

// answerLater is the rest of answer, for a datagram the fast path left:
// an lsn- query that may wait (wait), or the slow path's answer.
func (s *udpServer) answerLater(req []byte, local net.Addr, src netip.AddrPort, out []byte, sc *scratch) (reply []byte, wait bool) {
	if s.h.mayWaitForReplay(req, sc) {
		return nil, true
	}
	return answerSlow(req, local, src, out, s.h), false
}

// limited is the rate limiter's answer to a datagram it refuses: TC set,
// nothing else, so that a real resolver retries over TCP.
func (s *udpServer) limited(req []byte, local net.Addr, src netip.AddrPort, out []byte, sc *scratch) []byte {
	if q, ok := parseWire(req, &sc.name); ok {
		return appendTruncatedReply(out, &q)
	}
	return answerSlow(req, local, src, out, dns.HandlerFunc(writeTruncated))
}

// answerWaiting answers a query that may wait for a fresh probe, in
// either pass of a reader's batch: off the reader when a wait slot is
// free (nil: its reply is sent from there), else at once, as with
// lsn_wait: 0.
func (s *udpServer) answerWaiting(conn *net.UDPConn, req []byte, local net.Addr, src netip.AddrPort, out []byte, sc *scratch) []byte {
	if s.answerOffReader(conn, req, src) {
		return nil
	}
	return s.answerAtOnce(req, local, src, out, sc)
}

// answerAtOnce answers an lsn- query that may wait, with every waiting
// slot taken, at once, as lsn_wait 0 answers it: on the fast path when it
// takes the query, else on the slow path through immediate.
func (s *udpServer) answerAtOnce(req []byte, local net.Addr, src netip.AddrPort, out []byte, sc *scratch) []byte {
	sc.atOnce = true
	reply, res := s.fast(req, out, src.Addr(), sc)
	sc.atOnce = false
	if res == fastDone {
		sc.fast++
		return reply
	}
	return answerSlow(req, local, src, out, immediate{s.h})
}

// fast is answerFast with a panic turned into fastNo.
func (s *udpServer) fast(req, out []byte, src netip.Addr, sc *scratch) (reply []byte, res fastResult) {
	defer func() {
		if recover() != nil {
			reply, res = out, fastNo
		}
	}()
	return s.h.answerFast(req, out, src, sc)
}

// answerOffReader answers a query that may wait in a goroutine of its own
// (with a copy of req) and sends the reply alone; false, and nothing
// done, when every waiting slot is taken.
func (s *udpServer) answerOffReader(conn *net.UDPConn, req []byte, src netip.AddrPort) bool {
	select {
	case s.waitSlots <- struct{}{}:
	default:
		if s.onFull != nil {
			s.onFull()
		}
		return false
	}
	req = bytes.Clone(req)
	s.waiting.Add(1)
	go func() {
		defer func() {
			<-s.waitSlots
			s.waiting.Done()
		}()
		if reply := answerSlow(req, conn.LocalAddr(), src, make([]byte, 0, 512), s.h); reply != nil {
			_, _ = conn.WriteToUDPAddrPort(reply, src)
		}
	}()
	return true
}

// close closes every socket: the readers return.
func (s *udpServer) close() {
	for _, c := range s.conns {
		c.Close()
	}
}

// shutdown stops reading, waits up to ctx for the readers to send what
// they hold and for the queries answered off them, and closes the sockets.
func (s *udpServer) shutdown(ctx context.Context) error {
	s.stopping.Store(true)
	for _, c := range s.conns {
		_ = c.SetReadDeadline(time.Now())
	}
	done := make(chan struct{})
	go func() {
		s.readers.Wait()
		s.waiting.Wait()
		close(done)
	}()
	defer s.close()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
