package test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/pgdns/pgdns/internal/app/apptest"
	"github.com/pgdns/pgdns/internal/pgtest"
)

// movableHead is the config, up to "clusters:", of a pgdns probing every
// 100ms with its state file in dir: the tests that move a host between
// clusters start it with main listed and then reload (reloadTo, which
// writes dir/pgdns.yaml) or restart it with another list after it.
func movableHead(dir string) string {
	return fmt.Sprintf(`
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
}

// promotedBesideUnfenced starts pgdns from head with main listing pg's
// three nodes, writes on n1 and, once n2 has streamed it, promotes n2
// while n1 runs on unfenced and n3 keeps following n1: pgdns proves
// timeline 2 and answers n2 as main's primary, n1 and n3 superseded.
func promotedBesideUnfenced(t *testing.T, pg *pgtest.Cluster, head string) *env {
	t.Helper()
	n1, n2, n3 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	a, cfg, logs := apptest.Start(t, head+fmt.Sprintf("  main:\n    hosts: [%s, %s, %s]\n", n1.Addr(), n2.Addr(), n3.Addr()))
	e := &env{pg: pg, app: a, cfg: cfg, logs: logs}
	e.waitFor(t, "primary.db.local.", []string{n1.IP})
	common := e.insertAndTakeLSN(t, n1)
	waitStreaming(t, n2, 1, common)
	if err := n2.Promote(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", []string{n2.IP})
	return e
}
