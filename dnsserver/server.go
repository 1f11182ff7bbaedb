package dnsserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/miekg/dns"
)

// Server serves one Handler on UDP and TCP at the same address.
type Server struct {
	udp  *dns.Server // miekg/dns's UDP server, for a handler that is not a *Handler
	fast *udpServer  // pgdns's own UDP server for a *Handler (possibly rate limited)
	tcp  *dns.Server
	tcpL *tcpListener
	addr string
	errc chan error
}

// Limits bound what clients can make the server hold; a field left zero
// (or negative) takes its default (DefaultMaxTCPConns...).
type Limits struct {
	MaxTCPConns int           // concurrent TCP connections; default 512
	TCPIdle     time.Duration // an idle TCP connection is closed after this; default 8s

	// MaxTCPConnsPerSource caps the connections of one source (an IPv4
	// address, an IPv6 /56); default 32. A new connection past either
	// cap evicts the connection idle longest (of that source, or of
	// all), and is refused only when none is idle.
	MaxTCPConnsPerSource int
	// MaxTCPConnAge closes a connection at its first idle moment after
	// it has been open this long; default 1m.
	MaxTCPConnAge time.Duration
	// MaxTCPQueries is how many queries one connection may send before
	// the server closes it (after the replies); default 1000.
	MaxTCPQueries int

	// MaxLSNWaits bounds the UDP lsn- lookups waiting for a re-probe at
	// once (each holds a goroutine for up to dns.lsn_wait); past it a
	// lookup is answered at once, as with lsn_wait 0, and OnLSNWaitFull
	// is called. Default 1024.
	MaxLSNWaits   int
	OnLSNWaitFull func()
}

// DefaultMaxLSNWaits is Limits.MaxLSNWaits when it is 0: at about 10 KiB
// each (a goroutine, the query, its reply), 1024 waiting lookups hold
// some 10 MiB, and at the default lsn_wait of 20ms they are 50,000
// waiting lookups a second.
const DefaultMaxLSNWaits = 1024

// withDefaults fills in what l leaves zero.
func (l Limits) withDefaults() Limits {
	if l.MaxTCPConns <= 0 {
		l.MaxTCPConns = DefaultMaxTCPConns
	}
	if l.TCPIdle <= 0 {
		l.TCPIdle = DefaultTCPIdle
	}
	if l.MaxTCPConnsPerSource <= 0 {
		l.MaxTCPConnsPerSource = DefaultMaxTCPConnsPerSource
	}
	if l.MaxTCPConnAge <= 0 {
		l.MaxTCPConnAge = DefaultMaxTCPConnAge
	}
	if l.MaxTCPQueries <= 0 {
		l.MaxTCPQueries = DefaultMaxTCPQueries
	}
	if l.MaxLSNWaits <= 0 {
		l.MaxLSNWaits = DefaultMaxLSNWaits
	}
	return l
}

// Start binds UDP and TCP on addr and serves h on both; it returns once
// both are answering. With port 0, both get the same port. Errors such as
// "address already in use" come back here. A *Handler, rate limited or
// not, is served over UDP by pgdns's own batched readers (udpServer);
// any other handler by miekg/dns's server. TCP is always miekg/dns's.
func Start(addr string, h dns.Handler, limits Limits) (*Server, error) {
	s, err := bind(addr, h, limits.withDefaults())
	if err != nil {
		return nil, err
	}
	started := make(chan struct{}, 2)
	notify := func() { started <- struct{}{} }
	s.tcp.NotifyStartedFunc = notify
	go func() { s.errc <- s.tcp.ActivateAndServe() }()
	if s.fast != nil {
		s.fast.serve(s.errc)
		started <- struct{}{} // the sockets are bound: queries queue until read
	} else {
		s.udp.NotifyStartedFunc = notify
		go func() { s.errc <- s.udp.ActivateAndServe() }()
	}
	for range 2 {
		select {
		case <-started:
		case err := <-s.errc:
			s.close()
			return nil, err
		}
	}
	return s, nil
}

// fastHandler returns the *Handler that h is, or wraps in a rate limiter.
func fastHandler(h dns.Handler) (*Handler, *RateLimiter) {
	switch v := h.(type) {
	case *Handler:
		return v, nil
	case *limitedHandler:
		if inner, ok := v.next.(*Handler); ok {
			return inner, v.limiter
		}
	}
	return nil, nil
}

// listenTCP is net.Listen; a test replaces it to crowd the TCP ports
// (TestStartWithPortZeroWhenTCPPortsAreCrowded).
var listenTCP = net.Listen

func bind(addr string, h dns.Handler, limits Limits) (*Server, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	fastH, limiter := fastHandler(h)
	var lastErr error
	// With port 0 the kernel picks TCP's port and UDP binds the same
	// one: TCP's ports are the crowded ones (listeners, connections,
	// TIME-WAIT: half of the ephemeral range on a busy host), UDP's are
	// nearly all free. Picked the other way round, the UDP port was
	// taken for TCP about half the time and ten tries could all fail.
	for range 10 { // with port 0, UDP may find the TCP port taken: try another
		ln, err := listenTCP("tcp", addr)
		if err != nil {
			return nil, err
		}
		bound := net.JoinHostPort(host, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
		var (
			pc    net.PacketConn
			conns []*net.UDPConn
		)
		if fastH != nil {
			conns, err = listenUDP(bound, udpReaders())
		} else {
			pc, err = net.ListenPacket("udp", bound)
		}
		if err != nil {
			ln.Close()
			lastErr = err
			if port == "0" {
				continue
			}
			return nil, err
		}
		tl := newTCPListener(ln, limits)
		s := &Server{
			addr: bound,
			errc: make(chan error, 2+len(conns)),
			tcpL: tl,
			tcp: &dns.Server{
				Listener: tl, Handler: h,
				// A new connection must send its first query within the
				// read timeout; later ones within the idle timeout.
				ReadTimeout:   2 * time.Second,
				WriteTimeout:  2 * time.Second,
				IdleTimeout:   func() time.Duration { return limits.TCPIdle },
				MaxTCPQueries: limits.MaxTCPQueries,
			},
		}
		if fastH != nil {
			s.fast = &udpServer{h: fastH, limiter: limiter, conns: conns,
				waitSlots: make(chan struct{}, limits.MaxLSNWaits), onFull: limits.OnLSNWaitFull}
		} else {
			s.udp = &dns.Server{PacketConn: pc, Handler: h}
		}
		return s, nil
	}
	return nil, fmt.Errorf("no port free for both UDP and TCP: %w", lastErr)
}

func (s *Server) close() {
	if s.fast != nil {
		s.fast.stopping.Store(true)
		s.fast.close()
	} else {
		s.udp.PacketConn.Close()
	}
	s.tcp.Listener.Close()
}

// Addr is the bound address, host:port.
func (s *Server) Addr() string { return s.addr }

// TCPStats counts the TCP connections held, served, evicted and refused.
func (s *Server) TCPStats() TCPStats { return s.tcpL.stats() }

// Err delivers an error if either transport stops serving on its own.
func (s *Server) Err() <-chan error { return s.errc }

// Shutdown stops accepting queries and waits, up to ctx, for those in
// flight to be answered.
func (s *Server) Shutdown(ctx context.Context) error {
	var udpErr error
	if s.fast != nil {
		udpErr = s.fast.shutdown(ctx)
	} else {
		udpErr = s.udp.ShutdownContext(ctx)
	}
	return errors.Join(udpErr, s.tcp.ShutdownContext(ctx))
}
