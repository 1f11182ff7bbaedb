package test

// Tests of the rules that keep answers true when things go wrong (docs/decisions.md,
// "How pgdns decides"), each against real PostgreSQL.

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// Rule 1: of two writable hosts the one on the higher timeline is the
// primary; on equal timelines there is no primary at all.
func TestSplitBrain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	p, r1, r2 := e.ip(0), e.ip(1), e.ip(2)
	ctx := context.Background()

	// The old primary keeps running while a replica is promoted.
	if err := e.pg.Nodes[1].Promote(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", []string{r1})
	// r2 still streams from the old primary, on timeline 1: set aside too.
	e.waitFor(t, "any.db.local.", []string{r1})
	for range 10 {
		if got := e.ips(t, "any.db.local."); slices.Contains(got, p) || slices.Contains(got, r2) {
			t.Fatalf("a host on the superseded timeline 1 was answered: %v", got)
		}
		time.Sleep(30 * time.Millisecond)
	}

	// A second promotion puts two writable hosts on timeline 2.
	if err := e.pg.Nodes[2].Promote(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", nil)
	e.waitFor(t, "prefer-replica.db.local.", nil)
	// Logged (and counted) just after the snapshot is in the table: wait
	// for the line, then give a second one 300 ms to show up.
	testkit.Eventually(t, 10*time.Second, 20*time.Millisecond, "the split brain logged", func() (string, bool) {
		logs := e.logs.String()
		return logs, strings.Contains(logs, "split brain: writable hosts on the same timeline")
	})
	time.Sleep(300 * time.Millisecond)
	if n := strings.Count(e.logs.String(), "split brain: writable hosts on the same timeline"); n != 1 {
		t.Errorf("split brain logged %d times:\n%s", n, e.logs)
	}
	_, metrics := e.get(t, http.DefaultClient, "/metrics", "")
	if !strings.Contains(metrics, `pgdns_split_brain_total{cluster="main"} 1`) {
		t.Error("split brain not counted in metrics")
	}

	// Resolved by hand: the second promoted host goes away.
	if err := e.pg.Nodes[2].Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", []string{r1})
}

// Rule 2: a host of another cluster, listed by mistake, is never answered.
func TestForeignHostIsNeverAnswered(t *testing.T) {
	t.Parallel()
	b := pgtest.Addrs(t)
	p, r1, r2, foreign := b.IP(11), b.IP(12), b.IP(13), b.IP(21)
	other := pgtest.New(t, pgtest.Options{IPs: []string{foreign}})
	pg := pgtest.New(t, pgtest.Options{IPs: []string{p, r1, r2}})
	e := attach(t, pg, envOptions{Extra: []string{other.Nodes[0].Addr()}})
	e.waitFor(t, "any.db.local.", []string{p, r1, r2})
	for range 10 {
		for _, name := range []string{"primary.db.local.", "any.db.local.", "prefer-replica.db.local."} {
			if slices.Contains(e.ips(t, name), foreign) {
				t.Fatalf("%s answered the foreign host", name)
			}
		}
		time.Sleep(30 * time.Millisecond)
	}
	if n := strings.Count(e.logs.String(), "is not the cluster's"); n != 1 {
		t.Errorf("foreign host logged %d times:\n%s", n, e.logs)
	}
	_, body := e.get(t, http.DefaultClient, "/v1/hosts", "")
	if !strings.Contains(body, `"addr":"`+foreign+`:5432"`) || !strings.Contains(body, "is not the cluster's") {
		t.Errorf("/v1/hosts does not explain the foreign host: %s", body)
	}
}

// Rule 3: hung, refusing and wrong-password hosts delay nobody, are never
// answered, and each says why in the logs once.
func TestBadHostsDelayNobody(t *testing.T) {
	t.Parallel()
	b := pgtest.Addrs(t)
	p, r1 := b.IP(11), b.IP(12)
	hung, refused := b.Addr(31, 5432), b.Addr(32, 5432)
	testkit.SilentListener(t, hung)
	locked := pgtest.New(t, pgtest.Options{IPs: []string{b.IP(41)},
		HBA: []string{"host all postgres 127.0.0.0/8 scram-sha-256"}})
	pg := pgtest.New(t, pgtest.Options{IPs: []string{p, r1}})
	// A 3 s deadline: at load 25 a SCRAM exchange with the locked host
	// took over 1 s, so its first failure was a time-out, not the password.
	e := attach(t, pg, envOptions{Interval: "250ms", Timeout: "3s",
		Extra: []string{hung, refused, locked.Nodes[0].Addr()}})

	// Wait until all three are down, then watch the good hosts' probe age.
	e.eventually(t, "/v1/hosts", "", func(_ int, body string) bool { return strings.Count(body, `"role":"down"`) == 3 })
	interval := e.cfg.Probe.Interval
	var worst time.Duration
	for range 15 {
		_, body := e.get(t, http.DefaultClient, "/v1/hosts", "")
		var v struct {
			Hosts []struct {
				Addr       string `json:"addr"`
				ProbeAgeMS int64  `json:"probe_age_ms"`
			} `json:"hosts"`
		}
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatal(err)
		}
		for _, h := range v.Hosts[:2] {
			worst = max(worst, time.Duration(h.ProbeAgeMS)*time.Millisecond)
		}
		if got := e.ips(t, "any.db.local."); !slices.Equal(got, []string{p, r1}) {
			t.Fatalf("any.db.local = %v", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A good host's probe queued behind a hung one's would be as old as
	// the 3 s timeout; a probe of a real server at load 20 may take a few
	// intervals of its own, so the bound is half the timeout, not two
	// intervals (a timing figure, which belongs to the bench).
	timeout := e.cfg.Probe.Timeout
	t.Logf("worst probe age of the good hosts while three hosts fail: %v (interval %v, timeout %v)", worst, interval, timeout)
	if worst >= timeout/2 {
		t.Errorf("probe age of good hosts reached %v, want < timeout/2 = %v: probes queued behind the failing hosts'", worst, timeout/2)
	}
	logs := e.logs.String()
	for host, why := range map[string]string{
		hung: "timed out", refused: "refused", locked.Nodes[0].Addr(): "password",
	} {
		var lines []string
		for _, l := range strings.Split(logs, "\n") {
			if strings.Contains(l, "host="+host) {
				lines = append(lines, l)
			}
		}
		if len(lines) != 1 || !strings.Contains(lines[0], why) {
			t.Errorf("%s logged %d times, want once with %q: %q", host, len(lines), why, lines)
		}
	}
}

// Rule 5: a primary idle for 10 s keeps caught-up replicas in
// lag-100ms.replica, probed at the default interval.
func TestIdlePrimaryTenSeconds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{Interval: "250ms"})
	r1, r2 := e.ip(1), e.ip(2)
	// lag-2s, not a tighter bound: a lag that grew with the idle time would
	// pass 2 s within the 10 s held here, while a loaded machine that delays
	// one probe by a few hundred milliseconds (a real, proven bound of 180-270
	// ms was seen at load 30) must not fail the test.
	e.waitFor(t, "lag-2s.replica.db.local.", []string{r1, r2})
	var got []string
	if n, ok := testkit.Holds(10*time.Second, 100*time.Millisecond, func() bool {
		got = e.ips(t, "lag-2s.replica.db.local.")
		return slices.Equal(got, []string{r1, r2})
	}); !ok {
		t.Fatalf("after %d checks of an idle primary lag-2s.replica = %v (%q)", n, got, e.txt(t, "any.db.local."))
	}
}

// Rule 6: a host whose last good probe is too old cannot be vouched for;
// without a primary no lag can be, but LSNs still can.
func TestStaleKnowledge(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	r1, r2 := e.ip(1), e.ip(2)
	e.waitFor(t, "lag-10s.replica.db.local.", []string{r1, r2})

	// A frozen replica accepts connections and answers nothing: its
	// probes time out one by one, but it leaves the answers as soon as its
	// data is older than max_fails×interval + timeout.
	frozen := e.pg.Nodes[2]
	if err := frozen.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	thawed := false
	defer func() {
		if !thawed {
			_ = frozen.Signal(syscall.SIGCONT)
		}
	}()
	took := e.waitFor(t, "lag-10s.replica.db.local.", []string{r1})
	t.Logf("a frozen replica left lag-10s.replica after %v (bound %v)", took,
		time.Duration(e.cfg.Probe.MaxFails)*e.cfg.Probe.Interval+e.cfg.Probe.Timeout)
	e.waitFor(t, "replica.db.local.", []string{r1})
	if err := frozen.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	thawed = true
	e.waitFor(t, "lag-10s.replica.db.local.", []string{r1, r2})

	lsn := e.insertAndTakeLSN(t, e.pg.Nodes[0])
	e.waitFor(t, "lsn-"+lsn+".replica.db.local.", []string{r1, r2})
	if err := e.pg.Nodes[0].Stop(context.Background(), "immediate"); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", nil)
	// No primary: no lag can be vouched for, replay positions still can.
	e.waitFor(t, "lag-10s.replica.db.local.", nil)
	e.waitFor(t, "bytes-1gb.replica.db.local.", nil)
	e.waitFor(t, "lsn-"+lsn+".replica.db.local.", []string{r1, r2})
	e.waitFor(t, "replica.db.local.", []string{r1, r2})
}

// Rule 7: replicas: async leaves synchronous standbys out of replica
// answers; replicas: all keeps them.
func TestSynchronousStandbys(t *testing.T) {
	t.Parallel()
	ips := pgtest.Addrs(t).IPs(3)
	p, r1, r2 := ips[0], ips[1], ips[2]
	pg := pgtest.New(t, pgtest.Options{IPs: []string{p, r1, r2}})
	syncName := pg.Nodes[1].Name
	pg.Nodes[0].Exec(t, "ALTER SYSTEM SET synchronous_standby_names = '"+syncName+"'")
	pg.Nodes[0].Exec(t, "SELECT pg_reload_conf()")

	async := attach(t, pg, envOptions{Replicas: "async"})
	all := attach(t, pg, envOptions{Replicas: "all"})
	async.waitFor(t, "replica.db.local.", []string{r2})
	async.waitFor(t, "lag-1s.replica.db.local.", []string{r2})
	async.waitFor(t, "any.db.local.", []string{p, r2})
	all.waitFor(t, "replica.db.local.", []string{r1, r2})
	_, body := all.get(t, http.DefaultClient, "/v1/resolve?name=replica", "")
	if !strings.Contains(body, `"addr":"`+r1+`:5432","ip":"`+r1+`","role":"replica","alive":true`) {
		t.Fatalf("resolve: %s", body)
	}
	// Until r1 has replayed where the primary stood at the probe after the
	// one that first showed it synchronous (dc67293), its reason says so
	// ("sync unknown: synchronous only since ..."), and it is left out all
	// the same; then the plain reason.
	testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "r1 left out as a synchronous standby", func() (string, bool) {
		_, body := async.get(t, http.DefaultClient, "/v1/resolve?name=replica", "")
		return body, strings.Contains(body, `"reason":"synchronous standby (replicas: async)"`)
	})

	// Make the other replica the synchronous one: the answers follow.
	pg.Nodes[0].Exec(t, "ALTER SYSTEM SET synchronous_standby_names = '"+pg.Nodes[2].Name+"'")
	pg.Nodes[0].Exec(t, "SELECT pg_reload_conf()")
	async.waitFor(t, "replica.db.local.", []string{r1})
}

