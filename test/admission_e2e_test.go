package test

// probe.admission_interval: how often pgdns asks each host whether it
// still admits a new session, which is how it sees a smart shutdown.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/app/apptest"
	"github.com/pgdns/pgdns/internal/config"
	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// With probe.admission_interval set, a replica stopping smartly leaves the
// answers and its stop completes while pgdns runs; with 0 pgdns opens no
// session beside its probe session (the server logs every connection), the
// replica stays in the answers while it refuses every new session, and its
// stop completes only once pgdns has stopped: the behaviour the -check
// warning and docs/configuration.md describe. The key did not exist
// before: both halves fail on the code before it (an unknown key).
func TestAdmissionInterval(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(2), Conf: []string{"log_connections = on"}})
	primary, replica := pg.Nodes[0], pg.Nodes[1]
	start := func(t *testing.T, interval string) *env {
		a, cfg, logs := apptest.Start(t, fmt.Sprintf(`
dns:
  listen: 127.0.0.1:0
  lsn_wait: 0s
http:
  listen: ""
probe:
  interval: 100ms
  dsn: "user=postgres dbname=postgres sslmode=disable"
  admission_interval: %s
clusters:
  main:
    hosts: [%s, %s]
`, interval, primary.Addr(), replica.Addr()))
		e := &env{pg: pg, app: a, cfg: cfg, logs: logs}
		e.waitFor(t, "replica.db.local.", []string{replica.IP})
		return e
	}
	connections := func() int { return strings.Count(replica.Log(), "connection received") }
	smartStop := func() <-chan error {
		done := make(chan error, 1)
		go func() { done <- replica.Stop(context.Background(), "smart") }() // pg_ctl -t 60
		return done
	}

	var stopped <-chan error
	if !t.Run("off", func(t *testing.T) {
		e := start(t, "0")
		if !strings.Contains(e.logs.String(), config.AdmissionOffWarning) {
			t.Errorf("pgdns started with probe.admission_interval: 0 without warning %q:\n%s", config.AdmissionOffWarning, e.logs.String())
		}
		before := connections()
		time.Sleep(2 * time.Second) // 20 probes, 5 admission checks at the default
		if n := connections() - before; n != 0 {
			t.Fatalf("with probe.admission_interval: 0 pgdns opened %d sessions to the replica in 2s, want none", n)
		}
		stopped = smartStop()
		// The replica refuses new sessions now; pgdns, not asking, keeps
		// answering it, and its session holds the stop up.
		testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "the replica to refuse new sessions", func() (string, bool) {
			var one int
			err := replica.QueryOnce(context.Background(), "SELECT 1", &one)
			return fmt.Sprint(err), err != nil && strings.Contains(err.Error(), "57P03")
		})
		if passed, ok := testkit.Holds(2*time.Second, 100*time.Millisecond, func() bool {
			return strings.Join(e.ips(t, "replica.db.local."), ",") == replica.IP
		}); !ok {
			t.Fatalf("with probe.admission_interval: 0 the smartly stopping replica left the answers after %d checks; the documented behaviour is that it stays", passed)
		}
		select {
		case err := <-stopped:
			t.Fatalf("the smart stop completed (%v) while pgdns's probe session was open", err)
		default:
		}
	}) { // pgdns stops here: its session ends
		return
	}
	if err := <-stopped; err != nil {
		t.Fatalf("smart stop of the replica once pgdns stopped: %v", err)
	}
	if err := replica.Start(context.Background()); err != nil {
		t.Fatal(err)
	}

	t.Run("on", func(t *testing.T) {
		e := start(t, "300ms")
		stopped := smartStop()
		took := e.waitFor(t, "replica.db.local.", nil)
		t.Logf("with probe.admission_interval: 300ms the smartly stopping replica left the answers after %v", took)
		if err := <-stopped; err != nil {
			t.Fatalf("smart stop of the replica while pgdns runs: %v", err)
		}
	})
}
