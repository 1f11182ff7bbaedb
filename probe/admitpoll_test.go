//go:build linux

package probe

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// rawAdmission makes c's admission attempt on the shared poller
// (admitpoll.go), bounded by bound, and returns its end.
func rawAdmission(t *testing.T, c *pgChecker, bound time.Duration) error {
	t.Helper()
	done, stop := startRawAdmission(c.config(), bound)
	if done == nil {
		t.Fatal("the attempt was not made on the shared poller")
	}
	defer stop()
	select {
	case err := <-done:
		return err
	case <-time.After(bound + 30*time.Second):
		t.Fatal("the attempt on the poller did not end")
		return nil
	}
}

// The attempt on the poller is tryAdmission's: under password
// authentication it stops at the request for it (one connection each, no
// password sent, nothing logged), under trust it is a whole session
// ended by a Terminate (nothing logged but the session); a server full is
// 53300, not definitive; a closed port is definitive; a server stopping
// smartly refuses it with 57P03, definitive, and a checker's own probes
// then make their attempts on the poller (rawAdmissions) and say so.
func TestRawAdmissionIsTryAdmissions(t *testing.T) {
	t.Parallel()
	cl := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(1), Conf: []string{"log_connections = on", "log_disconnections = on"},
		HBA: []string{"host all guarded 127.0.0.0/8 scram-sha-256"}})
	node := cl.Nodes[0]
	node.Exec(t, "CREATE ROLE guarded LOGIN PASSWORD 'the-right-one'")
	wrong := pgCheckerOf(t, "user=guarded password=a-wrong-one dbname=postgres sslmode=disable", node.Addr())
	connections := func() int { return strings.Count(node.Log(), "connection received") }
	before := connections()
	for range 3 {
		if err := rawAdmission(t, wrong, 10*time.Second); err != nil {
			t.Fatalf("admission under scram-sha-256: %v", err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if n := connections() - before; n != 3 {
		t.Fatalf("3 admission attempts opened %d connections", n)
	}
	trusted := pgCheckerOf(t, "user=postgres dbname=postgres sslmode=disable", node.Addr())
	for range 3 {
		if err := rawAdmission(t, trusted, 10*time.Second); err != nil {
			t.Fatalf("admission under trust: %v", err)
		}
	}
	testkit.Eventually(t, 10*time.Second, 20*time.Millisecond, "the trusted sessions' ends logged", func() (int, bool) {
		n := strings.Count(node.Log(), "disconnection: session time")
		return n, n >= 3
	})
	if log := node.Log(); strings.Contains(log, "user=guarded database") || strings.Contains(log, "authentication failed") ||
		strings.Contains(log, "could not") || strings.Contains(log, "unexpected EOF") || strings.Contains(log, "incomplete startup packet") {
		t.Fatalf("the server logged the admission attempts:\n%s", log)
	}

	// A port nothing listens on: refused, definitive, as dialed.
	ln, err := net.Listen("tcp", node.IP+":0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	if err := rawAdmission(t, pgCheckerOf(t, "user=postgres dbname=postgres sslmode=disable", closed), 10*time.Second); !definitive(err) {
		t.Fatalf("admission to a closed port: %v, want definitive", err)
	}

	// A role that may not read the postmaster's status asks with a new
	// session (the superuser's probe would read "stopping" itself).
	node.Exec(t, "CREATE ROLE watcher LOGIN")
	watcher := pgCheckerOf(t, "user=watcher dbname=postgres sslmode=disable", node.Addr())
	if _, err := watcher.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	made := rawAdmissions.Load()
	stopped := make(chan error, 1)
	go func() { stopped <- node.Stop(context.Background(), "smart") }()
	done := make(chan error, 1)
	go func() {
		for range 100 {
			if _, err := watcher.Check(context.Background()); err != nil {
				done <- err
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		done <- errors.New("100 probes succeeded")
	}()
	wantNotServing(t, done, 30*time.Second, "a probe of a server stopping smartly failed with %v, want a definitive failure", "no probe failed")
	if rawAdmissions.Load() == made {
		t.Fatal("the checker's attempts were not made on the shared poller")
	}
	if err := <-stopped; err != nil {
		t.Fatalf("smart stop: %v", err)
	}
}

// A full server's 53300 is not definitive, on the poller as dialed.
func TestRawAdmissionOfAFullServer(t *testing.T) {
	t.Parallel()
	cl := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(1),
		Conf: []string{"max_connections = 2", "superuser_reserved_connections = 0"}})
	node := cl.Nodes[0]
	held := pgCheckerOf(t, "user=postgres dbname=postgres sslmode=disable", node.Addr())
	other := pgCheckerOf(t, "user=postgres dbname=postgres sslmode=disable application_name=other", node.Addr())
	for _, c := range []*pgChecker{held, other} {
		if _, err := c.Check(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	var pgErr *pgconn.PgError
	if err := rawAdmission(t, held, 10*time.Second); !errors.As(err, &pgErr) || pgErr.Code != "53300" || definitive(err) {
		t.Fatalf("admission of a full server: %v, want 53300, not definitive", err)
	}
}

// A refusal by pg_hba.conf (a "reject" line for every client of the
// probe's role) is the server not serving, on the poller as dialed
// (tryAdmission's notServing): a host fenced by its hba file leaves the
// answers at the attempt, not only at the next trial a minute later.
// A wrong password stays not definitive either way.
func TestRawAdmissionOfAnHBARefusal(t *testing.T) {
	t.Parallel()
	cl := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(1),
		HBA: []string{"host all fenced 127.0.0.0/8 reject"}})
	node := cl.Nodes[0]
	node.Exec(t, "CREATE ROLE fenced LOGIN")
	fenced := pgCheckerOf(t, "user=fenced dbname=postgres sslmode=disable", node.Addr())
	dialed := tryAdmission(context.Background(), fenced.config())
	if !errors.Is(dialed, ErrNotServing) {
		t.Fatalf("the dialed attempt refused by pg_hba.conf: %v, want not serving", dialed)
	}
	raw := rawAdmission(t, fenced, 10*time.Second)
	if !errors.Is(raw, ErrNotServing) || !hbaRefusal(raw) {
		t.Fatalf("the attempt on the poller refused by pg_hba.conf: %v, want not serving as dialed (%v)", raw, dialed)
	}
}

// A server that accepts and never answers: no answer (noAnswer), not
// definitive, at the attempt's bound; one that answers a postmaster's
// fork failure is definitive; an attempt stopped ends at once. Over TLS
// the attempt is dialed (startRawAdmission gives none).
func TestRawAdmissionOfFakeServers(t *testing.T) {
	t.Parallel()
	ip := pgtest.Addrs(t).IPs(1)[0]
	serve := func(answer func(net.Conn)) string {
		ln, err := net.Listen("tcp", ip+":0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer conn.Close()
					answer(conn)
				}()
			}
		}()
		return ln.Addr().String()
	}
	silent := serve(func(conn net.Conn) { _, _ = io.Copy(io.Discard, conn) })
	start := time.Now()
	err := rawAdmission(t, pgCheckerOf(t, "user=postgres dbname=postgres sslmode=disable", silent), 300*time.Millisecond)
	var quiet noAnswer
	if !errors.As(err, &quiet) || definitive(err) {
		t.Fatalf("admission of a silent server: %v, want no answer, not definitive", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 20*time.Second {
		t.Fatalf("admission of a silent server ended after %v, its bound was 300ms", d)
	}
	forking := serve(func(conn net.Conn) {
		var b [8]byte
		_, _ = io.ReadFull(conn, b[:])
		_, _ = conn.Write([]byte("Ecould not fork new process for connection: Resource temporarily unavailable\n\x00"))
	})
	err = rawAdmission(t, pgCheckerOf(t, "user=postgres dbname=postgres sslmode=disable", forking), 10*time.Second)
	if !errors.Is(err, ErrNotServing) || !strings.Contains(err.Error(), "could not fork new process") {
		t.Fatalf("admission of a postmaster that cannot fork: %v, want its refusal", err)
	}
	c := pgCheckerOf(t, "user=postgres dbname=postgres sslmode=disable", silent)
	done, stop := startRawAdmission(c.config(), time.Minute)
	stop()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a stopped attempt did not end")
	}
	for _, dsn := range []string{"sslmode=require", "sslmode=prefer", "sslmode=allow"} {
		c := pgCheckerOf(t, "user=postgres dbname=postgres "+dsn, silent)
		if done, _ := startRawAdmission(c.config(), time.Second); done != nil {
			t.Fatalf("%s: an attempt that may ask for TLS made on the poller", dsn)
		}
	}
}

// Admission attempts against a real server under trust, 16 at a time (as
// a busy pgdns has several under way), made as the checker makes them:
// dialed on a goroutine of its own each (startAdmission, as before
// admitpoll.go) or on the shared poller; pgdns's own CPU is the test
// process's, per attempt.
func BenchmarkAdmissionOnThePoller(b *testing.B) {
	cl := pgtest.New(b, pgtest.Options{IPs: pgtest.Addrs(b).IPs(1)})
	c := pgCheckerOf(b, "user=postgres dbname=postgres sslmode=disable", cl.Nodes[0].Addr())
	cfg := c.config()
	const at = 16
	for _, way := range []string{"dialed", "poller"} {
		b.Run(way, func(b *testing.B) {
			b.ReportAllocs()
			before := processCPU()
			var ends [at]chan error
			for b.Loop() {
				for i := range ends {
					if way == "poller" {
						if ends[i], _ = startRawAdmission(cfg, 5*time.Second); ends[i] == nil {
							b.Fatal("not on the poller")
						}
						continue
					}
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					done := make(chan error, 1)
					go func() {
						defer cancel()
						done <- tryAdmission(ctx, cfg)
					}()
					ends[i] = done
				}
				for _, end := range ends {
					if err := <-end; err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(processCPU()-before)/float64(b.N*at), "cpu-ns/attempt")
		})
	}
}