// Rule 8: read-your-writes without falling back to the primary. The same
// cluster is served by two pgdns, one answering at once (lsn_wait 0), one
// waiting up to 20ms for fresh replay positions. Every replica answered
// must really have the row.
func TestReadYourWritesWithLSNWait(t *testing.T) {
	t.Parallel()
	ips := pgtest.Addrs(t).IPs(3)
	p, r1, r2 := ips[0], ips[1], ips[2]
	pg := pgtest.New(t, pgtest.Options{IPs: []string{p, r1, r2}})
	pg.Nodes[0].Exec(t, "CREATE TABLE ryw (id bigint PRIMARY KEY)")
	now := attach(t, pg, envOptions{Interval: "250ms", LSNWait: "0s"})
	wait := attach(t, pg, envOptions{Interval: "250ms", LSNWait: "20ms"})
	now.waitFor(t, "replica.db.local.", []string{r1, r2})
	wait.waitFor(t, "replica.db.local.", []string{r1, r2})

	ctx := context.Background()
	writer := pg.Nodes[0].Conn(t)
	readers := map[string]*pgx.Conn{}
	for _, n := range pg.Nodes {
		readers[n.IP] = n.Conn(t)
	}
	const rounds = 100
	byReplica := map[string]int{}
	var added []time.Duration
	for i := range rounds {
		name := "lsn-" + writeAndTakeLSN(t, writer, "INSERT INTO ryw VALUES ($1)", i) + ".prefer-replica.db.local."
		order := []*env{now, wait}
		if i%2 == 1 {
			order = []*env{wait, now}
		}
		for _, e := range order {
			start := time.Now()
			m := e.query(t, "udp", name, dns.TypeA)
			took := time.Since(start)
			ips := answerIPs(t, m)
			if len(ips) == 0 {
				t.Fatalf("%s answered nothing", name)
			}
			if e == wait {
				added = append(added, took)
			}
			if slices.Equal(ips, []string{p}) {
				continue // the fallback
			}
			label := "wait"
			if e == now {
				label = "now"
			}
			byReplica[label]++
			for _, ip := range ips {
				var found bool
				if err := readers[ip].QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM ryw WHERE id = $1)", i).Scan(&found); err != nil {
					t.Fatal(err)
				}
				if !found {
					t.Fatalf("stale read: %s answered %s, which lacks row %d", name, ip, i)
				}
			}
		}
	}
	slices.Sort(added)
	t.Logf("read-your-writes right after commit, %d lookups each: by a replica %d%% with lsn_wait 0, %d%% with lsn_wait 20ms; lookup time with the wait p50 %v p99 %v",
		rounds, byReplica["now"]*100/rounds, byReplica["wait"]*100/rounds, added[len(added)/2], added[len(added)*99/100])
	if byReplica["wait"] < rounds/2 || byReplica["wait"] <= byReplica["now"] {
		t.Errorf("lsn_wait answered by a replica %d of %d times (without it %d)", byReplica["wait"], rounds, byReplica["now"])
	}
}

