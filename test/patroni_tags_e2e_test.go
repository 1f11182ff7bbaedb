package test

// Patroni's noloadbalance tag drains a member as pgdns.drain does (issue
// 25 item 2), read as Patroni itself reads it. Run by TestPatroni on its
// cluster, so that make test starts no second Patroni cluster.

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// patroniReplicaStatus is the status of Patroni's own GET /replica on n:
// 200 when Patroni would balance reads to it.
func patroniReplicaStatus(t *testing.T, n *pgtest.PatroniNode) int {
	t.Helper()
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(n.APIURL + "/replica")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// testNoLoadBalance tags a replica of pc noloadbalance (a boolean, then a
// string, the wrong type) and then the leader, and checks that pgdns and
// Patroni's /replica leave the same members out, that the primary stays
// answered, and that the tags leave no trace once removed.
func testNoLoadBalance(t *testing.T, pc *pgtest.PatroniCluster, e *env, leader *pgtest.PatroniNode) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	replicas := others(pc.Nodes, leader)
	var r *pgtest.PatroniNode
	for _, n := range pc.Nodes {
		if n.IP == replicas[0] {
			r = n
		}
	}
	tag := func(n *pgtest.PatroniNode, extra string) {
		t.Helper()
		if err := pc.SetTags(ctx, n, extra); err != nil {
			t.Fatal(err)
		}
	}
	hostJSON := func(n *pgtest.PatroniNode) string {
		t.Helper()
		_, body := e.get(t, http.DefaultClient, "/v1/hosts", "")
		i := strings.Index(body, `"addr":"`+n.Addr()+`"`)
		if i < 0 {
			t.Fatalf("/v1/hosts has no %s: %s", n.Addr(), body)
		}
		return body[i : i+strings.Index(body[i:], "}")]
	}
	rest := slices.DeleteFunc(slices.Clone(replicas), func(ip string) bool { return ip == r.IP })

	for _, value := range []string{"true", `"false"`} {
		tag(r, "noloadbalance: "+value)
		note := `"drained_by":"noloadbalance"`
		if value == `"false"` { // Patroni's bool("false") is True: drained, and said
			note = `Patroni tag noloadbalance is \"false\", a string where Patroni wants a boolean: drained, as Patroni's /replica takes it`
		}
		e.eventually(t, "/v1/hosts", "", func(_ int, body string) bool {
			j := hostJSON(r)
			return strings.Contains(j, `"drained":true`) && strings.Contains(j, `"drained_by":"noloadbalance"`) && strings.Contains(j, note)
		})
		e.waitFor(t, "replica.db.local.", rest)
		e.waitFor(t, "dc-"+r.Name+".replica.db.local.", nil)
		e.waitFor(t, "lag-1s.any.db.local.", append([]string{leader.IP}, rest...))
		e.waitFor(t, "primary.db.local.", []string{leader.IP})
		// Patroni's own read balancing agrees: its /replica fails on the
		// member, whatever the tag's type.
		testkit.Eventually(t, 10*time.Second, 50*time.Millisecond, "Patroni's /replica on the tagged member", func() (int, bool) {
			code := patroniReplicaStatus(t, r)
			return code, code == http.StatusServiceUnavailable
		})
		tag(r, "")
		e.waitFor(t, "replica.db.local.", replicas)
	}

	// The leader tagged: still the primary, and still in any.
	tag(leader, "noloadbalance: true")
	e.eventually(t, "/v1/hosts", "", func(_ int, body string) bool {
		return strings.Contains(hostJSON(leader), `"drained_by":"noloadbalance"`)
	})
	e.waitFor(t, "replica.db.local.", replicas)
	e.waitFor(t, "primary.db.local.", []string{leader.IP})
	e.waitFor(t, "any.db.local.", append([]string{leader.IP}, replicas...))

	tag(leader, "")
	e.eventually(t, "/v1/hosts", "", func(_ int, body string) bool { return !strings.Contains(body, `"drained":true`) })
	testkit.Eventually(t, 10*time.Second, 50*time.Millisecond, "Patroni's /replica on the untagged member", func() (int, bool) {
		code := patroniReplicaStatus(t, r)
		return code, code == http.StatusOK
	})
}
