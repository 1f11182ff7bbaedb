package test

// Tests of the identity rules (issue 11, items 4 to 7) against real
// PostgreSQL: which system identifier is the cluster's, one server under
// two addresses, which replica is a synchronous standby, and what a
// timeline token proves about a re-cloned old primary.

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/zone"
)

// hostState is one host as /v1/hosts shows it.
type hostState struct {
	Addr       string  `json:"addr"`
	Role       string  `json:"role"`
	Alive      bool    `json:"alive"`
	Timeline   *uint32 `json:"timeline"`
	ReplayLSN  *string `json:"replay_lsn"`
	Sync       bool    `json:"sync_standby"`
	SyncUnsure bool    `json:"sync_standby_unsure"`
	Aside      string  `json:"aside"`
	Note       string  `json:"note"`
}

// hostStates reads /v1/hosts, by configured address.
func (e *env) hostStates(t *testing.T) map[string]hostState {
	t.Helper()
	_, body := e.get(t, http.DefaultClient, "/v1/hosts", "")
	var v struct {
		Hosts []hostState `json:"hosts"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("/v1/hosts: %v: %s", err, body)
	}
	out := map[string]hostState{}
	for _, h := range v.Hosts {
		out[h.Addr] = h
	}
	return out
}

// waitHost polls /v1/hosts until host addr passes ok, and returns it.
func (e *env) waitHost(t *testing.T, addr, what string, ok func(hostState) bool) hostState {
	t.Helper()
	var h hostState
	if !testkit.Poll(30*time.Second, 50*time.Millisecond, func() bool {
		h = e.hostStates(t)[addr]
		return ok(h)
	}) {
		t.Fatalf("%s never %s: last %+v (evidence %q)", addr, what, h, e.txt(t, "any.db.local."))
	}
	return h
}

// holds asks name every 50ms for d and fails at the first answer ok
// rejects.
func (e *env) holds(t *testing.T, name string, d time.Duration, ok func([]string) bool, what string) {
	t.Helper()
	var got []string
	if n, held := testkit.Holds(d, 50*time.Millisecond, func() bool {
		got = e.ips(t, name)
		return ok(got)
	}); !held {
		t.Fatalf("after %d lookups %s answered %v: %s (evidence %q)", n, name, got, what, e.txt(t, "any.db.local."))
	}
}

// exactly accepts the answer want and nothing else.
func exactly(want ...string) func([]string) bool {
	return func(got []string) bool { return slices.Equal(got, slices.Sorted(slices.Values(want))) }
}

// without accepts any answer that does not contain ip.
func without(ip string) func([]string) bool {
	return func(got []string) bool { return !slices.Contains(got, ip) }
}

// parseLSN reads an LSN as PostgreSQL prints it ("0/3000060") or as lsn-
// names carry it ("0-3000060").
func parseLSN(t *testing.T, s string) uint64 {
	t.Helper()
	hi, lo, ok := strings.Cut(strings.Replace(s, "-", "/", 1), "/")
	h, err1 := strconv.ParseUint(hi, 16, 32)
	l, err2 := strconv.ParseUint(lo, 16, 32)
	if !ok || err1 != nil || err2 != nil {
		t.Fatalf("bad LSN %q", s)
	}
	return h<<32 | l
}

// replayedPast reports whether h has replayed (or, writable, written) WAL
// at or past lsn.
func replayedPast(t *testing.T, h hostState, lsn string) bool {
	return h.ReplayLSN != nil && parseLSN(t, *h.ReplayLSN) >= parseLSN(t, lsn)
}

// Item 5: a stray host of another cluster listed first, one primary and a
// stopped replica: one identity against one. A tie establishes nothing,
// so nothing is answered (the old rule gave the tie to the first
// configured host: the stray was answered as the primary). The primary is
// slow to answer pgdns's first probe, so the stray is the first host seen:
// being first, alone, must not make it the cluster. Once the replica is
// back, the cluster's identity holds a majority and is kept when the
// replica goes away again: the tie of before does not return.
func TestIdentityTieFailsClosed(t *testing.T) {
	t.Parallel()
	ips := pgtest.Addrs(t).IPs(3)
	stray := pgtest.New(t, pgtest.Options{IPs: ips[:1]}).Nodes[0]
	pg := pgtest.New(t, pgtest.Options{IPs: ips[1:]})
	primary, replica := pg.Nodes[0], pg.Nodes[1]
	ctx := context.Background()
	if err := replica.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	// Frozen, the primary accepts the probe's connection and answers it
	// when thawed, well within the probe timeout (1s).
	if err := primary.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	thawed := false
	defer func() {
		if !thawed {
			_ = primary.Signal(syscall.SIGCONT)
		}
	}()
	e := launch(t, pg, envOptions{Hosts: []string{stray.Addr(), primary.Addr(), replica.Addr()}})
	e.waitHost(t, stray.Addr(), "was probed", func(h hostState) bool { return h.Timeline != nil })
	if err := primary.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	thawed = true
	e.waitHost(t, primary.Addr(), "was probed", func(h hostState) bool { return h.Timeline != nil })
	e.waitFor(t, "primary.db.local.", nil)
	e.waitHost(t, replica.Addr(), "went down", func(h hostState) bool { return h.Role == "down" })
	e.holds(t, "primary.db.local.", 3*time.Second, exactly(), "a primary on a 1:1 identity tie")
	e.holds(t, "any.db.local.", time.Second, without(stray.IP), "the stray host")
	e.waitHost(t, stray.Addr(), "explained the tie", func(h hostState) bool {
		return h.Role == "unknown" && h.Aside == "unsettled"
	})
	// No identity is established, so no host name answers (review S2):
	// not the stray's, nor the primary's.
	hostName := func(n *pgtest.Node) string { return zone.HostName(zone.DerivedLabel(n.Addr()), "main") + ".db.local." }
	e.waitFor(t, hostName(primary), nil)
	e.waitFor(t, hostName(stray), nil)
	if txt := e.txt(t, hostName(primary)); len(txt) != 1 || !strings.Contains(txt[0], "unanswered=unsettled") {
		t.Errorf("the primary's host name TXT during the tie: %q, want unanswered=unsettled", txt)
	}

	if err := replica.Start(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", []string{primary.IP})
	e.waitFor(t, "replica.db.local.", []string{replica.IP})
	if err := replica.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	e.waitHost(t, replica.Addr(), "went down", func(h hostState) bool { return h.Role == "down" })
	e.holds(t, "primary.db.local.", 3*time.Second, exactly(primary.IP), "not the established identity's primary")
	e.holds(t, "any.db.local.", time.Second, exactly(primary.IP), "not the established identity's primary alone")
	e.waitHost(t, stray.Addr(), "was called foreign", func(h hostState) bool {
		return h.Role == "unknown" && h.Aside == "foreign"
	})
	// Host names (review S2): the foreign server's is NODATA over UDP and
	// TCP, for A and SRV, and its TXT says why; the primary's answers, and
	// so does the down replica's, seen before as the cluster's.
	e.waitFor(t, hostName(primary), []string{primary.IP})
	e.waitFor(t, hostName(replica), []string{replica.IP})
	for _, network := range []string{"udp", "tcp"} {
		for _, q := range []struct {
			name  string
			qtype uint16
		}{{hostName(stray), dns.TypeA}, {"_postgresql._tcp." + hostName(stray), dns.TypeSRV}} {
			if m := e.query(t, network, q.name, q.qtype); m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 || len(m.Ns) != 1 {
				t.Errorf("%s %s %s: %s, want NODATA with the SOA", network, q.name, dns.TypeToString[q.qtype], m)
			}
		}
	}
	if txt := e.txt(t, hostName(stray)); len(txt) != 1 || !strings.Contains(txt[0], "unanswered=foreign") {
		t.Errorf("the foreign host's name TXT: %q, want unanswered=foreign", txt)
	}
}

// Item 6: the primary listed twice, under its address and under a second
// address it also listens on (as a DNS name and an address, or Patroni's
// address and a configured one, reach one server). It is one host, answered
// once under the first address, and no split brain: the old rule saw two
// writable hosts on timeline 1 and answered no primary at all.
func TestSameServerTwiceIsOneHost(t *testing.T) {
	t.Parallel()
	ips := pgtest.Addrs(t).IPs(3)
	pg := pgtest.New(t, pgtest.Options{IPs: ips[:2]})
	primary, replica := pg.Nodes[0], pg.Nodes[1]
	alias := net.JoinHostPort(ips[2], strconv.Itoa(primary.Port))
	ctx := context.Background()
	primary.Exec(t, "ALTER SYSTEM SET listen_addresses = '"+primary.IP+","+ips[2]+"'")
	if err := primary.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	if err := primary.Start(ctx); err != nil {
		t.Fatal(err)
	}

	e := attach(t, pg, envOptions{Extra: []string{alias}})
	e.waitFor(t, "any.db.local.", []string{primary.IP, replica.IP})
	h := e.waitHost(t, alias, "was recognised as the primary", func(h hostState) bool {
		return h.Aside == "duplicate"
	})
	if h.Role != "unknown" || h.Timeline == nil || *h.Timeline != 1 {
		t.Fatalf("the second address of the primary: %+v", h)
	}
	e.holds(t, "primary.db.local.", 2*time.Second, exactly(primary.IP), "not the primary once, under its first address")
	e.holds(t, "any.db.local.", time.Second, exactly(primary.IP, replica.IP), "not each server once")
	logs := e.logs.String()
	if strings.Contains(logs, "split brain") {
		t.Errorf("one server under two addresses was taken for a split brain:\n%s", logs)
	}
	if !strings.Contains(logs, "the same server as "+primary.Addr()) {
		t.Errorf("the duplicate %s is not logged:\n%s", alias, logs)
	}
}

// standbyRow is one row of a primary's pg_stat_replication, with the slot
// its WAL sender streams from.
type standbyRow struct{ app, state, slot string }

// standbyRows reads the primary's pg_stat_replication joined to its
// replication slots, ordered by slot name.
func standbyRows(t *testing.T, primary *pgtest.Node) []standbyRow {
	t.Helper()
	var text string
	primary.Query(t, `SELECT coalesce(string_agg(r.application_name || '/' || r.sync_state || '/' || coalesce(s.slot_name, ''),
	    ',' ORDER BY s.slot_name, r.pid), '')
	  FROM pg_stat_replication r LEFT JOIN pg_replication_slots s ON s.active_pid = r.pid`, &text)
	var rows []standbyRow
	for _, r := range strings.Split(text, ",") {
		if f := strings.Split(r, "/"); len(f) == 3 {
			rows = append(rows, standbyRow{f[0], f[1], f[2]})
		}
	}
	return rows
}

// waitStandbys polls the primary's pg_stat_replication until ok accepts
// its rows.
func waitStandbys(t *testing.T, primary *pgtest.Node, what string, ok func([]standbyRow) bool) []standbyRow {
	t.Helper()
	return testkit.Eventually(t, 30*time.Second, 50*time.Millisecond, "pg_stat_replication to be "+what, func() ([]standbyRow, bool) {
		rows := standbyRows(t, primary)
		return rows, ok(rows)
	})
}

// oneSyncOnePotential accepts two walreceiver rows, one sync and one
// potential, with slots or without.
func oneSyncOnePotential(slots bool) func([]standbyRow) bool {
	return func(rows []standbyRow) bool {
		if len(rows) != 2 {
			return false
		}
		states := []string{}
		for _, r := range rows {
			if r.app != "walreceiver" || (r.slot != "") != slots {
				return false
			}
			states = append(states, r.state)
		}
		slices.Sort(states)
		return slices.Equal(states, []string{"potential", "sync"})
	}
}

// Item 7: two replicas that stream under the default application name
// "walreceiver" from the same client address (every loopback connection
// comes from 127.0.0.1), the primary with synchronous_standby_names
// 'FIRST 1 (*)': one row says sync, the other potential. Without slots the
// rows cannot be told apart, so both replicas lean synchronous and
// "replicas: async" answers neither (the HTTP note says why). With a slot
// each, the slot tells whose row is whose, and "replicas: async" answers
// exactly the potential standby. The old rule matched the primary's
// synchronous application names and marked both replicas sync either way.
func TestSyncStandbysByRow(t *testing.T) {
	t.Parallel()
	ips := pgtest.Addrs(t).IPs(3)
	pg := pgtest.New(t, pgtest.Options{IPs: ips})
	primary, replicas := pg.Nodes[0], pg.Nodes[1:]
	for _, r := range replicas {
		r.Exec(t, "ALTER SYSTEM SET primary_conninfo = 'host="+primary.IP+" port="+strconv.Itoa(primary.Port)+
			" user=postgres application_name=walreceiver'")
		r.Exec(t, "SELECT pg_reload_conf()")
	}
	primary.Exec(t, "ALTER SYSTEM SET synchronous_standby_names = 'FIRST 1 (*)'")
	primary.Exec(t, "SELECT pg_reload_conf()")
	waitStandbys(t, primary, "showed two walreceiver rows without slots, one sync", oneSyncOnePotential(false))

	async := attach(t, pg, envOptions{Replicas: "async"})
	all := attach(t, pg, envOptions{Replicas: "all"})
	r1, r2 := replicas[0], replicas[1]

	t.Run("rows that cannot be told apart lean sync", func(t *testing.T) {
		all.waitFor(t, "replica.db.local.", []string{r1.IP, r2.IP})
		for _, r := range replicas {
			async.waitHost(t, r.Addr(), "leaned sync", func(h hostState) bool {
				return h.Role == "replica" && h.Sync && h.SyncUnsure
			})
		}
		async.waitFor(t, "replica.db.local.", nil)
		async.holds(t, "replica.db.local.", time.Second, exactly(), "a replica that may be the synchronous standby")
		all.holds(t, "replica.db.local.", time.Second, exactly(r1.IP, r2.IP), "not every replica")
	})

	t.Run("slots tell the rows apart", func(t *testing.T) {
		// primary_slot_name takes effect on reload since PostgreSQL 13:
		// the WAL receiver restarts with the slot.
		primary.Exec(t, "SELECT pg_create_physical_replication_slot('slot_1'), pg_create_physical_replication_slot('slot_2')")
		for i, r := range replicas {
			r.Exec(t, "ALTER SYSTEM SET primary_slot_name = 'slot_"+strconv.Itoa(i+1)+"'")
			r.Exec(t, "SELECT pg_reload_conf()")
		}
		rows := waitStandbys(t, primary, "showed two walreceiver rows with slots, one sync", oneSyncOnePotential(true))
		syncNode, potential := r1, r2
		if rows[1].state == "sync" { // rows are ordered by slot name
			syncNode, potential = r2, r1
		}
		async.waitFor(t, "replica.db.local.", []string{potential.IP})
		async.holds(t, "replica.db.local.", 2*time.Second, exactly(potential.IP), "not exactly the potential standby")
		all.holds(t, "replica.db.local.", time.Second, exactly(r1.IP, r2.IP), "not every replica")
		hosts := async.hostStates(t)
		if h := hosts[syncNode.Addr()]; !h.Sync || h.SyncUnsure {
			t.Errorf("the synchronous standby %s: %+v", syncNode.Addr(), h)
		}
		if h := hosts[potential.Addr()]; h.Sync || h.SyncUnsure {
			t.Errorf("the potential standby %s: %+v", potential.Addr(), h)
		}
		if again := standbyRows(t, primary); !slices.Equal(again, rows) {
			t.Fatalf("the primary changed its synchronous standby during the test: %+v, then %+v", rows, again)
		}
	})
}

// Item 4(b): an old primary re-cloned from its successor, probed by a
// pg_monitor role that cannot read timeline history files. A write lost in
// the failover (made on timeline 1 after the replica stopped) must never
// be vouched for by a timeline token on the re-cloned host, although its
// replay on timeline 2 is past the lost position. The old rule took the
// last position it had seen the host write on timeline 1 as the point
// where timeline 1 ended, which lies past the lost write.
func TestReclonedOldPrimaryLacksLostWrite(t *testing.T) {
	t.Parallel()
	ips := pgtest.Addrs(t).IPs(2)
	pg := pgtest.New(t, pgtest.Options{IPs: ips})
	old, successor := pg.Nodes[0], pg.Nodes[1]
	old.Exec(t, "CREATE TABLE t (id serial PRIMARY KEY, v text); CREATE ROLE watcher LOGIN IN ROLE pg_monitor")
	e := attach(t, pg, envOptions{DSN: "user=watcher dbname=postgres sslmode=disable"})
	e.waitFor(t, "replica.db.local.", []string{successor.IP})
	ctx := context.Background()

	// lost: written on timeline 1 while the successor is stopped, and seen
	// by pgdns on the old primary.
	if err := successor.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	lost := e.insertAndTakeLSN(t, old)
	e.waitHost(t, old.Addr(), "was seen writing the lost row", func(h hostState) bool {
		return h.Role == "primary" && replayedPast(t, h, lost)
	})
	if err := old.Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}

	// The successor takes over on timeline 2, which forks before lost, and
	// writes until its position passes lost.
	if err := successor.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := successor.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		successor.Exec(t, "INSERT INTO t (v) SELECT repeat('y', 1000) FROM generate_series(1, 500)")
		var past bool
		successor.Query(t, "SELECT pg_current_wal_lsn() > '"+strings.Replace(lost, "-", "/", 1)+"'::pg_lsn", &past)
		if past {
			break
		}
		if i == 100 {
			t.Fatal("timeline 2 never passed the lost position")
		}
	}
	e.waitFor(t, "primary.db.local.", []string{successor.IP})

	// The old primary comes back as a fresh copy of the successor.
	if err := old.Reclone(ctx, successor); err != nil {
		t.Fatal(err)
	}
	e.waitHost(t, old.Addr(), "came back a replica on timeline 2 past the lost position", func(h hostState) bool {
		return h.Role == "replica" && h.Timeline != nil && *h.Timeline == 2 && replayedPast(t, h, lost)
	})
	// Without a timeline the lost position looks replayed: positions on
	// timeline 2 are past it, though the row is not there. Where timeline
	// 1 ended is not known (the successor restarted: no switch watched,
	// no history file read), so it may be anywhere below where pgdns saw
	// the old primary insert, and no name answers a token without a
	// timeline up to there (review 9, R9-2: the re-cloned host was
	// answered, without the row).
	e.holds(t, "lsn-"+lost+".replica.db.local.", 3*time.Second, exactly(), "a host that lacks the write lost with timeline 1")
	e.holds(t, "lsn-"+lost+"-t1.replica.db.local.", 3*time.Second, exactly(), "a host that lacks the write lost with timeline 1")
	var rows int
	old.Query(t, "SELECT count(*) FROM t WHERE v <> repeat('y', 1000)", &rows)
	if rows != 0 {
		t.Fatalf("the re-cloned host has %d rows of timeline 1's lost write", rows)
	}
}
