//go:build linux

package probe

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// pollRaw polls r until it has ended or hands its rest over (within a few
// seconds), as the probes after its start do.
func pollRaw(t *testing.T, r *rawConnect) error {
	t.Helper()
	var err error
	testkit.Eventually(t, 5*time.Second, 10*time.Millisecond, "the bare connect to end", func() (error, bool) {
		done, perr := r.poll()
		err = perr
		return perr, done || r.conn != nil
	})
	return err
}

// answering listens on ip and answers each connection's SSLRequest with
// answer (nothing when empty), then reads what comes to its end and
// sends what it read on the channel (io.EOF: a plain end, nothing sent).
func answering(t *testing.T, ip string, answer string) (port int, ends <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan error, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				var req [8]byte
				if _, err := io.ReadFull(c, req[:]); err != nil || string(req[:]) != string(sslRequest) {
					ch <- errors.New("no SSLRequest")
					return
				}
				if answer == "" {
					_, err := c.Read(make([]byte, 1))
					ch <- err
					return
				}
				if _, err := c.Write([]byte(answer)); err != nil {
					ch <- err
					return
				}
				if answer[0] == 'E' {
					ch <- io.EOF
					return // the postmaster closes after its text
				}
				n, err := c.Read(make([]byte, 16))
				if n > 0 {
					err = errors.New("the client sent more")
				}
				ch <- err
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, ch
}

// A bare connect on a socket of the checker's own (reach.go) judges as
// tryConnect does: an 'N' to its SSLRequest is an answer (and the
// connection is then closed with a FIN, nothing else sent), refused is
// definitive (worded as net.Dial words it), a connect or an answer still
// awaited past the bound is noAnswer, an 'S' or an 'E' hands the rest of
// the conversation over; a host name is left to the dialer.
func TestRawConnect(t *testing.T) {
	bl := pgtest.Addrs(t)

	t.Run("answered", func(t *testing.T) {
		port, ends := answering(t, bl.IP(1), "N")
		r := startRawConnect(bl.IP(1), uint16(port), 2*time.Second)
		if r == nil {
			t.Fatal("no bare connect to an IP address")
		}
		if err := pollRaw(t, r); err != nil {
			t.Fatalf("a connect to a server answering N: %v", err)
		}
		if r.fd != -1 {
			t.Fatal("the socket is open after the attempt ended")
		}
		if err := <-ends; err != io.EOF {
			t.Fatalf("the server's end of the connection: %v, want a plain end (FIN), nothing more sent", err)
		}
	})

	t.Run("refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", bl.IP(2)+":0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close() // nothing listens there now
		err = pollRaw(t, startRawConnect(bl.IP(2), uint16(port), time.Second))
		if !errors.Is(err, syscall.ECONNREFUSED) || !definitive(err) {
			t.Fatalf("a connect to a closed port: %v, want a definitive connection refused", err)
		}
		if want := "dial tcp " + bl.IP(2) + ":" + strconv.Itoa(port) + ": connect: connection refused"; err.Error() != want {
			t.Fatalf("worded %q, want %q (as net.Dial words it)", err, want)
		}
	})

	t.Run("no connect", func(t *testing.T) {
		// A listener whose accept queue is full drops every SYN: a
		// connect to it stays under way, as through a filter's DROP.
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		ip := net.ParseIP(bl.IP(3)).To4()
		if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte(ip)}); err != nil {
			t.Fatal(err)
		}
		if err := unix.Listen(fd, 0); err != nil {
			t.Fatal(err)
		}
		sa, err := unix.Getsockname(fd)
		if err != nil {
			t.Fatal(err)
		}
		port := sa.(*unix.SockaddrInet4).Port
		first, err := net.Dial("tcp", bl.IP(3)+":"+strconv.Itoa(port)) // fills the queue of one
		if err != nil {
			t.Fatal(err)
		}
		defer first.Close()
		start := time.Now()
		r := startRawConnect(bl.IP(3), uint16(port), 300*time.Millisecond)
		if done, _ := r.poll(); done || r.asked {
			t.Fatal("the connect to a full listener was made: the test's premise (a dropped SYN) does not hold")
		}
		err = pollRaw(t, r)
		var silent noAnswer
		if !errors.As(err, &silent) || !errors.Is(err, os.ErrDeadlineExceeded) || definitive(err) {
			t.Fatalf("a connect whose SYN is dropped: %v, want no answer (a timeout)", err)
		}
		if took := time.Since(start); took < 300*time.Millisecond {
			t.Fatalf("timed out after %v, before its bound of 300ms", took)
		}
		if !strings.Contains(err.Error(), "i/o timeout") {
			t.Fatalf("worded %q, want net's i/o timeout", err)
		}
	})

	t.Run("no answer", func(t *testing.T) {
		port, _ := answering(t, bl.IP(4), "") // made, read, never answered
		r := startRawConnect(bl.IP(4), uint16(port), 300*time.Millisecond)
		err := pollRaw(t, r)
		var silent noAnswer
		if !r.asked || !errors.As(err, &silent) || definitive(err) {
			t.Fatalf("a connect made and never answered: asked %v, %v; want no answer", r.asked, err)
		}
	})

	t.Run("answers handed over", func(t *testing.T) {
		for _, c := range []struct {
			answer string
			want   func(error) bool
		}{
			{"S", func(err error) bool { return err == nil }}, // a TLS handshake the fake fails: it answered
			{"Ecould not fork new process for connection: Resource temporarily unavailable\n\x00", func(err error) bool {
				return errors.Is(err, ErrNotServing) && strings.Contains(err.Error(), "could not fork")
			}},
		} {
			port, _ := answering(t, bl.IP(5), c.answer)
			r := startRawConnect(bl.IP(5), uint16(port), 2*time.Second)
			if err := pollRaw(t, r); err != nil {
				t.Fatalf("%.1q: %v", c.answer, err)
			}
			try, by := r.handOver()
			if try == nil || r.fd != -1 {
				t.Fatalf("%.1q: not handed over (socket %d)", c.answer, r.fd)
			}
			ctx, cancel := context.WithDeadline(context.Background(), by)
			err := try(ctx, &connConfig{})
			cancel()
			if !c.want(err) {
				t.Fatalf("%.1q handed over: %v", c.answer, err)
			}
		}
	})

	t.Run("a host name is dialed", func(t *testing.T) {
		if r := startRawConnect("localhost", uint16(5432), time.Second); r != nil {
			r.close()
			t.Fatal("a bare connect of its own to a host name: its address is the resolver's")
		}
	})
}

