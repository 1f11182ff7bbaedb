package test

// Drains, the offline class and synchronous-only reads, steered through
// the database itself (issue 25): pgdns.drain and pgdns.offline set on a
// host reach every pgdns instance by its next probe, and sync answers
// only the standbys the primary reports as synchronous. One cluster and
// three instances for every case, to keep make test fast.

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/zone"
)

// replicaNames are names that answer replicas: every one must leave a
// drained replica out. The replicas of the test cluster are in west.
var replicaNames = []string{
	"replica.db.local.", "standby.db.local.", "prefer-replica.db.local.", "any.db.local.", "offline.db.local.",
	"lag-30s.replica.db.local.", "bytes-1gb.replica.db.local.", "lsn-0-1.replica.db.local.",
	"dc-west.replica.db.local.", "dc-west.any.db.local.", "lag-30s.bytes-1gb.lsn-0-1.dc-west.prefer-replica.db.local.",
	"lag-30s.offline.db.local.",
}

func TestDrainOfflineAndSync(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(4)})
	p, r1, r2, r3 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2], pg.Nodes[3]
	p.Exec(t, "CREATE ROLE pgdns LOGIN") // a probe role without pg_monitor
	locations := "    locations:\n      east: [" + p.Addr() + "]\n      west: [" + r1.Addr() + ", " + r2.Addr() + ", " + r3.Addr() + "]\n"
	e1 := attach(t, pg, envOptions{Cluster: locations})
	e2 := attach(t, pg, envOptions{Cluster: locations})
	both := []*env{e1, e2}
	all := slices.Sorted(slices.Values([]string{r1.IP, r2.IP, r3.IP}))
	for _, e := range both {
		e.waitFor(t, "replica.db.local.", all)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	set := func(n *pgtest.Node, name, value string) {
		t.Helper()
		if err := n.SetCustom(ctx, name, value); err != nil {
			t.Fatal(err)
		}
	}
	without := func(ips []string, drop ...string) []string {
		return slices.DeleteFunc(slices.Clone(ips), func(ip string) bool { return slices.Contains(drop, ip) })
	}
	hostJSON := func(e *env, addr string) string {
		t.Helper()
		_, body := e.get(t, http.DefaultClient, "/v1/hosts", "")
		i := strings.Index(body, `"addr":"`+addr+`"`)
		if i < 0 {
			t.Fatalf("/v1/hosts has no %s: %s", addr, body)
		}
		j := strings.Index(body[i:], "}")
		return body[i : i+j]
	}

	t.Run("a drained replica leaves every replica name on both instances", func(t *testing.T) {
		serial := soaSerial(t, e1.app.DNSAddr(), "main.db.local.")
		set(r2, "pgdns.drain", "on")
		reloaded := time.Now()
		for _, e := range both {
			e.waitFor(t, "replica.db.local.", without(all, r2.IP))
			t.Logf("drained on %s %v after the reload (probe.interval 100ms)", e.app.DNSAddr(), time.Since(reloaded).Round(time.Millisecond))
			for _, name := range replicaNames {
				if slices.Contains(e.ips(t, name), r2.IP) {
					t.Errorf("%s answers the drained %s: %v", name, r2.IP, e.ips(t, name))
				}
			}
			if j := hostJSON(e, r2.Addr()); !strings.Contains(j, `"drained":true`) || !strings.Contains(j, `"drained_by":"pgdns.drain"`) ||
				!strings.Contains(j, `"role":"replica"`) {
				t.Errorf("/v1/hosts shows the drained replica as %s", j)
			}
		}
		if after := soaSerial(t, e1.app.DNSAddr(), "main.db.local."); !zone.SerialLess(serial, after) {
			t.Errorf("the SOA serial stayed %d across the drain (now %d)", serial, after)
		}

		// The same for a drained primary: still the primary, and still
		// in any; TXT says it is drained and why.
		set(p, "pgdns.drain", "on")
		testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "the primary drained in /v1/hosts", func() (string, bool) {
			j := hostJSON(e1, p.Addr())
			return j, strings.Contains(j, `"drained":true`)
		})
		for _, e := range both {
			if passed, ok := testkit.Holds(time.Second, 50*time.Millisecond, func() bool {
				return slices.Equal(e.ips(t, "primary.db.local."), []string{p.IP}) && slices.Contains(e.ips(t, "any.db.local."), p.IP)
			}); !ok {
				t.Fatalf("after %d lookups the drained primary left primary or any: %v, %v", passed, e.ips(t, "primary.db.local."), e.ips(t, "any.db.local."))
			}
		}
		txt := e1.txt(t, "primary.db.local.")
		t.Logf("TXT primary.db.local: %q", txt)
		if len(txt) != 1 || !strings.Contains(txt[0], "drained=true drained_by=pgdns.drain") {
			t.Errorf("TXT primary.db.local = %q, want drained=true drained_by=pgdns.drain", txt)
		}

		serial = soaSerial(t, e1.app.DNSAddr(), "main.db.local.")
		set(r2, "pgdns.drain", "")
		set(p, "pgdns.drain", "")
		for _, e := range both {
			e.waitFor(t, "replica.db.local.", all)
			e.waitFor(t, "dc-west.replica.db.local.", all)
		}
		if after := soaSerial(t, e1.app.DNSAddr(), "main.db.local."); !zone.SerialLess(serial, after) {
			t.Errorf("the SOA serial stayed %d across the undrain (now %d)", serial, after)
		}
	})

	t.Run("a garbage value counts as off and says so", func(t *testing.T) {
		set(r3, "pgdns.drain", "yes please")
		testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "the note in /v1/hosts", func() (string, bool) {
			j := hostJSON(e1, r3.Addr())
			return j, strings.Contains(j, `pgdns.drain is \"yes please\", not a boolean: counted as off`)
		})
		if passed, ok := testkit.Holds(time.Second, 50*time.Millisecond, func() bool {
			return slices.Equal(e1.ips(t, "replica.db.local."), all)
		}); !ok {
			t.Fatalf("after %d lookups replica.db.local left out the host with a garbage drain: %v", passed, e1.ips(t, "replica.db.local."))
		}
		set(r3, "pgdns.drain", "")
		testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "the note gone", func() (string, bool) {
			j := hostJSON(e1, r3.Addr())
			return j, !strings.Contains(j, "pgdns.drain")
		})
	})

	t.Run("every replica drained: prefer-replica answers the primary, replica nothing", func(t *testing.T) {
		for _, r := range []*pgtest.Node{r1, r2, r3} {
			set(r, "pgdns.drain", "on")
		}
		for _, e := range both {
			e.waitFor(t, "replica.db.local.", nil)
			e.waitFor(t, "prefer-replica.db.local.", []string{p.IP})
			e.waitFor(t, "any.db.local.", []string{p.IP})
			e.waitFor(t, "primary.db.local.", []string{p.IP})
		}
		for _, r := range []*pgtest.Node{r1, r2, r3} {
			set(r, "pgdns.drain", "")
		}
		for _, e := range both {
			e.waitFor(t, "replica.db.local.", all)
		}
	})

	t.Run("offline replicas answer offline only, first", func(t *testing.T) {
		set(r3, "pgdns.offline", "on")
		e1.waitFor(t, "offline.db.local.", []string{r3.IP})
		e1.waitFor(t, "replica.db.local.", []string{r1.IP, r2.IP})
		for name, want := range map[string][]string{
			"lag-30s.dc-west.offline.db.local.": {r3.IP},
			"prefer-replica.db.local.":          {r1.IP, r2.IP},
			"any.db.local.":                     {p.IP, r1.IP, r2.IP},
			"dc-east.offline.db.local.":         {}, // no replica in east: offline never answers the primary
		} {
			if got := e1.ips(t, name); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
				t.Errorf("%s = %v, want %v", name, got, want)
			}
		}
		if txt := e1.txt(t, "offline.db.local."); len(txt) != 1 || !strings.Contains(txt[0], "offline=true") {
			t.Errorf("TXT offline.db.local = %q, want offline=true", txt)
		}
		// A drained offline replica is answered by neither: offline
		// falls back to the other replicas.
		set(r3, "pgdns.drain", "on")
		e1.waitFor(t, "offline.db.local.", []string{r1.IP, r2.IP})
		e1.waitFor(t, "replica.db.local.", []string{r1.IP, r2.IP})
		set(r3, "pgdns.drain", "")
		set(r3, "pgdns.offline", "")
		e1.waitFor(t, "replica.db.local.", all)
		e1.waitFor(t, "offline.db.local.", all)
	})

	t.Run("sync answers only the standbys the primary reports synchronous", func(t *testing.T) {
		e3 := attach(t, pg, envOptions{DSN: leastPrivilege, Cluster: locations})
		syncNames := func(names string, want int) {
			t.Helper()
			p.Exec(t, "ALTER SYSTEM SET synchronous_standby_names = '"+names+"'")
			p.Exec(t, "SELECT pg_reload_conf()")
			testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "synchronous standbys", func() (int, bool) {
				var n int
				p.Query(t, "SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum')", &n)
				return n, n == want
			})
		}
		resolveWhy := func(e *env, name, addr string) string {
			t.Helper()
			_, body := e.get(t, http.DefaultClient, "/v1/resolve?name="+url.QueryEscape(name), "")
			i := strings.Index(body, `{"addr":"`+addr+`","reason":"`)
			if i < 0 {
				return "not excluded: " + body
			}
			return body[i:]
		}
		// wantWhy polls: the reason comes from the newest probe round, and
		// right after an answer changed another instance or round may still
		// give the previous, equally honest reason for a moment.
		wantWhy := func(e *env, name, addr, want string) {
			t.Helper()
			var why string
			if !testkit.Poll(10*time.Second, 50*time.Millisecond, func() bool {
				why = resolveWhy(e, name, addr)
				return strings.Contains(why, want)
			}) {
				t.Errorf("/v1/resolve?name=%s for %s: %s, want %q", name, addr, why, want)
			}
		}
		// None configured: none is synchronous, and /v1/resolve says why.
		e1.waitFor(t, "sync.replica.db.local.", nil)
		wantWhy(e1, "sync.replica", r1.Addr(), "synchronous_standby_names is empty on the primary")

		syncNames(`FIRST 1 (`+r1.Name+`)`, 1)
		e1.waitFor(t, "sync.replica.db.local.", []string{r1.IP})
		e1.waitFor(t, "sync.any.db.local.", []string{p.IP, r1.IP})
		e1.waitFor(t, "sync.lag-30s.dc-west.offline.db.local.", []string{r1.IP})
		e1.waitFor(t, "replica.db.local.", all) // ordinary names are not restricted
		if txt := e1.txt(t, "sync.replica.db.local."); len(txt) != 1 || !strings.Contains(txt[0], "sync=true") {
			t.Errorf("TXT sync.replica.db.local = %q, want sync=true", txt)
		}
		wantWhy(e1, "sync.replica", r2.Addr(), "not a synchronous standby: its WAL sender's sync_state is neither sync nor quorum")
		// A probe role without pg_monitor cannot read sync_state, nor
		// prove that a replica whose timeline it cannot read follows the
		// primary (decisions.md rule 1): it answers none, and says why.
		waitHiddenAside(t, e3, r1, r2, r3)
		if passed, ok := testkit.Holds(time.Second, 50*time.Millisecond, func() bool {
			return len(e3.ips(t, "sync.replica.db.local.")) == 0
		}); !ok {
			t.Fatalf("after %d lookups the probe role without pg_monitor answered sync.replica: %v", passed, e3.ips(t, "sync.replica.db.local."))
		}
		t.Logf("/v1/resolve without pg_monitor: %s", resolveWhy(e3, "sync.replica", r1.Addr()))
		t.Logf("TXT sync.replica: %q", e1.txt(t, "sync.replica.db.local."))
		wantWhy(e3, "sync.replica", r1.Addr(), grantHint)
		if got := e3.ips(t, "sync.prefer-replica.db.local."); !slices.Equal(got, []string{p.IP}) {
			t.Errorf("sync.prefer-replica without pg_monitor = %v, want the primary", got)
		}

		// Quorum standbys count; a drained one leaves sync too.
		syncNames(`ANY 1 (`+r1.Name+`, `+r3.Name+`)`, 2)
		e1.waitFor(t, "sync.replica.db.local.", []string{r1.IP, r3.IP})
		set(r3, "pgdns.drain", "on")
		e1.waitFor(t, "sync.replica.db.local.", []string{r1.IP})
		set(r3, "pgdns.drain", "")
		e1.waitFor(t, "sync.replica.db.local.", []string{r1.IP, r3.IP})
		syncNames("", 0)
		for _, e := range both {
			e.waitFor(t, "sync.replica.db.local.", nil) // each instance on its own probe of the primary
			if m := e.query(t, "udp", "sync.replica.db.local.", dns.TypeA); m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 || len(m.Ns) != 1 {
				t.Errorf("sync.replica with no synchronous standby: %v", m)
			}
		}
	})
}
