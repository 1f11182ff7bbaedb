package probe

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// slowSetupConn is a TCP connection whose large writes (the session
// setup's pipeline, prepare: the probe statements' text, over a KiB; a
// startup packet, a ping and a probe's request are far smaller) return
// late, as a write does on a loaded machine whose writer is descheduled
// after its system call. The bytes go out at once: only the return waits.
// It keeps *net.TCPConn's SyscallConn, so the session drives its
// descriptor as it drives a dialed socket's (sockread.go).
type slowSetupConn struct {
	*net.TCPConn
	slowed *atomic.Int32
}

func (c *slowSetupConn) Write(b []byte) (int, error) {
	n, err := c.TCPConn.Write(b)
	if len(b) >= 1024 {
		c.slowed.Add(1)
		time.Sleep(300 * time.Millisecond)
	}
	return n, err
}

// TestFirstProbeAfterASlowSetupWrite: a write of pgx's that takes more
// than 15 ms (its slowWriteTimer) starts pgconn's background reader, which
// reads the server's reply while the writer is still away and then starts
// another read; the writer stops it, but a stop waits for the read in
// progress. pgx's own reads take their results from that reader, so pgx
// never notices; the checker took the socket over (Hijack) with that read
// still waiting on it, and the session's first probe waited behind it (the
// descriptor's read lock) for a reply to a request it could not send
// until its deadline: the first probe of every new session that met a slow
// write failed, "probe query: timed out" (at load 30-50, twice in the probe
// tests, a probe with a minutes-long context). pgconn's SyncConn, which
// Hijack's documentation asks for, ends that read first.
func TestFirstProbeAfterASlowSetupWrite(t *testing.T) {
	t.Parallel()
	cl := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(1)})
	c := pgCheckerOf(t, "user=postgres dbname=postgres sslmode=disable", cl.Nodes[0].Addr())
	var slowed atomic.Int32
	c.configs.base.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &socket{Conn: &slowSetupConn{TCPConn: conn.(*net.TCPConn), slowed: &slowed}}, nil
	}
	for i := range 3 {
		// A first probe on a loaded machine can take seconds; one that
		// waits behind pgx's reader takes all of its context.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		start := time.Now()
		_, err := c.Check(ctx)
		cancel()
		if err != nil {
			t.Fatalf("session %d's first probe, after a setup write that returned late: %v (after %v)", i+1, err, time.Since(start).Round(time.Millisecond))
		}
		if c.sess == nil || c.sess.sock == nil || c.sess.raw == nil {
			t.Fatal("the session does not drive its socket's descriptor: the test does not test the checker's own reads")
		}
		c.Close()
	}
	if n := slowed.Load(); n < 3 {
		t.Fatalf("%d setup writes were slowed, want one a session: the test tested nothing", n)
	}
}
