package test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/app/apptest"
	"github.com/pgdns/pgdns/internal/config"
	"github.com/pgdns/pgdns/internal/pgtest"
)

// TestPinnedIdentityMistypedThenFixed: main pins its system identifier;
// n2 is promoted while n1 runs on unfenced, pgdns proves timeline 2 and
// keeps n1 out; n2 goes down, n3 keeps following n1. A reload pins a
// mistyped identifier (every host foreign: no primary, rightly), and the
// next reload fixes it; then the typo again, and a restart from the state
// file with the pin fixed. pgdns knew n1's timeline superseded before the
// typo: primary must not answer n1 after either fix (review 13, R13b-8:
// the knowledge was dropped at the typo, and n1 answered after the fix).
func TestPinnedIdentityMistypedThenFixed(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(3)})
	n1, n2, n3 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	ctx := context.Background()
	var id string
	n1.Query(t, "SELECT system_identifier::text FROM pg_control_system()", &id)
	dir := t.TempDir()
	yaml := func(pin string) string {
		return fmt.Sprintf(`
dns:
  listen: 127.0.0.1:0
  lsn_wait: 0s
http:
  listen: 127.0.0.1:0
probe:
  interval: 100ms
  timeout: 1s
  dsn: "user=postgres dbname=postgres sslmode=disable"
state:
  path: %q
clusters:
  main:
    hosts: [%s, %s, %s]
    system_identifier: %s
`, filepath.Join(dir, "state.json"), n1.Addr(), n2.Addr(), n3.Addr(), pin)
	}
	a, cfg, logs := apptest.Start(t, yaml(id))
	e := &env{pg: pg, app: a, cfg: cfg, logs: logs}
	e.waitFor(t, "primary.db.local.", []string{n1.IP})
	common := e.insertAndTakeLSN(t, n1)
	waitStreaming(t, n2, 1, common)
	if err := n2.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", []string{n2.IP})
	if err := n2.Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", nil)
	reload := func(pin string) {
		t.Helper()
		path := filepath.Join(dir, "pgdns.yaml")
		if err := os.WriteFile(path, []byte(yaml(pin)), 0o600); err != nil {
			t.Fatal(err)
		}
		next, err := config.Load(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.app.Reload(next); err != nil {
			t.Fatal(err)
		}
	}
	reload("1234567890123456789")
	e.holds(t, "primary.db.local.", time.Second, exactly(), "every host foreign to the mistyped identifier")
	reload(id)
	e.holds(t, "primary.db.local.", 2*time.Second, exactly(), "n1, superseded by timeline 2 before the mistyped reload")

	// The typo again, then pgdns restarts from its state file with the
	// pin fixed.
	reload("1234567890123456789")
	e.holds(t, "primary.db.local.", time.Second, exactly(), "every host foreign to the mistyped identifier")
	if err := e.app.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	a, cfg, logs = apptest.Start(t, yaml(id))
	e = &env{pg: pg, app: a, cfg: cfg, logs: logs}
	e.waitFirstRound(t, "the restarted pgdns")
	e.holds(t, "primary.db.local.", 2*time.Second, exactly(), "n1, superseded by timeline 2, after a restart that fixed the pin")
}
