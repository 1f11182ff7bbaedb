package test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/app/apptest"
	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// TestRolesFiltersAndLSN runs pgdns against a real primary and two
// streaming replicas and checks every role, alias and filter.
func TestRolesFiltersAndLSN(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	p, r1, r2 := e.ip(0), e.ip(1), e.ip(2)
	primary, paused := e.pg.Nodes[0], e.pg.Nodes[2]
	primary.Exec(t, "CREATE TABLE t (id serial PRIMARY KEY, v text)")
	e.waitFor(t, "replica.db.local.", []string{r1, r2})

	t.Run("roles and aliases over UDP and TCP", func(t *testing.T) {
		for name, want := range map[string][]string{
			"primary.db.local.":        {p},
			"master.db.local.":         {p},
			"PRIMARY.DB.LOCAL.":        {p},
			"primary.main.db.local.":   {p},
			"replica.db.local.":        {r1, r2},
			"standby.db.local.":        {r1, r2},
			"prefer-replica.db.local.": {r1, r2},
			"prefer-standby.db.local.": {r1, r2},
			"any.db.local.":            {p, r1, r2},
		} {
			for _, network := range []string{"udp", "tcp"} {
				m := e.query(t, network, name, dns.TypeA)
				if got := answerIPs(t, m); !slices.Equal(got, want) {
					t.Errorf("%s %s = %v, want %v", network, name, got, want)
				}
				if !m.Authoritative || m.Answer[0].Header().Ttl != 1 {
					t.Errorf("%s %s: AA %v TTL %d", network, name, m.Authoritative, m.Answer[0].Header().Ttl)
				}
			}
		}
	})

	t.Run("an idle primary keeps caught-up replicas at lag 0", func(t *testing.T) {
		// A few seconds without writes: a lag computed from the last
		// commit's timestamp would exceed the bound by now.
		e.waitFor(t, "lag-500ms.replica.db.local.", []string{r1, r2})
		var got []string
		if _, ok := testkit.Holds(3*time.Second, 100*time.Millisecond, func() bool {
			got = e.ips(t, "lag-500ms.replica.db.local.")
			return slices.Equal(got, []string{r1, r2})
		}); !ok {
			t.Fatalf("lag-500ms.replica on an idle primary = %v (TXT %v)", got, e.txt(t, "replica.db.local."))
		}
		// Lag is a proven bound: at most the time between the replica's
		// sample and the primary's last one before it, a probe round
		// trip, never the seconds since the last commit.
		// Polled, not read once: under load one probe round may come late,
		// and its evidence is then honestly wider for a moment (lag_bytes
		// unknown while the primary's sample is older than the replica's).
		var bad string
		if !testkit.Poll(10*time.Second, 100*time.Millisecond, func() bool {
			bad = ""
			txts := e.txt(t, "replica.db.local.")
			if len(txts) != 2 {
				bad = strings.Join(txts, "; ")
				return false
			}
			for _, txt := range txts {
				var ms int
				i := strings.Index(txt, " lag_ms=")
				if i < 0 {
					bad = txt
					return false
				}
				if _, err := fmt.Sscanf(txt[i:], " lag_ms=%d lag_bytes=0 ", &ms); err != nil || ms >= 100 {
					bad = txt
					return false
				}
			}
			return true
		}) {
			t.Errorf("idle replica evidence %q: want lag_ms under 100 and lag_bytes=0", bad)
		}
	})

	t.Run("dig, a real client", func(t *testing.T) {
		dig := testkit.RequireTool(t, "dig")
		host, port, _ := net.SplitHostPort(e.app.DNSAddr())
		for name, want := range map[string]string{
			"primary.db.local":           p,
			"lag-500ms.replica.db.local": r1 + "\n" + r2,
		} {
			for _, transport := range []string{"+notcp", "+tcp"} {
				out, err := exec.Command(dig, "@"+host, "-p", port, transport, "+short", name).Output()
				if err != nil {
					t.Fatalf("dig %s: %v", name, err)
				}
				lines := strings.Fields(string(out))
				slices.Sort(lines)
				if got := strings.Join(lines, "\n"); got != want {
					t.Errorf("dig %s %s = %q, want %q", transport, name, got, want)
				}
			}
		}
		out, err := exec.Command(dig, "@"+host, "-p", port, "nope.db.local").Output()
		if err != nil || !strings.Contains(string(out), "status: NXDOMAIN") || !strings.Contains(string(out), "flags: qr aa") {
			t.Errorf("dig nope.db.local: %v\n%s", err, out)
		}
	})

	t.Run("TXT evidence", func(t *testing.T) {
		txt := e.txt(t, "any.db.local.")
		if len(txt) != 3 {
			t.Fatalf("TXT = %q", txt)
		}
		for i, want := range []string{"host=" + p + ":5432 role=primary lag_ms=0 lag_bytes=0 replay_lsn=",
			"host=" + r1 + ":5432 role=replica ", "host=" + r2 + ":5432 role=replica "} {
			if !strings.HasPrefix(txt[i], want) || !strings.Contains(txt[i], " age_ms=") {
				t.Errorf("TXT %q does not start with %q", txt[i], want)
			}
		}
	})

	// From here on the second replica does not replay: its position, time
	// and byte lag fall behind while the first replica keeps up.
	paused.Exec(t, "SELECT pg_wal_replay_pause()")
	lsn := e.insertAndTakeLSN(t, primary)

	t.Run("lsn filter answers only replicas that have replayed it", func(t *testing.T) {
		e.waitFor(t, "lsn-"+lsn+".replica.db.local.", []string{r1})
		e.waitFor(t, "lsn-"+lsn+".prefer-replica.db.local.", []string{r1})
		e.waitFor(t, "lsn-"+lsn+".any.db.local.", []string{p, r1})
		e.waitFor(t, "lsn-"+lsn+".primary.db.local.", []string{p})
		m := e.query(t, "udp", "lsn-ffffffff-0.replica.db.local.", dns.TypeA)
		if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 || len(m.Ns) != 1 || m.Ns[0].Header().Rrtype != dns.TypeSOA {
			t.Fatalf("an LSN nobody has: %v", m)
		}
		if got := e.ips(t, "lsn-ffffffff-0.prefer-replica.db.local."); len(got) != 0 {
			t.Fatalf("prefer-replica with an LSN beyond the primary's reach = %v, want none: the primary provably lacks it", got)
		}
	})

	t.Run("lag and byte filters drop the replica that stopped replaying", func(t *testing.T) {
		// About 4 MiB of WAL, then steady small writes so that time lag
		// has something to measure.
		primary.Exec(t, "INSERT INTO t (v) SELECT repeat('x', 1000) FROM generate_series(1, 3000)")
		steadyWrites(t, primary.Conn(t))

		e.waitFor(t, "bytes-1mb.replica.db.local.", []string{r1})
		e.waitFor(t, "bytes-1gb.replica.db.local.", []string{r1, r2})
		e.waitFor(t, "lag-500ms.replica.db.local.", []string{r1})
		e.waitFor(t, "lag-3600s.replica.db.local.", []string{r1, r2})
		e.waitFor(t, "lag-500ms.bytes-1gb.replica.db.local.", []string{r1})
		e.waitFor(t, "lsn-"+lsn+".lag-3600s.replica.db.local.", []string{r1})
		e.waitFor(t, "lag-500ms.any.db.local.", []string{p, r1})

		// The time lag of the paused replica keeps growing.
		first := lagOf(t, e.txt(t, "replica.db.local."), r2)
		time.Sleep(time.Second)
		if second := lagOf(t, e.txt(t, "replica.db.local."), r2); second <= first {
			t.Fatalf("lag of a paused replica went from %dms to %dms", first, second)
		}
	})

	paused.Exec(t, "SELECT pg_wal_replay_resume()")
	t.Run("a resumed replica comes back", func(t *testing.T) {
		e.waitFor(t, "lag-500ms.replica.db.local.", []string{r1, r2})
		e.waitFor(t, "lsn-"+lsn+".replica.db.local.", []string{r1, r2})
	})

	t.Run("rcodes", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			qtype uint16
			rcode int
			aa    bool
			soa   bool
		}{
			{"nope.db.local.", dns.TypeA, dns.RcodeNameError, true, true},
			{"primary.nope.db.local.", dns.TypeA, dns.RcodeNameError, true, true},
			{"main.db.local.", dns.TypeA, dns.RcodeSuccess, true, true}, // an empty non-terminal
			{"db.local.", dns.TypeAXFR, dns.RcodeRefused, false, false},
			{"lag-5.replica.db.local.", dns.TypeA, dns.RcodeNameError, true, true},
			{"primary.db.local.", dns.TypeMX, dns.RcodeSuccess, true, true},
			{"primary.db.local.", dns.TypeAAAA, dns.RcodeSuccess, true, true},
			{"example.com.", dns.TypeA, dns.RcodeRefused, false, false},
		} {
			m := e.query(t, "udp", tc.name, tc.qtype)
			hasSOA := len(m.Ns) == 1 && m.Ns[0].Header().Rrtype == dns.TypeSOA
			if m.Rcode != tc.rcode || m.Authoritative != tc.aa || hasSOA != tc.soa || len(m.Answer) != 0 {
				t.Errorf("%s %s: %s AA %v SOA %v answers %d", tc.name, dns.TypeToString[tc.qtype],
					dns.RcodeToString[m.Rcode], m.Authoritative, hasSOA, len(m.Answer))
			}
		}
	})
}

