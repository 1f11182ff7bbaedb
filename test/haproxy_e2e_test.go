package test

// HAProxy (Debian's 2.6) in front of a real cluster, finding the primary
// and the replicas through pgdns with configs/haproxy.cfg as shipped: only
// addresses are replaced.

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdns/pgdns/internal/testkit"
)

// hxProxy is a running HAProxy.
type hxProxy struct {
	rw, ro string // the read-write and read-only ports, ip:port
	logs   *testkit.Buffer
}

// startHAProxy runs configs/haproxy.cfg with its ports on ip and pgdns at
// dnsAddrs (one nameserver line each), and waits until both ports accept
// connections.
func startHAProxy(t *testing.T, ip string, dnsAddrs ...string) *hxProxy {
	t.Helper()
	bin := testkit.RequireTool(t, "haproxy")
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join("..", "configs", "haproxy.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(b)
	for old, repl := range map[string]string{
		"nameserver pgdns 10.0.0.53:5353": nameservers(dnsAddrs),
		"bind 127.0.0.1:5000":             "bind " + ip + ":5000",
		"bind 127.0.0.1:5001":             "bind " + ip + ":5001",
		"/run/haproxy/admin.sock mode":    filepath.Join(dir, "admin.sock") + " mode",
	} {
		if strings.Count(cfg, old) != 1 {
			t.Fatalf("configs/haproxy.cfg: %q is not there exactly once", old)
		}
		cfg = strings.Replace(cfg, old, repl, 1)
	}
	path := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	h := &hxProxy{rw: ip + ":5000", ro: ip + ":5001", logs: &testkit.Buffer{}}
	cmd := exec.Command(bin, "-db", "-f", path)
	cmd.Stdout, cmd.Stderr = h.logs, h.logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	startProxy(t, "haproxy", cmd, h.logs, 8000, true, h.rw, h.ro)
	return h
}

// nameservers writes HAProxy nameserver lines for addrs, as the shipped
// config's one line is indented.
func nameservers(addrs []string) string {
	lines := make([]string, len(addrs))
	for i, a := range addrs {
		lines[i] = fmt.Sprintf("nameserver pgdns%d %s", i+1, a)
	}
	return strings.Join(lines, "\n    ")
}

// hxConnect opens a session to PostgreSQL through addr, an HAProxy port.
func hxConnect(ctx context.Context, addr string) (*pgx.Conn, error) {
	host, port, _ := net.SplitHostPort(addr)
	return pgx.Connect(ctx, fmt.Sprintf("host=%s port=%s user=postgres dbname=postgres sslmode=disable connect_timeout=3", host, port))
}

// hxServer opens a session through addr, asks which server it reached and
// closes it; with write, it writes a row on it first and reports the
// server that committed it.
func hxServer(addr string, write bool) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c, err := hxConnect(ctx, addr)
	if err != nil {
		return "", err
	}
	defer c.Close(context.Background())
	sql := "SELECT host(inet_server_addr())"
	if write {
		sql = "INSERT INTO w DEFAULT VALUES RETURNING host(inet_server_addr())"
	}
	var got string
	err = c.QueryRow(ctx, sql).Scan(&got)
	return got, err
}

