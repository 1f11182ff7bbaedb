package dnsserver

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// An lsn- query that waits for a re-probe is answered off the reader: a
// query sent after it on the same socket (so read by the same reader) is
// answered while it still waits, and it is answered when the wait ends.
func TestUDPWaitingQueryBlocksNoOther(t *testing.T) {
	h := newTestHandler(testSnapshot())
	release := make(chan struct{})
	h.lsnWait = time.Minute // only the refresh ends this wait
	h.refresh = func(string) <-chan struct{} { return release }
	addr := startServer(t, h)

	conn, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	send := func(id uint16, name string) {
		req := new(dns.Msg)
		req.SetQuestion(name, dns.TypeA)
		req.Id = id
		b, _ := req.Pack()
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	read := func() *dns.Msg {
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		b := make([]byte, 1500)
		n, err := conn.Read(b)
		if err != nil {
			t.Fatalf("no reply: %v", err)
		}
		m := new(dns.Msg)
		if err := m.Unpack(b[:n]); err != nil {
			t.Fatal(err)
		}
		return m
	}
	send(1, "lsn-0-3000061.replica.db.local.") // no replica has it: waits
	send(2, "primary.db.local.")
	if m := read(); m.Id != 2 || len(m.Answer) != 1 {
		t.Fatalf("first reply: id %d with %d answers, want the primary query's while the lsn- one waits", m.Id, len(m.Answer))
	}
	close(release) // the re-probe rounds end, still no replica has it
	if m := read(); m.Id != 1 || m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 || len(m.Ns) != 1 {
		t.Fatalf("the waiting query: %v", m)
	}
}

// Another socket holding the port makes Start fail with "address already
// in use", whether it set SO_REUSEPORT (as pgdns's own readers do) or not:
// pgdns never shares its port with a second server without a word.
func TestStartReportsAddressInUseByAnotherSocket(t *testing.T) {
	for _, reuse := range []bool{false, true} {
		var lc net.ListenConfig
		if reuse {
			lc.Control = reusePort
		}
		other, err := lc.ListenPacket(context.Background(), "udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv, err := Start(other.LocalAddr().String(), newTestHandler(testSnapshot()), Limits{})
		if err == nil {
			_ = srv.Shutdown(t.Context())
			t.Errorf("SO_REUSEPORT %v: started on a port another socket holds", reuse)
		} else if !errors.Is(err, syscall.EADDRINUSE) {
			t.Errorf("SO_REUSEPORT %v: %v, want address already in use", reuse, err)
		}
		other.Close()
	}
}

// Shutdown waits for a query answered off a reader, and the server's
// readers and sockets are gone after it.
func TestUDPShutdownWaitsForWaitingQuery(t *testing.T) {
	h := newTestHandler(testSnapshot())
	h.lsnWait = 200 * time.Millisecond
	asked := make(chan struct{})
	var once sync.Once
	h.refresh = func(string) <-chan struct{} { // never done: the query waits out lsn_wait
		once.Do(func() { close(asked) })
		return make(chan struct{})
	}
	srv, err := Start("127.0.0.1:0", h, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("udp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := new(dns.Msg)
	req.SetQuestion("lsn-0-3000061.replica.db.local.", dns.TypeA)
	b, _ := req.Pack()
	if _, err := conn.Write(b); err != nil {
		t.Fatal(err)
	}
	select { // read, and waiting
	case <-asked:
	case <-time.After(30 * time.Second):
		t.Fatal("the lsn- query was never read")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(make([]byte, 512)); err != nil {
		t.Fatalf("the query waiting at shutdown was not answered: %v", err)
	}
	again, err := net.ListenPacket("udp", srv.Addr())
	if err != nil {
		t.Fatalf("the port is still held after Shutdown: %v", err)
	}
	again.Close()
}