// lagOf reads lag_ms of host ip from TXT evidence.
func lagOf(t *testing.T, txts []string, ip string) int {
	t.Helper()
	for _, txt := range txts {
		if !strings.HasPrefix(txt, "host="+ip+":") {
			continue
		}
		for _, f := range strings.Fields(txt) {
			if v, ok := strings.CutPrefix(f, "lag_ms="); ok {
				var n int
				for _, c := range v {
					if c < '0' || c > '9' {
						t.Fatalf("lag of %s is %q", ip, v)
					}
					n = n*10 + int(c-'0')
				}
				return n
			}
		}
	}
	t.Fatalf("no evidence for %s in %q", ip, txts)
	return 0
}

// TestStoppedReplicaAndPromotion stops a replica, then the primary, and
// promotes the remaining replica.
func TestStoppedReplicaAndPromotion(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	r1, r2 := e.ip(1), e.ip(2)
	e.waitFor(t, "replica.db.local.", []string{r1, r2})
	ctx := context.Background()

	bound := time.Duration(e.cfg.Probe.MaxFails)*e.cfg.Probe.Interval + e.cfg.Probe.Timeout
	if err := e.pg.Nodes[2].Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	took := e.waitFor(t, "replica.db.local.", []string{r1})
	t.Logf("a stopped replica left the answers after %v (bound max_fails×interval+timeout = %v)", took, bound)
	if took > bound+time.Second { // a second of slack for a loaded machine
		t.Errorf("a stopped replica stayed in answers for %v, bound %v", took, bound)
	}

	if err := e.pg.Nodes[0].Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", nil)
	if err := e.pg.Nodes[1].Promote(ctx); err != nil {
		t.Fatal(err)
	}
	took = e.waitFor(t, "primary.db.local.", []string{r1})
	t.Logf("the promoted replica was answered as primary %v after pg_ctl promote returned", took)
	e.waitFor(t, "replica.db.local.", nil)
	e.waitFor(t, "prefer-replica.db.local.", []string{r1})
	// The pg-status endpoints follow too: never the old primary.
	for _, path := range []string{"/master", "/replica", "/sync_by_time"} {
		if code, body := e.get(t, http.DefaultClient, path, ""); code != 200 || body != r1 {
			t.Errorf("after failover %s = %d %q, want %s", path, code, body, r1)
		}
	}
	if txt := e.txt(t, "primary.db.local."); len(txt) != 1 || !strings.Contains(txt[0], "role=primary") {
		t.Fatalf("evidence after promotion: %q", txt)
	}
}

