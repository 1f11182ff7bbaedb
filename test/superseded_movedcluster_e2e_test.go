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

// TestSupersededPrimaryMovedToAClusterOfItsOwn: n2 is promoted while n1
// runs on unfenced, pgdns proves timeline 2 and keeps n1 out; n2 goes
// down, n3 keeps following n1. A reload moves n1 out of main into a
// cluster of its own, "old". n1 is still the superseded primary of
// timeline 1: primary.old must not answer it (review 13, R13b-9: it did,
// settled anew from n1 alone).
func TestSupersededPrimaryMovedToAClusterOfItsOwn(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(3)})
	n1, n2, n3 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	ctx := context.Background()
	dir := t.TempDir()
	head := fmt.Sprintf(`
dns:
  listen: 127.0.0.1:0
  lsn_wait: 0s
  default_cluster: main
http:
  listen: 127.0.0.1:0
probe:
  interval: 100ms
  timeout: 1s
  dsn: "user=postgres dbname=postgres sslmode=disable"
state:
  path: %q
clusters:
`, filepath.Join(dir, "state.json"))
	a, cfg, logs := apptest.Start(t, head+fmt.Sprintf("  main:\n    hosts: [%s, %s, %s]\n", n1.Addr(), n2.Addr(), n3.Addr()))
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

	path := filepath.Join(dir, "pgdns.yaml")
	moved := head + fmt.Sprintf("  main:\n    hosts: [%s, %s]\n  old:\n    hosts: [%s]\n", n2.Addr(), n3.Addr(), n1.Addr())
	if err := os.WriteFile(path, []byte(moved), 0o600); err != nil {
		t.Fatal(err)
	}
	next, err := config.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.app.Reload(next); err != nil {
		t.Fatal(err)
	}
	e.holds(t, "primary.old.db.local.", 2*time.Second, exactly(), "n1, writable on timeline 1, superseded by timeline 2")
	e.holds(t, "primary.main.db.local.", time.Second, exactly(), "no host of main is writable on timeline 2")
}
