package dnsserver

import (
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/miekg/dns"
)

// With port 0, Start finds a port free for both UDP and TCP however
// crowded the TCP ports are: on this machine, under the scale bench,
// 14,122 of the 28,232 ephemeral ports had a TCP socket (10,031
// listening, 99,917 in TIME-WAIT), and a loopback UDP port the kernel
// picked was taken for TCP about half the time; after ten tries Start
// gave up ("no port free for both UDP and TCP", 1 of 300 runs of
// TestRateLimit at load 20, any test of the package). Here every TCP
// bind to a given port fails as such a port does; a bind to port 0 is
// the kernel's, which picks a port free for TCP.
func TestStartWithPortZeroWhenTCPPortsAreCrowded(t *testing.T) {
	t.Cleanup(func() { listenTCP = net.Listen })
	listenTCP = func(network, addr string) (net.Listener, error) {
		if _, port, _ := net.SplitHostPort(addr); port != "0" {
			return nil, &net.OpError{Op: "listen", Net: network, Err: os.NewSyscallError("bind", syscall.EADDRINUSE)}
		}
		return net.Listen(network, addr)
	}
	for _, h := range []dns.Handler{newTestHandler(testSnapshot()), RateLimit(newTestHandler(testSnapshot()), 1000), dns.HandlerFunc(newTestHandler(testSnapshot()).ServeDNS)} {
		t.Run(fmt.Sprintf("%T", h), func(t *testing.T) {
			srv, err := Start("127.0.0.1:0", h, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Shutdown(t.Context())
			for _, network := range []string{"udp", "tcp"} {
				req := new(dns.Msg)
				req.SetQuestion("primary.db.local.", dns.TypeA)
				if m := exchange(t, network, srv.Addr(), req); m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 {
					t.Fatalf("%s at %s: %v", network, srv.Addr(), m)
				}
			}
		})
	}
}
