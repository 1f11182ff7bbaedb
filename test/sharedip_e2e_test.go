package test

// Review R11: the client port of a cluster's A and AAAA names was the
// majority of its hosts' ports, so a reload adding hosts (or stopped ones
// left in the list) flipped it, and replica.db.local answered the
// primary's address to clients on their usual port. An address two
// configured hosts share on different ports is now in no address answer,
// whatever the client port.

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// TestMajorityPortFlipSendsNoClientToTheWrongPlace: the primary on
// IP1:5432, a replica beside it on IP1:5433, one on IP2:5432; a reload then
// lists two hosts on 5433 where nothing listens (decommissioned, not yet
// removed), which makes 5433 the majority. Before the fix that reload made
// replica.db.local answer [IP1] (on 5432: the primary), primary.db.local
// nothing, while pgdns_cluster_primary_answered stayed 1 and the status
// page named the primary; from the start, primary.db.local answered IP1,
// where a client on 5433 reaches the replica.
func TestMajorityPortFlipSendsNoClientToTheWrongPlace(t *testing.T) {
	t.Parallel()
	b := pgtest.Addrs(t)
	ip1, ip2, ip3, ip4 := b.IP(11), b.IP(12), b.IP(13), b.IP(14)
	pg := pgtest.New(t, pgtest.Options{IPs: []string{ip1, ip1, ip2}, Ports: []int{5432, 5433, 5432}})
	e := launch(t, pg, envOptions{})
	e.waitFor(t, "replica.db.local.", []string{ip2})
	testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "SRV primary to name the primary", func() (string, bool) {
		recs, _ := e.srvRecords(t, "_postgresql._tcp.primary.db.local.")
		return fmt.Sprint(recs), len(recs) == 1 && recs[0].Port == 5432
	})

	// noWrongPlace: no address answer holds IP1 (a client on 5432 would
	// reach the primary, one on 5433 the replica), and the primary's
	// metric and status page say what primary.db.local's A answer holds.
	noWrongPlace := func(t *testing.T) {
		t.Helper()
		for _, name := range []string{"primary.db.local.", "replica.db.local.", "any.db.local.", "prefer-replica.db.local."} {
			if got := e.ips(t, name); slices.Contains(got, ip1) {
				t.Fatalf("%s answered %v: %s is the primary on 5432 and a replica on 5433", name, got, ip1)
			}
		}
		if n := e.metricSum(t, `pgdns_cluster_primary_answered{cluster="main"}`); n != 0 {
			t.Fatalf("pgdns_cluster_primary_answered %v while primary.db.local answers nothing", n)
		}
		_, page := e.get(t, http.DefaultClient, "/", "text/html")
		if !strings.Contains(page, `data-primary=""`) || !strings.Contains(page, "is answered by SRV only (_postgresql._tcp.primary.): another configured host has its address on another port") {
			t.Fatalf("the status page names a primary primary.db.local does not answer:\n%s", page)
		}
		txt := strings.Join(e.txt(t, "primary.db.local."), "\n")
		if !strings.Contains(txt, "host="+ip1+":5432 role=primary") || !strings.Contains(txt, "srv_only=address") {
			t.Fatalf("TXT primary does not say it is SRV only:\n%s", txt)
		}
	}

	t.Run("hosts sharing an address: SRV only from the start", func(t *testing.T) {
		noWrongPlace(t)
		_, body := e.get(t, http.DefaultClient, "/v1/resolve?name=primary", "")
		if !strings.Contains(body, `"addr":"`+ip1+`:5432","reason":"address `+ip1+` is also another configured host's on another port: answered by SRV only`) {
			t.Fatalf("/v1/resolve primary: %s", body)
		}
		if !strings.Contains(e.logs.String(), ip1+":5432, "+ip1+":5433 share an address on different ports") {
			t.Fatalf("no start-up warning of the shared address:\n%s", e.logs)
		}
	})

	t.Run("a reload that makes 5433 the majority", func(t *testing.T) {
		next := *e.cfg
		next.Clusters = slices.Clone(e.cfg.Clusters)
		next.Clusters[0].Hosts = append(slices.Clone(e.cfg.Clusters[0].Hosts), ip3+":5433", ip4+":5433")
		if err := e.app.Reload(&next); err != nil {
			t.Fatal(err)
		}
		e.waitHost(t, ip4+":5433", "went down", func(h hostState) bool { return h.Role == "down" })
		e.waitFor(t, "replica.db.local.", nil) // IP2 is on 5432, no longer the client port
		if n, held := testkit.Holds(2*time.Second, 50*time.Millisecond, func() bool { noWrongPlace(t); return true }); !held {
			t.Fatalf("after %d checks", n)
		}

		// clusters.main.port keeps the client port whatever the list.
		fixed := next // the app holds next: a copy of its own
		fixed.Clusters = slices.Clone(next.Clusters)
		fixed.Clusters[0].Port = 5432
		if err := e.app.Reload(&fixed); err != nil {
			t.Fatal(err)
		}
		e.waitFor(t, "replica.db.local.", []string{ip2})
		if port, replica := serverOf(t, ip2, 5432); !replica || port != 5432 {
			t.Fatalf("%s:5432 from replica.db.local. reached port %d, replica %v", ip2, port, replica)
		}
		noWrongPlace(t)
	})
}
