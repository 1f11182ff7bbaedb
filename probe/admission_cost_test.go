package probe

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// One admission attempt against a real server under trust (a whole
// session, the dearest case for pgdns): its time and allocations.
func BenchmarkAdmissionAttempt(b *testing.B) {
	cl := pgtest.New(b, pgtest.Options{IPs: pgtest.Addrs(b).IPs(1)})
	c := pgCheckerOf(b, "user=postgres dbname=postgres sslmode=disable", cl.Nodes[0].Addr())
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	before := processCPU()
	for b.Loop() {
		if err := tryAdmission(ctx, c.config()); err != nil {
			b.Fatal(err)
		}
	}
	// The wall time is mostly the server's (a backend started); pgdns's
	// own CPU is the test process's (the servers are other processes).
	b.ReportMetric(float64(processCPU()-before)/float64(b.N), "cpu-ns/op")
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// A server that accepts the connection and never answers: the attempt
// ends at its deadline, and that proves nothing (not definitive) but is
// no answer (noAnswer), which reachTimedOut counts; so is the bare
// connect's (tryConnect), whose connect alone used to be enough.
func TestAdmissionOfASilentServer(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", pgtest.Addrs(t).IPs(1)[0]+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
		}
	}()
	c := pgCheckerOf(t, "user=postgres dbname=postgres sslmode=disable", ln.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = tryAdmission(ctx, c.config())
	if err == nil || definitive(err) {
		t.Fatalf("admission of a silent server: %v, want a failure that is not definitive", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("admission of a silent server took %v, its deadline was 300ms", d)
	}
	var silent noAnswer
	if !errors.As(err, &silent) {
		t.Fatalf("admission of a silent server: %v, want no answer", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := tryConnect(ctx, c.config()); !errors.As(err, &silent) || definitive(err) {
		t.Fatalf("a bare connect to a silent server: %v, want no answer, not definitive", err)
	}
}

// Under sslmode=require the attempt asks for TLS as pgx does and sends
// its startup packet inside it: a server whose pg_hba.conf rejects the
// role over plaintext admits the attempt, and a plaintext attempt of the
// same role (sslmode=disable, whose session would be refused too) is a
// refusal (review 8, R8-2). Under sslmode=prefer a role that pg_hba.conf
// rejects over TLS only is admitted, as a client's connect is, by
// plaintext after the TLS refusal.
// One attempt in plaintext allocates a bounded, small amount (it was 160
// allocations through pgx.ConnectConfig).
func TestAdmissionOverTLSAndItsAllocations(t *testing.T) { // not parallel: AllocsPerRun
	bl := pgtest.Addrs(t)
	cl := pgtest.NewTLS(t, pgtest.NewCA(t), pgtest.Options{IPs: []string{bl.IP(1)},
		Conf: []string{"log_connections = on"},
		HBA:  []string{"hostnossl all guarded 127.0.0.0/8 reject", "hostssl all plain 127.0.0.0/8 reject"},
	}, bl.IP(1))
	node := cl.Nodes[0]
	node.Exec(t, "CREATE ROLE guarded LOGIN")
	node.Exec(t, "CREATE ROLE plain LOGIN")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tlsChecker := pgCheckerOf(t, "user=guarded dbname=postgres sslmode=require", node.Addr())
	if err := tryAdmission(ctx, tlsChecker.config()); err != nil {
		t.Fatalf("admission under sslmode=require: %v", err)
	}
	if !strings.Contains(node.Log(), "user=guarded database=postgres application_name=pgdns SSL enabled") {
		t.Fatalf("the server did not log an authorized TLS session of guarded:\n%s", node.Log())
	}
	plain := pgCheckerOf(t, "user=guarded dbname=postgres sslmode=disable", node.Addr())
	var pgErr *pgconn.PgError
	if err := tryAdmission(ctx, plain.config()); !errors.As(err, &pgErr) || pgErr.Code != "28000" || !errors.Is(err, ErrNotServing) {
		t.Fatalf("admission in plaintext where pg_hba.conf rejects it: %v, want 28000, a refusal", err)
	}
	prefer := pgCheckerOf(t, "user=plain dbname=postgres sslmode=prefer", node.Addr())
	if err := tryAdmission(ctx, prefer.config()); err != nil {
		t.Fatalf("admission under sslmode=prefer where pg_hba.conf rejects TLS only: %v, want admitted in plaintext", err)
	}
	tlsOnly := pgCheckerOf(t, "user=plain dbname=postgres sslmode=require", node.Addr())
	if err := tryAdmission(ctx, tlsOnly.config()); !errors.As(err, &pgErr) || pgErr.Code != "28000" || !errors.Is(err, ErrNotServing) {
		t.Fatalf("admission under sslmode=require where pg_hba.conf rejects TLS: %v, want 28000, a refusal", err)
	}

	// The bare connect to a server with ssl on is answered 'S' and ends
	// after a TLS handshake, under either sslmode, with nothing in the
	// server's log but the connections received.
	logged := len(node.Log())
	for _, c := range []*pgChecker{tlsChecker, plain} {
		if err := tryConnect(ctx, c.config()); err != nil {
			t.Fatalf("a bare connect to a server with ssl on: %v", err)
		}
	}
	complaint := func() bool {
		log := node.Log()[logged:]
		for _, s := range []string{"could not accept SSL connection", "incomplete startup packet", "could not receive data", "SSL error", "unexpected EOF"} {
			if strings.Contains(log, s) {
				t.Logf("the server's log after the bare connects:\n%s", log)
				return true
			}
		}
		return false
	}
	if _, held := testkit.Holds(time.Second, 50*time.Millisecond, func() bool { return !complaint() }); !held {
		t.Fatal("a bare connect to a server with ssl on made it complain")
	}

	trusted := pgCheckerOf(t, "user=postgres dbname=postgres sslmode=disable", node.Addr())
	allocs := testkit.FewestAllocs(20, 40, func() {
		if err := tryAdmission(ctx, trusted.config()); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 40 {
		t.Fatalf("one admission attempt allocates %.0f times, want at most 40", allocs)
	}
}

// A server with no free connection slot refuses a new session with 53300
// (too many clients): load, not a shutdown, so not definitive.
func TestAdmissionOfAFullServer(t *testing.T) {
	t.Parallel()
	cl := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(1),
		Conf: []string{"max_connections = 2", "superuser_reserved_connections = 0"}})
	node := cl.Nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	held := pgCheckerOf(t, "user=postgres dbname=postgres sslmode=disable", node.Addr())
	other := pgCheckerOf(t, "user=postgres dbname=postgres sslmode=disable application_name=other", node.Addr())
	for _, c := range []*pgChecker{held, other} {
		if _, err := c.Check(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var pgErr *pgconn.PgError
	if err := tryAdmission(ctx, held.config()); !errors.As(err, &pgErr) || pgErr.Code != "53300" || definitive(err) {
		t.Fatalf("admission of a full server: %v, want 53300, not definitive", err)
	}
	// Its backends still answer an SSLRequest: the bare connect is admitted.
	if err := tryConnect(ctx, held.config()); err != nil {
		t.Fatalf("a bare connect to a full server: %v, want it answered", err)
	}
}