// TestServfailUntilFirstRound: before every host has been probed once,
// role names get SERVFAIL; after, a valid name with no live host gets
// NODATA. A host that hangs holds up only its own probe.
func TestServfailUntilFirstRound(t *testing.T) {
	t.Parallel()
	b := pgtest.Addrs(t)
	hung := testkit.SilentListener(t, b.Addr(1, 0))
	a, _, _ := apptest.Start(t, `
dns:
  listen: 127.0.0.1:0
http:
  listen: ""
probe:
  interval: 100ms
  timeout: 1500ms
  dsn: "user=postgres sslmode=disable"
clusters:
  main:
    hosts: [`+hung.Addr().String()+`, `+b.Addr(2, 1)+`]
`)
	m := query(t, "udp", a.DNSAddr(), "primary.db.local.", dns.TypeA)
	if m.Rcode != dns.RcodeServerFailure {
		t.Fatalf("before the first round: %s", dns.RcodeToString[m.Rcode])
	}
	if m := query(t, "udp", a.DNSAddr(), "db.local.", dns.TypeSOA); m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 {
		t.Fatalf("SOA before the first round: %v", m)
	}
	testkit.Poll(10*time.Second, 50*time.Millisecond, func() bool {
		m = query(t, "udp", a.DNSAddr(), "primary.db.local.", dns.TypeA)
		return m.Rcode != dns.RcodeServerFailure
	})
	if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 || len(m.Ns) != 1 {
		t.Fatalf("after the first round with no live host: %v", m)
	}
}

// Host names in the config are resolved by pgdns; answers carry the
// address it connected to.
func TestHostNamesAreResolved(t *testing.T) {
	t.Parallel()
	// localhost is 127.0.0.1, outside every block: the port is the block's.
	port := pgtest.Addrs(t).Port()
	host := "localhost:" + strconv.Itoa(port)
	pg := pgtest.New(t, pgtest.Options{IPs: []string{"127.0.0.1"}, Port: port})
	a, _, _ := apptest.Start(t, `
dns: {listen: "127.0.0.1:0"}
http: {listen: ""}
probe: {interval: 100ms, dsn: "user=postgres dbname=postgres sslmode=disable"}
clusters:
  main:
    hosts: [`+host+`]
`)
	e := &env{pg: pg, app: a}
	e.waitFor(t, "primary.db.local.", []string{"127.0.0.1"})
	if txt := e.txt(t, "primary.db.local."); len(txt) != 1 || !strings.HasPrefix(txt[0], "host="+host+" role=primary") {
		t.Fatalf("evidence %q", txt)
	}
}
