package test

// Tests of what the lag and byte filters prove (docs/probe.md, "Lag, computed
// right"), against real PostgreSQL: each answer is judged against the
// commits the answered replica surely lacked at the sample pgdns judged it
// by, read back from the replica itself.

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// evidence is one host's TXT record in an answer.
type evidence struct {
	host    string // IP
	lagMS   string // as given: a number or "unknown"
	bytes   string
	ageMS   int64
	sampled time.Time // at the earliest: when the question was sent, minus age_ms
}

// answerEvidence asks name's TXT over TCP and reads each host's record.
// sampled is a lower bound of the time the host's probe data is from:
// the answer was built after sent, and age_ms counts back from then.
func (e *env) answerEvidence(t *testing.T, name string) []evidence {
	t.Helper()
	sent := time.Now()
	m := e.query(t, "tcp", name, dns.TypeTXT)
	if m.Rcode != dns.RcodeSuccess {
		t.Fatalf("%s TXT: rcode %s", name, dns.RcodeToString[m.Rcode])
	}
	var out []evidence
	for _, rr := range m.Answer {
		txt, ok := rr.(*dns.TXT)
		if !ok {
			continue
		}
		var ev evidence
		for _, f := range strings.Fields(strings.Join(txt.Txt, "")) {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "host":
				ev.host, _, _ = strings.Cut(v, ":")
			case "lag_ms":
				ev.lagMS = v
			case "lag_bytes":
				ev.bytes = v
			case "age_ms":
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatalf("%s: age_ms %q", name, v)
				}
				ev.ageMS = n
			}
		}
		ev.sampled = sent.Add(-time.Duration(ev.ageMS) * time.Millisecond)
		out = append(out, ev)
	}
	return out
}

