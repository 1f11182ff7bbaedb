package test

// libpq, the client every PostgreSQL driver but a few is built on, finding
// hosts through pgdns via the system resolver: /etc/resolv.conf, port 53.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// resolverNS is a way to run programs whose /etc/resolv.conf points at one
// pgdns: a private mount namespace per command (unshare -m), so the
// machine's own resolver is never touched.
type resolverNS struct {
	conf    string
	psqlBin string
}

func newResolverNS(t *testing.T, dnsIP string) *resolverNS {
	t.Helper()
	return newResolverConf(t, "nameserver "+dnsIP+"\noptions timeout:1 attempts:2\n")
}

// newResolverConf is newResolverNS with a whole resolv.conf of its own.
func newResolverConf(t *testing.T, resolvConf string) *resolverNS {
	t.Helper()
	testkit.RequireRoot(t, "pgdns on port 53 and a private mount namespace")
	testkit.RequireTool(t, "unshare")
	conf := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(conf, []byte(resolvConf), 0o644); err != nil {
		t.Fatal(err)
	}
	return &resolverNS{conf: conf, psqlBin: testkit.RequireTool(t, "psql")}
}

// psql runs one statement through libpq with dsn and returns its
// unaligned output.
func (r *resolverNS) psql(dsn, sql string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "-m", "sh", "-c",
		`mount --bind "$1" /etc/resolv.conf && exec "$2" "$3" -XAtqc "$4"`, "sh", r.conf, r.psqlBin, dsn, sql)
	cmd.Env = append(os.Environ(), "PGCONNECT_TIMEOUT=3", "PGUSER=postgres", "PGDATABASE=postgres", "PGSSLMODE=disable")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("psql %q: %w: %s", dsn, err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

func TestLibpqThroughTheSystemResolver(t *testing.T) {
	t.Parallel()
	b := pgtest.Addrs(t)
	dnsIP := b.IP(53)
	ns := newResolverNS(t, dnsIP)
	e := newEnvIn(t, b, envOptions{Interval: "250ms", LSNWait: "20ms", Listen: dnsIP + ":53"})
	p, r1, r2 := e.ip(0), e.ip(1), e.ip(2)
	e.pg.Nodes[0].Exec(t, "CREATE TABLE ryw (id bigint PRIMARY KEY)")
	e.waitFor(t, "lag-1s.replica.db.local.", []string{r1, r2})

	t.Run("writes land on the primary", func(t *testing.T) {
		out, err := ns.psql("host=primary.db.local target_session_attrs=read-write", "SELECT inet_server_addr()")
		if err != nil || out != p {
			t.Fatalf("got %q, %v; want %s", out, err, p)
		}
	})
	t.Run("bounded-lag reads land on a replica", func(t *testing.T) {
		for range 4 {
			out, err := ns.psql("host=lag-1s.replica.db.local target_session_attrs=standby", "SELECT inet_server_addr()")
			if err != nil || (out != r1 && out != r2) {
				t.Fatalf("got %q, %v; want a replica", out, err)
			}
		}
	})

	t.Run("read-your-writes, 200 rounds", func(t *testing.T) {
		writer := e.pg.Nodes[0].Conn(t)
		byReplica := 0
		const rounds = 200
		for i := range rounds {
			// The DSN docs/clients/libpq.md gives: the token's
			// prefer-replica name alone.
			host := documentedToken(t, writer, "INSERT INTO ryw VALUES ($1)", i) + ".prefer-replica.db.local"
			out, err := ns.psql("host="+host,
				fmt.Sprintf("SELECT inet_server_addr(), EXISTS (SELECT 1 FROM ryw WHERE id = %d)", i))
			if err != nil {
				t.Fatal(err)
			}
			addr, found, _ := strings.Cut(out, "|")
			if found != "t" {
				t.Fatalf("stale read: round %d read from %s without its own write", i, addr)
			}
			if addr != p {
				byReplica++
			}
		}
		t.Logf("libpq read-your-writes: %d rounds, 0 stale reads, %d served by a replica (%d%%)", rounds, byReplica, byReplica*100/rounds)
	})

	t.Run("falls through to the primary when every replica is stopped", func(t *testing.T) {
		for _, n := range e.pg.Nodes[1:] {
			if err := n.Stop(context.Background(), "immediate"); err != nil {
				t.Fatal(err)
			}
		}
		e.waitFor(t, "replica.db.local.", nil)
		out, err := ns.psql("host=replica.db.local,primary.db.local", "SELECT inet_server_addr()")
		if err != nil || out != p {
			t.Fatalf("got %q, %v; want %s", out, err, p)
		}
	})
}

// TestFailoverThroughDNS stops the primary, promotes a replica and measures
// how long after the promote returns the name, and a read-write libpq
// session through it, reach the new primary.
func TestFailoverThroughDNS(t *testing.T) {
	t.Parallel()
	b := pgtest.Addrs(t)
	dnsIP := b.IP(53)
	ns := newResolverNS(t, dnsIP)
	e := newEnvIn(t, b, envOptions{Interval: "250ms", Listen: dnsIP + ":53"})
	r1, r2 := e.ip(1), e.ip(2)
	e.waitFor(t, "replica.db.local.", []string{r1, r2})
	ctx := context.Background()

	if err := e.pg.Nodes[0].Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	if err := e.pg.Nodes[1].Promote(ctx); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	var dnsAfter, psqlAfter time.Duration
	for dnsAfter == 0 || psqlAfter == 0 {
		if time.Since(promoted) > 10*time.Second {
			t.Fatalf("after 10 s: DNS %v, psql %v", dnsAfter, psqlAfter)
		}
		if dnsAfter == 0 {
			m := e.query(t, "udp", "primary.db.local.", dns.TypeA)
			if ips := answerIPs(t, m); len(ips) == 1 && ips[0] == r1 {
				dnsAfter = time.Since(promoted)
			}
		}
		if psqlAfter == 0 {
			if out, err := ns.psql("host=primary.db.local target_session_attrs=read-write", "SELECT inet_server_addr()"); err == nil && out == r1 {
				psqlAfter = time.Since(promoted)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("failover: primary.db.local answered the new primary %v after pg_ctl promote returned; psql read-write through the name succeeded after %v",
		dnsAfter.Round(time.Millisecond), psqlAfter.Round(time.Millisecond))
	if psqlAfter > 3*time.Second {
		t.Errorf("read-write sessions reached the new primary only after %v", psqlAfter)
	}
}
