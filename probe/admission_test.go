package probe

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// An admission attempt stops at the server's first reply: under password
// authentication it sends no password (a wrong one, which a whole connect
// would fail on, is never tried, the server logs no failure, and no
// cancel request follows on another connection), under trust
// it is a whole session, ended cleanly. A server stopping smartly refuses
// it with 57P03, a definitive failure, while the checker's open session
// still works; once the checker has said so it holds no session, and the
// smart stop completes.
func TestAdmissionStopsAtTheFirstReply(t *testing.T) {
	t.Parallel()
	cl := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(1), Conf: []string{"log_connections = on"},
		HBA: []string{"host all guarded 127.0.0.0/8 scram-sha-256"}})
	node := cl.Nodes[0]
	node.Exec(t, "CREATE ROLE guarded LOGIN PASSWORD 'the-right-one'")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wrong := pgCheckerOf(t, "user=guarded password=a-wrong-one dbname=postgres sslmode=disable", node.Addr())
	connections := func() int { return strings.Count(node.Log(), "connection received") }
	before := connections()
	for range 3 {
		if err := tryAdmission(ctx, wrong.config()); err != nil {
			t.Fatalf("admission under scram-sha-256: %v", err)
		}
	}
	time.Sleep(100 * time.Millisecond) // a cancel request pgx might send comes after the attempt returns
	if n := connections() - before; n != 3 {
		t.Fatalf("3 admission attempts opened %d connections", n)
	}
	trusted := pgCheckerOf(t, "user=postgres dbname=postgres sslmode=disable", node.Addr())
	if err := tryAdmission(ctx, trusted.config()); err != nil {
		t.Fatalf("admission under trust: %v", err)
	}
	if log := node.Log(); strings.Contains(log, "user=guarded database") || strings.Contains(log, "authentication failed") || strings.Contains(log, "could not") || strings.Contains(log, "unexpected EOF") {
		t.Fatalf("the server logged the admission attempts:\n%s", log)
	}

	if _, err := trusted.Check(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- node.Stop(context.Background(), "smart") }()
	// Probes every 100ms, as the prober would: one of them asks.
	done := make(chan error, 1)
	go func() {
		for range 100 {
			if _, err := trusted.Check(ctx); err != nil {
				done <- err
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		done <- errors.New("100 probes succeeded")
	}()
	wantNotServing(t, done, 30*time.Second, "a probe of a server stopping smartly failed with %v, want a definitive failure", "no probe failed")
	if trusted.sess != nil {
		t.Fatal("the checker kept its session after the refusal")
	}
	if err := <-stopped; err != nil {
		t.Fatalf("smart stop: %v", err)
	}
}

// A role that may read server files reads the server's status in the
// probe's statement from its session's second probe on; a grant revoked
// in the middle of the session fails that statement (42501), and the same
// probe runs the plain one instead: no probe fails, and the next ones ask
// with new sessions again. Without the fallback the probe after the
// REVOKE failed with "permission denied for function pg_read_file".
func TestProbeReadsStatusUntilTheGrantIsRevoked(t *testing.T) {
	t.Parallel()
	cl := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(1)})
	node := cl.Nodes[0]
	node.Exec(t, "CREATE ROLE reader LOGIN")
	node.Exec(t, "GRANT EXECUTE ON FUNCTION pg_read_file(text, bigint, bigint, boolean) TO reader")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := pgCheckerOf(t, "user=reader dbname=postgres sslmode=disable", node.Addr())
	for i, want := range []bool{false, true, true} { // the first row says the role may
		if _, err := c.Check(ctx); err != nil {
			t.Fatal(err)
		}
		if c.rowStatus != want {
			t.Fatalf("probe %d read the status: %v, want %v", i+1, c.rowStatus, want)
		}
	}
	node.Exec(t, "REVOKE EXECUTE ON FUNCTION pg_read_file(text, bigint, bigint, boolean) FROM reader")
	if _, err := c.Check(ctx); err != nil {
		t.Fatalf("the probe once the grant was revoked: %v", err)
	}
	if c.rowStatus || c.readsStatus {
		t.Fatalf("after the revoke the probe read the status: %v, and will: %v; want neither", c.rowStatus, c.readsStatus)
	}
	if !strings.Contains(node.Log(), "permission denied for function pg_read_file") {
		t.Fatal("the server logged no denial: the revoked statement never ran")
	}
	node.Exec(t, "GRANT EXECUTE ON FUNCTION pg_read_file(text, bigint, bigint, boolean) TO reader")
	if _, err := c.Check(ctx); err != nil || !c.readsStatus {
		t.Fatalf("the probe once granted again: %v; it will read the status: %v, want true", err, c.readsStatus)
	}
}
