package test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/app/apptest"
	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// TestSwappedClustersKeepTheirKnowledge: a blue/green reload swaps two
// clusters' hosts under their names ("live" moves from the blue hosts to
// the green one, "next" takes the blue ones). Knowledge follows the
// identity: each name takes what pgdns knew of the cluster whose hosts it
// now lists, so green's primary is answered under live at once, and blue's
// old primary, superseded by a timeline 2 whose hosts are down, stays out
// of primary.next (review 7, H13: with identities replaced only by hosts
// seen with them, both names kept the other's identity and live answered
// no primary for good). Then pgdns restarts with the swap undone: from the
// state file, each name again takes the knowledge of the hosts it lists.
func TestSwappedClustersKeepTheirKnowledge(t *testing.T) {
	ips := pgtest.Addrs(t).IPs(4)
	blue := pgtest.New(t, pgtest.Options{IPs: ips[:3]})
	green := pgtest.New(t, pgtest.Options{IPs: ips[3:]})
	n1, n2, n3 := blue.Nodes[0], blue.Nodes[1], blue.Nodes[2]
	g1 := green.Nodes[0]
	ctx := context.Background()
	state := filepath.Join(t.TempDir(), "state.json")
	config := `
dns:
  listen: 127.0.0.1:0
  lsn_wait: 0s
  default_cluster: live
http:
  listen: 127.0.0.1:0
probe:
  interval: 100ms
  timeout: 1s
  dsn: "user=postgres dbname=postgres sslmode=disable"
clusters:
  live:
    hosts: [%s, %s, %s]
  next:
    hosts: [%s]
state:
  path: %q
`
	a, cfg, logs := apptest.Start(t, fmt.Sprintf(config, n1.Addr(), n2.Addr(), n3.Addr(), g1.Addr(), state))
	e := &env{pg: blue, app: a, cfg: cfg, logs: logs}
	e.waitFor(t, "primary.live.db.local.", []string{n1.IP})
	e.waitFor(t, "primary.next.db.local.", []string{g1.IP})
	e.waitFor(t, "replica.live.db.local.", []string{n2.IP, n3.IP})

	// n2 promoted while n1 runs on (unfenced); pgdns proves timeline 2.
	common := e.insertAndTakeLSN(t, n1)
	waitStreaming(t, n2, 1, common)
	if err := n2.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.live.db.local.", []string{n2.IP})
	// The new primary and the other replica go down: the running pgdns
	// rightly answers no primary (n1 is superseded).
	for _, n := range []*pgtest.Node{n2, n3} {
		if err := n.Stop(ctx, "immediate"); err != nil {
			t.Fatal(err)
		}
	}
	e.waitFor(t, "primary.live.db.local.", nil)
	e.holds(t, "primary.live.db.local.", time.Second, exactly(), "n1 is superseded by timeline 2")

	// Blue/green: "live" now names the green cluster, "next" the blue one.
	swapped := *e.cfg
	swapped.Clusters = slices.Clone(e.cfg.Clusters)
	for i := range swapped.Clusters {
		switch swapped.Clusters[i].Name {
		case "live":
			swapped.Clusters[i].Hosts = []string{g1.Addr()}
		case "next":
			swapped.Clusters[i].Hosts = []string{n1.Addr(), n2.Addr(), n3.Addr()}
		}
	}
	if err := e.app.Reload(&swapped); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.live.db.local.", []string{g1.IP})
	e.holds(t, "primary.next.db.local.", 3*time.Second, exactly(),
		"n1, writable on timeline 1, superseded by timeline 2 before the reload that moved its cluster to another name")
	e.waitFor(t, "primary.live.db.local.", []string{g1.IP})
	superseded(t, e, "primary.next")

	// Restarted with the swap undone: the state file has blue's knowledge
	// under next and green's under live; each name takes its hosts'.
	if err := e.app.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	a, cfg, logs = apptest.Start(t, fmt.Sprintf(config, n1.Addr(), n2.Addr(), n3.Addr(), g1.Addr(), state))
	e = &env{pg: blue, app: a, cfg: cfg, logs: logs}
	e.waitFor(t, "primary.next.db.local.", []string{g1.IP})
	e.holds(t, "primary.live.db.local.", 3*time.Second, exactly(), "n1, superseded by timeline 2 before pgdns restarted")
	superseded(t, e, "primary.live")
}

// superseded waits until /v1/resolve of name says that n1 is superseded
// by timeline 2: the cluster's knowledge, not the other identity's.
func superseded(t *testing.T, e *env, name string) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, 50*time.Millisecond, name+" says n1 is superseded", func() (string, bool) {
		_, body := e.get(t, http.DefaultClient, "/v1/resolve?name="+name, "")
		return body, strings.Contains(body, "superseded by timeline 2") && !strings.Contains(body, "is not the cluster's")
	})
}