// A bare connect starts before its probe's query, which finds it made
// and its SSLRequest sent (the handshake's round trip runs beside the
// probe's), and the probes after it read the answer of the backend the
// server forked: no goroutine, no dialed connection (admitting) for it.
func TestBareConnectMovedByItsProbes(t *testing.T) {
	_, c, ctx := probedNode(t, 60*time.Second)
	pc := c.(*pgChecker)
	for range 2 { // the first probe learns the grant, the next reads the status
		if _, err := c.Check(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !pc.readsStatus || !pc.ready {
		t.Fatalf("a superuser's probe: reads the status %v, ready %v; want both", pc.readsStatus, pc.ready)
	}
	// The answer comes once the server has forked a backend, which under
	// load takes its time: the probes go on until it does, within a
	// bound only a hang reaches.
	settle := func(i int) {
		for began := time.Now(); pc.reachRaw != nil || pc.admitting != nil; {
			if time.Since(began) > 20*time.Second {
				t.Fatalf("attempt %d: no answer in 20 s of probes", i)
			}
			time.Sleep(10 * time.Millisecond)
			if _, err := c.Check(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	settle(-1) // the reach of the probe after the first "ready"
	for i := range 3 {
		pc.reachedAt, pc.reaches = time.Time{}, 0 // due, and not the reach that sends a startup packet
		before := time.Now()
		if _, err := c.Check(ctx); err != nil {
			t.Fatal(err)
		}
		if pc.reachedAt.Before(before) {
			t.Fatalf("attempt %d: no bare connect although one was due", i)
		}
		if pc.admitting != nil || pc.reachRaw != nil && !pc.reachRaw.asked {
			t.Fatalf("attempt %d: after its probe the bare connect to a live server is not made, or dialed", i)
		}
		settle(i)
		if pc.reachTimeouts != 0 {
			t.Fatalf("attempt %d: counted as no answer", i)
		}
	}
}

// One bare connect to a real server, as tryConnect dials it (a goroutine
// of its own, pgx's dialer), on a socket of the checker's own with an
// SSLRequest, and as a cancel of the checker's own session (reachcancel.go),
// moved along at "probes" 10 ms apart (one poll each, as a host's probes
// do, and the cancel sent at a probe's end), against a server with ssl off
// and one with ssl on (whose 'S' makes the SSLRequest's a TLS handshake,
// run here on the benchmark's goroutine where the checker starts one):
// pgdns's CPU a connect (the process's, the loopback's TCP work included;
// the server is another process), the wake-ups of the pacing itself
// measured first and taken off.
func BenchmarkBareConnect(b *testing.B) {
	bl := pgtest.Addrs(b)
	servers := []struct {
		name string
		cl   *pgtest.Cluster
	}{
		{"ssl off", pgtest.New(b, pgtest.Options{IPs: []string{bl.IP(1)}})},
		{"ssl on", pgtest.NewTLS(b, pgtest.NewCA(b), pgtest.Options{IPs: []string{bl.IP(2)}}, bl.IP(2))},
	}
	const pace = 10 * time.Millisecond // back to back, connects outrun the postmaster's forks and SYNs drop
	pacing := func() time.Duration {
		before := processCPU()
		for range 50 {
			time.Sleep(pace)
		}
		return (processCPU() - before) / 50
	}
	run := func(b *testing.B, node *pgtest.Node, probe func() (ended bool, err error)) {
		b.ReportAllocs()
		idle := pacing()
		// thread: the CPU of the probes' own turns alone, on their thread
		// (the connect's system calls, a handshake run here), no pacing
		// to take off: the figure that holds under load; "dialed" runs
		// its attempt on another goroutine, which it does not see.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		before, server, connects := processCPU(), reapedCPU(b, node), 0
		var thread time.Duration
		for b.Loop() {
			time.Sleep(pace) // to the next probe
			t0 := threadCPU()
			ended, err := probe()
			thread += threadCPU() - t0
			if err != nil {
				b.Fatal(err)
			}
			if ended {
				connects++
			}
		}
		spent := processCPU() - before - time.Duration(b.N)*idle
		b.ReportMetric(float64(spent)/float64(max(connects, 1)), "cpu-ns/connect")
		b.ReportMetric(float64(thread)/float64(max(connects, 1)), "turn-cpu-ns/connect")
		b.ReportMetric(float64(reapedCPU(b, node)-server)/float64(max(connects, 1)), "server-cpu-ns/connect")
	}
	// moved is one probe's turn of a bare connect on a socket of our
	// own: poll (the probe's start), the rest of an 'S' or an 'E' run at
	// once, and a cancel's request sent (the probe's end).
	moved := func(c *pgChecker, r **rawConnect, start func() *rawConnect) (bool, error) {
		if *r == nil {
			*r = start()
		}
		done, err := (*r).poll()
		if try, by := (*r).handOver(); !done && try != nil {
			ctx, cancel := context.WithDeadline(context.Background(), by)
			err = try(ctx, c.config())
			cancel()
			done = true
		}
		if !done {
			(*r).send()
			return false, nil
		}
		*r = nil
		return true, err
	}
	for _, srv := range servers {
		c := pgCheckerOf(b, "user=postgres dbname=postgres sslmode=disable", srv.cl.Nodes[0].Addr())
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if _, err := c.Check(ctx); err != nil { // a session, whose key the cancel carries
			b.Fatal(err)
		}
		cancel()
		node := srv.cl.Nodes[0]
		b.Run(srv.name+"/dialed", func(b *testing.B) {
			run(b, node, func() (bool, error) {
				c.startAdmission(time.Now().Add(time.Second), tryConnect)
				err := <-c.admitting
				c.admitting, c.admitStop = nil, nil
				return true, err
			})
		})
		b.Run(srv.name+"/own socket", func(b *testing.B) {
			var r *rawConnect
			run(b, node, func() (bool, error) {
				return moved(c, &r, func() *rawConnect { return startRawConnect(c.host, c.port, time.Second) })
			})
		})
		b.Run(srv.name+"/cancel", func(b *testing.B) {
			var r *rawConnect
			run(b, node, func() (bool, error) {
				return moved(c, &r, func() *rawConnect {
					return startRawCancel(c.host, c.port, time.Second, c.sess.pid, c.sess.key)
				})
			})
		})
	}
}

// reapedCPU is the CPU of the server's processes that have exited and
// been reaped by its postmaster (its backends: cutime and cstime of
// /proc/<postmaster>/stat), in clock ticks of 10 ms.
func reapedCPU(b *testing.B, node *pgtest.Node) time.Duration {
	pid, err := node.PostmasterPID()
	if err != nil {
		b.Fatal(err)
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(stat), ") ")
	f := strings.Fields(rest) // from the state, field 3
	if len(f) < 15 {
		b.Fatalf("short /proc stat: %q", stat)
	}
	cu, _ := strconv.ParseInt(f[13], 10, 64) // field 16
	cs, _ := strconv.ParseInt(f[14], 10, 64) // field 17
	return time.Duration(cu+cs) * 10 * time.Millisecond
}

// threadCPU is the calling thread's CPU so far.
func threadCPU() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_THREAD, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