// Rule 9: an LSN with a timeline names hosts whose history still holds it.
// Two pgdns watch the same failover: one probing as superuser (it reads
// timeline history files), one as pg_monitor (it records the switches it
// sees). Both must agree, except where the monitor lacks evidence and
// fails closed.
func TestTimelineTokens(t *testing.T) {
	t.Parallel()
	ips := pgtest.Addrs(t).IPs(3)
	p, r1, r2 := ips[0], ips[1], ips[2]
	pg := pgtest.New(t, pgtest.Options{IPs: []string{p, r1, r2}})
	primary, promoted, follower := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	primary.Exec(t, "CREATE TABLE tl (v text); CREATE ROLE watcher LOGIN IN ROLE pg_monitor")
	super := attach(t, pg, envOptions{})
	monitor := attach(t, pg, envOptions{DSN: "user=watcher dbname=postgres sslmode=disable"})
	ctx := context.Background()

	// kept: written before the failover, on both replicas.
	kept := super.insertAndTakeLSN(t, primary)
	super.waitFor(t, "lsn-"+kept+".replica.db.local.", []string{r1, r2})
	monitor.waitFor(t, "lsn-"+kept+".replica.db.local.", []string{r1, r2})

	// lost: written on timeline 1 while both replicas were stopped; the
	// promotion forks timeline 2 off before it.
	for _, n := range []*pgtest.Node{promoted, follower} {
		if err := n.Stop(ctx, "fast"); err != nil {
			t.Fatal(err)
		}
	}
	lost := super.insertAndTakeLSN(t, primary)
	primaryInsertPast(t, super, lost) // each pgdns saw the primary write it
	primaryInsertPast(t, monitor, lost)
	if err := primary.Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*pgtest.Node{promoted, follower} {
		if err := n.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := promoted.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	follower.Follow(t, promoted)
	// Enough writes on timeline 2 that positions pass the lost one.
	promoted.Exec(t, "INSERT INTO tl SELECT repeat('y', 1000) FROM generate_series(1, 500)")
	later := super.insertAndTakeLSN(t, promoted)

	for _, e := range []*env{super, monitor} {
		e.waitFor(t, "primary.db.local.", []string{r1})
		e.waitFor(t, "lsn-"+later+"-t2.replica.db.local.", []string{r2})
		// With a timeline, nobody has the lost LSN. Without one it looks
		// replayed (positions on timeline 2 are past it) unless pgdns
		// knows where timeline 1 ended: then it lies between that end
		// and where pgdns saw the primary insert, and no name answers it
		// (review 7, H4). Without a history file (and the replicas
		// restarted, so no switch was watched) the end is not known.
		e.holds(t, "lsn-"+lost+"-t1.replica.db.local.", time.Second, exactly(), "a host that lacks the lost write")
		if e == monitor {
			// Unless the monitor learned where timeline 1 ended after all
			// (a switch watched, by the timing of its probes), when it
			// refuses it: the documented limit, never another host.
			e.holds(t, "lsn-"+lost+".replica.db.local.", time.Second,
				func(got []string) bool { return len(got) == 0 || slices.Equal(got, []string{r2}) }, "not r2 or nobody")
		} else {
			e.holds(t, "lsn-"+lost+".replica.db.local.", time.Second, exactly(), "a host that lacks the lost write")
		}
		// Timeline 2's history file proves the write lost: no name
		// answers it (review 6, G4), the new primary included. Without a
		// history file where timeline 1 ended is not known: the new
		// primary does not prove the write either, and no name answers
		// it (review 9, R9-2: prefer-replica fell back to the primary,
		// which lacks the write).
		e.holds(t, "lsn-"+lost+"-t1.prefer-replica.db.local.", time.Second, exactly(), "the new primary, which lacks the lost write")
		if e == monitor {
			// Both replicas restarted during the failover and pg_monitor
			// cannot read history files: no evidence of where timeline 1
			// ended, so the kept write may fail closed, but never name
			// another host.
			e.holds(t, "lsn-"+kept+"-t1.replica.db.local.", time.Second,
				func(got []string) bool { return len(got) == 0 || slices.Equal(got, []string{r2}) }, "not r2 or nobody")
		} else {
			e.waitFor(t, "lsn-"+kept+"-t1.replica.db.local.", []string{r2})
		}
		e.waitFor(t, "lsn-"+later+"-t3.replica.db.local.", nil)
	}
	var hosts struct {
		Hosts []struct {
			Addr     string `json:"addr"`
			Timeline int    `json:"timeline"`
		} `json:"hosts"`
	}
	_, body := super.get(t, http.DefaultClient, "/v1/hosts", "")
	if err := json.Unmarshal([]byte(body), &hosts); err != nil || hosts.Hosts[1].Timeline != 2 || hosts.Hosts[2].Timeline != 2 {
		t.Fatalf("timelines after the failover: %s", body)
	}
}
