package test

// Real SRV clients reaching the primary through pgdns across a switchover:
// psycopg 3's resolve_srv (dnspython, through the system resolver) with a
// libpq connection, and Go's net.LookupSRV with pgx. The new primary is on
// another port than the old one, at the old one's IP: only SRV can send a
// client there.

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// psycopgSRV is a psycopg 3 client: resolve_srv of argv[1], then one
// read-write libpq connection to the hosts and ports it resolved, in its
// order; it prints them and the server it reached (address|port).
const psycopgSRV = `
import sys, psycopg
from psycopg._dns import resolve_srv
p = resolve_srv({"host": sys.argv[1], "port": ""})
print(p["host"], p["port"])
with psycopg.connect(host=p["host"], port=p["port"], user="postgres", dbname="postgres", sslmode="disable",
                     connect_timeout=3, target_session_attrs="read-write") as c:
    print("%s|%s" % c.execute("SELECT host(inet_server_addr()), current_setting('port')").fetchone())
`

// psycopg runs psycopgSRV for name through the namespace's resolv.conf.
func (r *resolverNS) psycopg(t *testing.T, name string) (resolved, reached string, err error) {
	t.Helper()
	python := testkit.RequireTool(t, "/usr/bin/python3")
	if out, err := exec.Command(python, "-c", "import psycopg._dns, dns.resolver").CombinedOutput(); err != nil {
		testkit.Require(t, fmt.Errorf("python3-psycopg and python3-dnspython are needed: %s", out))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "-m", "sh", "-c",
		`mount --bind "$1" /etc/resolv.conf && exec "$2" -c "$3" "$4"`, "sh", r.conf, python, psycopgSRV, name)
	out, err := cmd.CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err != nil || len(lines) != 2 {
		return "", "", fmt.Errorf("psycopg %s: %v: %s", name, err, out)
	}
	return lines[0], lines[1], nil
}

// goSRV is a Go client: net.LookupSRV through a resolver that asks pgdns,
// then pgx to each target in the order Go sorted them (priority, then
// weight), read-write; it returns the server it reached (address|port).
// Reaching it only past the first target, or a first target not at
// priority 10, is an error: pgdns puts the primary first, at 10, and a
// client should not need its fallbacks to find it.
func goSRV(t *testing.T, dnsAddr, name string) (string, error) {
	t.Helper()
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, dnsAddr)
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, srvs, err := r.LookupSRV(ctx, "postgresql", "tcp", name)
	if err != nil {
		return "", err
	}
	var errs []string
	for i, s := range srvs {
		ips, err := r.LookupHost(ctx, s.Target)
		if err != nil || len(ips) == 0 {
			errs = append(errs, fmt.Sprintf("%s: %v", s.Target, err))
			continue
		}
		conn, err := pgx.Connect(ctx, fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres sslmode=disable connect_timeout=3 target_session_attrs=read-write", ips[0], s.Port))
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s:%d: %v", s.Target, s.Port, err))
			continue
		}
		var addr, port string
		err = conn.QueryRow(ctx, "SELECT host(inet_server_addr()), current_setting('port')").Scan(&addr, &port)
		_ = conn.Close(ctx)
		if err == nil && (i > 0 || s.Priority != 10) {
			err = fmt.Errorf("reached %s:%s through target %d, %s at priority %d, of %d: not the first, at priority 10", addr, port, i+1, s.Target, s.Priority, len(srvs))
		}
		if err == nil {
			return addr + "|" + port, nil
		}
		errs = append(errs, err.Error())
	}
	return "", fmt.Errorf("no target of %d reached: %s", len(srvs), strings.Join(errs, "; "))
}

func TestSRVClientsAcrossASwitchover(t *testing.T) {
	t.Parallel()
	b := pgtest.Addrs(t)
	ip1, ip2, dnsIP := b.IP(11), b.IP(12), b.IP(53)
	ns := newResolverNS(t, dnsIP) // psycopg reads /etc/resolv.conf: pgdns on port 53
	pg := pgtest.New(t, pgtest.Options{IPs: []string{ip1, ip1, ip2}, Ports: []int{5432, 5433, 5432}})
	// IP1 is two hosts' on different ports: no A answer holds it, the
	// primary's included (review R11); SRV names each.
	e := launch(t, pg, envOptions{Interval: "100ms", Listen: dnsIP + ":53"})
	e.waitFor(t, "any.db.local.", []string{ip2})

	reach := func(want string) {
		t.Helper()
		// The primary's host name (derived from its address and port,
		// docs/names.md) comes first: it is alone at priority 10.
		first := strings.NewReplacer(".", "-", "|", "-").Replace(want) + ".host.main.db.local"
		for _, name := range []string{"_postgresql._tcp.primary.db.local", "_postgresql._tcp.main.db.local"} {
			resolved, got, err := ns.psycopg(t, name)
			if err != nil || got != want {
				t.Fatalf("psycopg via %s: resolved %q, reached %q, %v; want %s", name, resolved, got, err, want)
			}
			if !strings.HasPrefix(resolved, first+",") && !strings.HasPrefix(resolved, first+" ") {
				t.Fatalf("psycopg resolve_srv(%s) = %q: want %s first", name, resolved, first)
			}
			t.Logf("psycopg resolve_srv(%s) = %s -> %s", name, resolved, got)
		}
		for _, name := range []string{"primary.db.local", "main.db.local"} {
			if got, err := goSRV(t, e.app.DNSAddr(), name); err != nil || got != want {
				t.Fatalf("Go LookupSRV(postgresql, tcp, %s) + pgx: reached %q, %v; want %s", name, got, err, want)
			}
		}
	}
	reach(ip1 + "|5432")

	switchover(t, pg.Nodes[0], pg.Nodes[1])
	want := ip1 + "|5433"
	testkit.Eventually(t, 20*time.Second, 100*time.Millisecond, "Go's SRV client to reach the new primary", func() (string, bool) {
		got, err := goSRV(t, e.app.DNSAddr(), "primary.db.local")
		return got + " " + fmt.Sprint(err), err == nil && got == want
	})
	reach(want)
	if got := e.ips(t, "primary.db.local."); len(got) != 0 {
		t.Fatalf("primary.db.local. answered %v for a primary on port 5433: a client on 5432 would reach %s:5432", got, got)
	}
}