// hxUntil opens a session through addr every 20 ms until one reaches want,
// for at most 20 s, and fails the test if one reaches never. It returns how
// long that took from start.
func hxUntil(t *testing.T, addr string, write bool, start time.Time, want, never string) time.Duration {
	t.Helper()
	var lastErr error
	fails := 0
	for range 1000 {
		if time.Since(start) > 20*time.Second {
			break
		}
		got, err := hxServer(addr, write)
		switch {
		case err != nil:
			fails++
			lastErr = err
		case got == never:
			t.Fatalf("a session through %s reached %s, which was stopped", addr, never)
		case got == want:
			return time.Since(start)
		default:
			t.Fatalf("a session through %s reached %s, want %s", addr, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no session through %s reached %s within 20 s (%d failures, last: %v)", addr, want, fails, lastErr)
	return 0
}

// newHAProxyEnv starts a cluster on the test's own addresses (11 the
// primary, 12.. the replicas) with a table w, pgdns on .53 port 5353 and
// HAProxy on .70, and waits until HAProxy reaches the primary.
func newHAProxyEnv(t *testing.T, replicas int) (*env, *hxProxy, []string) {
	t.Helper()
	testkit.RequireTool(t, "haproxy")
	e, b, ips := newProxiedEnv(t, replicas, 5353, "CREATE TABLE w (i serial PRIMARY KEY, at timestamptz DEFAULT now())")
	h := startHAProxy(t, b.IP(70), b.IP(53)+":5353")
	hxUntil(t, h.rw, true, time.Now(), ips[0], "")
	return e, h, ips
}

// TestHAProxyFollowsSwitchover: across a switchover (stop the primary with
// -m fast, promote a replica), new sessions through HAProxy's read-write
// port reach the new primary, never the old one; sessions established
// through the read-only port to the replica that was promoted are shut
// down once pgdns no longer answers it as a replica; new read-only
// sessions reach only the remaining replica.
func TestHAProxyFollowsSwitchover(t *testing.T) {
	t.Parallel()
	e, h, ips := newHAProxyEnv(t, 2)
	p, r1, r2 := ips[0], ips[1], ips[2]
	ctx := context.Background()

	// Two read-only sessions on the replica to be promoted, held open, once
	// HAProxy balances across both replicas.
	onR1 := []*pgx.Conn{}
	seen := map[string]bool{}
	// Both replica slots come up within a resolution and a check or two.
	for i := 0; i < 200 && (len(onR1) < 2 || !seen[r2]); i++ {
		time.Sleep(50 * time.Millisecond)
		c, err := hxConnect(ctx, h.ro)
		if err != nil {
			continue
		}
		var addr string
		if err := c.QueryRow(ctx, "SELECT host(inet_server_addr())").Scan(&addr); err != nil {
			t.Fatal(err)
		}
		seen[addr] = true
		if addr == r1 && len(onR1) < 2 {
			onR1 = append(onR1, c)
			t.Cleanup(func() { _ = c.Close(context.Background()) })
		} else {
			_ = c.Close(ctx)
		}
	}
	if len(onR1) < 2 || !seen[r2] {
		t.Fatalf("read-only sessions reached %v, want both replicas", seen)
	}

	promoted := switchover(t, e.pg.Nodes[0], e.pg.Nodes[1])
	writes := hxUntil(t, h.rw, true, promoted, r1, p)

	// The other replica follows the new primary: replica.db.local answers
	// it alone, and the promoted replica's slot goes into maintenance.
	e.pg.Nodes[2].Follow(t, e.pg.Nodes[1])
	var closed time.Duration
	for range 300 {
		open := 0
		for _, c := range onR1 {
			qctx, cancel := context.WithTimeout(ctx, time.Second)
			if _, err := c.Exec(qctx, "SELECT 1"); err == nil {
				open++
			}
			cancel()
		}
		if open == 0 {
			closed = time.Since(promoted)
			break
		}
		if time.Since(promoted) > 15*time.Second {
			t.Fatalf("%d read-only sessions to the promoted replica %s are still open 15 s after the promote", open, r1)
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.waitFor(t, "replica.db.local.", []string{r2})
	// New read-only sessions: only r2 (a slot may lag a resolution behind).
	hxUntil(t, h.ro, false, time.Now(), r2, "")
	for range 6 {
		if got, err := hxServer(h.ro, false); err != nil || got != r2 {
			t.Fatalf("read-only session after the switchover reached %q, %v; want %s", got, err, r2)
		}
	}
	t.Logf("haproxy switchover: new read-write sessions reached the new primary %v after pg_ctl promote returned; read-only sessions to the promoted replica were shut down %v after it",
		writes.Round(time.Millisecond), closed.Round(time.Millisecond))
	if writes > 5*time.Second {
		t.Errorf("new sessions reached the new primary only after %v", writes)
	}
}

// TestHAProxyRecoversFromNoPrimary: while pgdns answers primary.db.local
// with NODATA, HAProxy's primary server is in maintenance and sessions
// through the read-write port are refused; it does not hold on to that,
// and new sessions reach the new primary shortly after pgdns answers one.
func TestHAProxyRecoversFromNoPrimary(t *testing.T) {
	t.Parallel()
	e, h, ips := newHAProxyEnv(t, 1)
	p, r1 := ips[0], ips[1]
	ctx := context.Background()

	if err := e.pg.Nodes[0].Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", nil)
	var got string
	failed, ok := testkit.Holds(3*time.Second, 50*time.Millisecond, func() bool {
		var err error
		got, err = hxServer(h.rw, true)
		return err != nil
	})
	if !ok {
		t.Fatalf("a write through haproxy was committed by %s while no primary was answered", got)
	}
	if err := e.pg.Nodes[1].Promote(ctx); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	dnsAfter := e.waitFor(t, "primary.db.local.", []string{r1})
	writes := hxUntil(t, h.rw, true, promoted, r1, p)
	t.Logf("haproxy after %d refused sessions in a 3 s outage (NODATA): pgdns answered the new primary %v after the promote, new sessions through HAProxy reached it after %v",
		failed, dnsAfter.Round(time.Millisecond), writes.Round(time.Millisecond))
	if writes > 5*time.Second {
		t.Errorf("haproxy held on to the outage: sessions reached the new primary only after %v", writes)
	}
	if !slices.ContainsFunc(strings.Split(h.logs.String(), "\n"), func(l string) bool {
		return strings.Contains(l, "pg_primary/primary") && strings.Contains(l, "maintenance")
	}) {
		t.Errorf("haproxy never logged its primary server going into maintenance")
	}
}