// hasRow reports whether conn's server holds row id of table t.
func hasRow(t *testing.T, conn *pgx.Conn, id int) bool {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM t WHERE id = $1", id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// Case 1 of issue 22: with synchronous_commit off a commit is visible on
// the primary before its WAL is written, let alone streamed. A replica
// lacking it must not pass lag-50ms once the commit is more than 50 ms
// older than the replica's sample, nor bytes-0b once the commit precedes
// the sample. Before pgdns sampled the primary's insert position, its WAL
// clock read the write position, which does not cover such a commit: both
// names answered replicas lacking it for seconds.
func TestAsyncCommitIsLag(t *testing.T) {
	t.Parallel()
	ips := pgtest.Addrs(t).IPs(3)
	pg := pgtest.New(t, pgtest.Options{IPs: ips, Conf: []string{
		"synchronous_commit = off",
		// The WAL writer writes and flushes asynchronous commits at
		// most this late: the window in which they are visible on the
		// primary and on no replica.
		"wal_writer_delay = 5s",
	}})
	primary := pg.Nodes[0]
	// The table commits synchronously: flushed, so streamed at once.
	primary.Exec(t, "SET synchronous_commit = on; CREATE TABLE t (id int PRIMARY KEY)")
	replicas := map[string]*pgx.Conn{}
	for _, n := range pg.Nodes[1:] {
		conn := n.Conn(t)
		if !testkit.Poll(10*time.Second, 20*time.Millisecond, func() bool {
			var ok bool
			return conn.QueryRow(context.Background(), "SELECT to_regclass('t') IS NOT NULL").Scan(&ok) == nil && ok
		}) {
			t.Fatalf("%s never replayed the table", n.Name)
		}
		replicas[n.IP] = conn
	}
	e := attach(t, pg, envOptions{})
	e.waitFor(t, "lag-50ms.replica.db.local.", ips[1:])
	e.waitFor(t, "bytes-0b.replica.db.local.", ips[1:])
	writer := primary.Conn(t)
	// The bounds (docs/probe.md), each as of the end of the replica's probe:
	// lag-50ms promises the replica lacks no commit older than 50 ms,
	// bytes-0b that it lacks nothing the primary had inserted. A few
	// milliseconds absorb timer granularity and age_ms's truncation.
	bounds := map[string]time.Duration{
		"lag-50ms.replica.db.local.": 50*time.Millisecond + 3*time.Millisecond,
		"bytes-0b.replica.db.local.": 3 * time.Millisecond,
	}
	var violations []string
	lacked := 0 // checks in which a replica surely lacked the commit past a bound
	for id := 1; id <= 6 && lacked < 10; id++ {
		if _, err := writer.Exec(context.Background(), "INSERT INTO t VALUES ($1)", id); err != nil {
			t.Fatal(err)
		}
		committed := time.Now() // the commit was visible by now
		// Until every replica has the row, at most 6 s: a replica still
		// lacking it then is what the lacked count already says.
		testkit.Poll(6*time.Second, 20*time.Millisecond, func() bool {
			for name, bound := range bounds {
				for _, ev := range e.answerEvidence(t, name) {
					if ev.sampled.Sub(committed) > bound && !hasRow(t, replicas[ev.host], id) {
						violations = append(violations, name+" answered "+ev.host+", which lacks row "+strconv.Itoa(id)+
							" committed "+ev.sampled.Sub(committed).Round(time.Millisecond).String()+" before its sample (lag_ms="+ev.lagMS+" lag_bytes="+ev.bytes+")")
					}
				}
			}
			all := true
			for _, conn := range replicas {
				if !hasRow(t, conn, id) {
					all = false
					if time.Since(committed) > time.Second+100*time.Millisecond {
						lacked++ // every sample pgdns has now is well after the commit
					}
				}
			}
			return all
		})
	}
	for i, v := range violations {
		if i == 10 {
			t.Errorf("... and %d more", len(violations)-10)
			break
		}
		t.Error(v)
	}
	if lacked < 3 {
		t.Fatalf("replicas lacked a commit more than a second old in only %d checks: the test saw no asynchronous commit window", lacked)
	}
	t.Logf("%d checks of a replica lacking a commit over a second old, %d wrong answers", lacked, len(violations))
}

// Case 2 of issue 22: a probe's values were read at an unknown moment of
// its round trip. A replica truly 1.5 s behind (recovery_min_apply_delay),
// probed through a proxy that holds what pgdns sends it for 1.5 s, was
// read at the end of each round trip, while pgdns took the midpoint for
// the moment: lag_ms about 780, and lag-1s answered it. Its lag is now
// bounded from the probe's end, and lag-1s never answers it while it
// surely lacks a commit over a second old.
func TestOneSidedProbeDelayIsNoLag(t *testing.T) {
	t.Parallel()
	b := pgtest.Addrs(t)
	const apply = 1500 * time.Millisecond
	pg := pgtest.New(t, pgtest.Options{IPs: []string{b.IP(11), b.IP(12), b.IP(13)}})
	primary, prompt, delayed := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	delayed.Exec(t, "ALTER SYSTEM SET recovery_min_apply_delay = '1500ms'")
	delayed.Exec(t, "SELECT pg_reload_conf()")
	proxy := b.Addr(31, 5432) // the delayed replica as pgdns reaches it
	testkit.DelayProxy(t, proxy, delayed.Addr(), apply)
	// A probe through the proxy takes 1.5 s to connect and 1.5 s per query.
	e := attach(t, pg, envOptions{Timeout: "5s", Hosts: []string{primary.Addr(), prompt.Addr(), proxy}})
	delayedIP := b.IP(31)

	conn := primary.Conn(t)
	if _, err := conn.Exec(context.Background(), "CREATE TABLE t (id serial PRIMARY KEY, v text)"); err != nil {
		t.Fatal(err)
	}
	// Dense writes: the delayed replica always lacks the last 1.5 s of
	// commits.
	writes := writeTicks(t, conn, 3000, 10*time.Millisecond)
	e.waitFor(t, "lag-30s.replica.db.local.", []string{prompt.IP, delayedIP})
	// The writes must have flowed for longer than the apply delay before
	// the replica surely lacks commits over a second old.
	writesBegan := time.Now()
	time.Sleep(apply + time.Second)

	wrong, promptSeen, behind := 0, 0, 0
	var lags []string
	for range 30 {
		evs := e.answerEvidence(t, "lag-1s.replica.db.local.")
		answered := time.Now()
		if _, _, ok := writes.within(answered.Add(-apply+applyDelaySlack), answered.Add(-time.Second-applyDelaySlack)); ok {
			behind++ // the delayed replica lacks a commit over a second old now
		}
		for _, ev := range evs {
			if ev.host == prompt.IP {
				promptSeen++
				continue
			}
			// Its sample ended at X in (sent − age − 1ms, answered −
			// age]: it lacked every commit begun after X − 1.5 s, and
			// one of those ended before X − 1 s is over a second old.
			sampledLatest := answered.Add(-time.Duration(ev.ageMS) * time.Millisecond)
			if began, ended, ok := writes.within(sampledLatest.Add(-apply+applyDelaySlack),
				ev.sampled.Add(-time.Millisecond-time.Second-applyDelaySlack)); ok {
				wrong++
				lags = append(lags, ev.lagMS)
				if wrong == 1 {
					t.Logf("lag-1s.replica answered the replica 1.5 s behind (lag_ms=%s) although it lacked the commit made %v–%v before its sample",
						ev.lagMS, ev.sampled.Sub(ended).Round(time.Millisecond), ev.sampled.Sub(began).Round(time.Millisecond))
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if wrong > 0 {
		t.Errorf("lag-1s.replica answered the replica 1.5 s behind in %d of 30 lookups (lag_ms %v)", wrong, lags)
	}
	if behind < 10 {
		t.Fatalf("in only %d of 30 lookups (writes began %v before the first) had the delayed replica surely lacked a commit over a second old: the writer stalled, nothing was tested",
			behind, time.Since(writesBegan).Round(time.Millisecond))
	}
	if promptSeen == 0 {
		t.Errorf("the replica that keeps up never passed lag-1s (evidence %q)", e.txt(t, "any.db.local."))
	}
	t.Logf("the prompt replica passed lag-1s in %d of 30 lookups; the delayed one's evidence: %q", promptSeen, e.txt(t, "replica.db.local."))
}
