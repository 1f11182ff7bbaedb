package main

import (
	"flag"
	"net"
	"os"
	"os/signal"
)

// runEcho is the ceiling pgdns is compared with: a plain UDP echo that
// reads a datagram, sets the QR bit and writes it back, one read and one
// write system call per datagram in one goroutine, no DNS work at all.
// dnsperf counts the echoed query as its answer (same ID, same
// question), so it measures what the socket and the load generator allow
// on this machine.
func runEcho(args []string) {
	fs := flag.NewFlagSet("echo", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:5353", "address")
	_ = fs.Parse(args)
	conn, err := net.ListenPacket("udp", *listen)
	if err != nil {
		os.Exit(1)
	}
	go func() {
		c := make(chan os.Signal, 1)
		signal.Notify(c, os.Interrupt)
		<-c
		_ = conn.Close()
	}()
	udp := conn.(*net.UDPConn)
	buf := make([]byte, 4096)
	for {
		n, from, err := udp.ReadFromUDPAddrPort(buf)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			return // closed
		}
		if n < 12 {
			continue
		}
		buf[2] |= 0x80 // QR: a response
		_, _ = udp.WriteToUDPAddrPort(buf[:n], from)
	}
}
