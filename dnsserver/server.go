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
	udp, tcp *dns.Server
	addr     string
	errc     chan error
}

// Limits bound what clients can make the server hold.
type Limits struct {
	MaxTCPConns int           // concurrent TCP connections; default 512
	TCPIdle     time.Duration // an idle TCP connection is closed after this; default 8s
}

// Start binds UDP and TCP on addr and serves h on both; it returns once
// both are answering. With port 0, both get the same port. Errors such as
// "address already in use" come back here.
func Start(addr string, h dns.Handler, limits Limits) (*Server, error) {
	if limits.MaxTCPConns <= 0 {
		limits.MaxTCPConns = 512
	}
	if limits.TCPIdle <= 0 {
		limits.TCPIdle = 8 * time.Second
	}
	s, err := bind(addr, h, limits)
	if err != nil {
		return nil, err
	}
	started := make(chan struct{}, 2)
	notify := func() { started <- struct{}{} }
	s.udp.NotifyStartedFunc, s.tcp.NotifyStartedFunc = notify, notify
	go func() { s.errc <- s.udp.ActivateAndServe() }()
	go func() { s.errc <- s.tcp.ActivateAndServe() }()
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

func bind(addr string, h dns.Handler, limits Limits) (*Server, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 10 { // with port 0, TCP may find the UDP port taken: try another
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return nil, err
		}
		bound := net.JoinHostPort(host, strconv.Itoa(pc.LocalAddr().(*net.UDPAddr).Port))
		ln, err := net.Listen("tcp", bound)
		if err != nil {
			pc.Close()
			lastErr = err
			if port == "0" {
				continue
			}
			return nil, err
		}
		return &Server{
			addr: bound,
			errc: make(chan error, 2),
			udp:  &dns.Server{PacketConn: pc, Handler: h},
			tcp: &dns.Server{
				Listener: newLimitListener(ln, limits.MaxTCPConns), Handler: h,
				// A new connection must send its first query within the
				// read timeout; later ones within the idle timeout.
				ReadTimeout:   2 * time.Second,
				WriteTimeout:  2 * time.Second,
				IdleTimeout:   func() time.Duration { return limits.TCPIdle },
				MaxTCPQueries: 1000,
			},
		}, nil
	}
	return nil, fmt.Errorf("no port free for both UDP and TCP: %w", lastErr)
}

func (s *Server) close() {
	s.udp.PacketConn.Close()
	s.tcp.Listener.Close()
}

// Addr is the bound address, host:port.
func (s *Server) Addr() string { return s.addr }

// Err delivers an error if either transport stops serving on its own.
func (s *Server) Err() <-chan error { return s.errc }

// Shutdown stops accepting queries and waits, up to ctx, for those in
// flight to be answered.
func (s *Server) Shutdown(ctx context.Context) error {
	return errors.Join(s.udp.ShutdownContext(ctx), s.tcp.ShutdownContext(ctx))
}
