package test

// pgdns in front of a real Patroni cluster (etcd, three nodes), learning
// its members from Patroni's REST API.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/app/apptest"
	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// newPatroni starts the tests' Patroni cluster (etcd on b's first
// address, three members on 11-13) and returns it with its members' REST
// API URLs, in order.
func newPatroni(t *testing.T, b *pgtest.Block) (pc *pgtest.PatroniCluster, urls []string) {
	t.Helper()
	pc = pgtest.NewPatroni(t, b.IP(1), []string{b.IP(11), b.IP(12), b.IP(13)})
	for _, n := range pc.Nodes {
		urls = append(urls, n.APIURL)
	}
	return pc, urls
}

func others(nodes []*pgtest.PatroniNode, not *pgtest.PatroniNode) []string {
	var ips []string
	for _, n := range nodes {
		if n != not {
			ips = append(ips, n.IP)
		}
	}
	return ips
}

func TestPatroni(t *testing.T) {
	t.Parallel()
	b := pgtest.Addrs(t)
	pc, urls := newPatroni(t, b)
	ctx := context.Background()
	listen := "127.0.0.1:0"
	if os.Geteuid() == 0 {
		listen = b.Addr(53, 53) // for psql through the system resolver
	}
	// Only Patroni URLs: the hosts come from /cluster.
	a, cfg, logs := apptest.Start(t, fmt.Sprintf(`
dns: {listen: %q, lsn_wait: 20ms}
http: {listen: "127.0.0.1:0"}
probe: {interval: 250ms, timeout: 1s, max_fails: 3, dsn: "user=postgres dbname=postgres sslmode=disable"}
clusters:
  main:
    patroni: [%s]
`, listen, strings.Join(urls, ", ")))
	e := &env{app: a, cfg: cfg, logs: logs}

	leader := pc.Leader(ctx)
	if leader == nil {
		t.Fatal("no leader")
	}
	e.waitFor(t, "primary.db.local.", []string{leader.IP})
	e.waitFor(t, "lag-1s.replica.db.local.", others(pc.Nodes, leader))
	// Each member's dc tag (its name, pgtest) is its location.
	e.waitFor(t, "dc-"+leader.Name+".primary.db.local.", []string{leader.IP})
	replica := others(pc.Nodes, leader)[0]
	for _, n := range pc.Nodes {
		if n.IP == replica {
			e.waitFor(t, "dc-"+n.Name+".replica.db.local.", []string{n.IP})
			e.waitFor(t, "dc-"+n.Name+".primary.db.local.", nil)
		}
	}

	if os.Geteuid() == 0 {
		t.Run("psql through the names", func(t *testing.T) {
			ns := newResolverNS(t, b.IP(53))
			out, err := ns.psql("host=primary.db.local target_session_attrs=read-write", "SELECT inet_server_addr()")
			if err != nil || out != leader.IP {
				t.Fatalf("primary: %q %v", out, err)
			}
			out, err = ns.psql("host=lag-1s.replica.db.local target_session_attrs=standby", "SELECT inet_server_addr()")
			if err != nil || !slices.Contains(others(pc.Nodes, leader), out) {
				t.Fatalf("replica: %q %v", out, err)
			}
		})
	}

	t.Run("noloadbalance drains a member", func(t *testing.T) { testNoLoadBalance(t, pc, e, leader) })

	t.Run("switchover", func(t *testing.T) {
		candidate := pc.Nodes[1]
		if candidate == leader {
			candidate = pc.Nodes[2]
		}
		if err := pc.Switchover(ctx, candidate); err != nil {
			t.Fatal(err)
		}
		returned := time.Now()
		var pgdnsAt, patroniAt time.Duration
		for pgdnsAt == 0 || patroniAt == 0 {
			if time.Since(returned) > 30*time.Second {
				t.Fatalf("after 30 s: pgdns %v, Patroni /primary %v", pgdnsAt, patroniAt)
			}
			if pgdnsAt == 0 {
				if ips := answerIPs(t, e.query(t, "udp", "primary.db.local.", dns.TypeA)); slices.Equal(ips, []string{candidate.IP}) {
					pgdnsAt = time.Since(returned)
				}
			}
			if patroniAt == 0 {
				if resp, err := (&http.Client{Timeout: time.Second}).Get(candidate.APIURL + "/primary"); err == nil {
					resp.Body.Close()
					if resp.StatusCode == 200 {
						patroniAt = time.Since(returned)
					}
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("switchover: pgdns answered the new leader %v after patronictl returned; Patroni's /primary on it said 200 after %v",
			pgdnsAt.Round(time.Millisecond), patroniAt.Round(time.Millisecond))
		leader = candidate
		e.waitFor(t, "replica.db.local.", others(pc.Nodes, leader))
	})

	t.Run("host names from member names; SRV follows the switchover", func(t *testing.T) {
		for _, n := range pc.Nodes {
			e.waitFor(t, n.Name+".host.main.db.local.", []string{n.IP})
		}
		testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "the cluster's SRV to put the new leader at 10", func() (string, bool) {
			recs, _ := e.srvRecords(t, "_postgresql._tcp.main.db.local.")
			first := 0
			for _, r := range recs {
				if r.Priority == 10 && r.Target == leader.Name+".host.main.db.local." && r.Port == 5432 {
					first++
				}
			}
			return fmt.Sprint(recs), len(recs) == len(pc.Nodes) && first == 1
		})
	})

	var dead *pgtest.PatroniNode
	t.Run("failover after the leader dies", func(t *testing.T) {
		dead = leader
		if err := pc.Kill(ctx, dead); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		gone := false
		var next string
		if !testkit.Poll(60*time.Second, 20*time.Millisecond, func() bool {
			ips := answerIPs(t, e.query(t, "udp", "primary.db.local.", dns.TypeA))
			switch {
			case slices.Contains(ips, dead.IP) && gone:
				t.Fatal("the dead leader was answered as primary again")
			case !slices.Contains(ips, dead.IP):
				gone = true
			}
			if len(ips) == 1 && ips[0] != dead.IP {
				next = ips[0]
				return true
			}
			return false
		}) {
			t.Fatalf("no new primary 60 s after the leader died\n%s", pc.Logs())
		}
		t.Logf("failover: the dead leader left primary.db.local and %s was answered %v after the kill (Patroni ttl 10 s)",
			next, time.Since(killed).Round(time.Millisecond))
		if l := pc.Leader(ctx); l == nil || l.IP != next {
			t.Errorf("pgdns answers %s, Patroni's leader is %v", next, l)
		}
	})

	t.Run("members come and go with Patroni", func(t *testing.T) {
		added, err := pc.AddNode(b.IP(14))
		if err != nil {
			t.Fatal(err)
		}
		e.eventually(t, "/v1/hosts", "", func(_ int, body string) bool {
			return strings.Contains(body, `"addr":"`+added.Addr()+`","ip":"`+b.IP(14)+`","location":"`+added.Name+`","role":"replica","alive":true`)
		})
		// The killed node's member key expires: it leaves the probe's list.
		if dead == nil {
			t.Fatal("the failover step did not run")
		}
		e.eventually(t, "/v1/hosts", "", func(_ int, body string) bool {
			return !strings.Contains(body, `"addr":"`+dead.Addr()+`"`)
		})
	})
}
