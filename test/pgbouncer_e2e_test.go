package test

// PgBouncer (Debian's 1.18, c-ares) in front of a real cluster, finding
// the primary and the replicas through pgdns with configs/pgbouncer.ini as
// shipped: only addresses, paths and auth are replaced.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdns/pgdns/internal/testkit"
)

// sharedTempDir makes a directory that a program running as the postgres
// user can read (t.TempDir's parents are private to root), removed when
// the test ends.
func sharedTempDir(t *testing.T, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if cred := postgresCredential(t); cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// postgresCredential is the postgres user when we are root (PgBouncer
// refuses to run as root), nil otherwise.
func postgresCredential(t *testing.T) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("running as root needs a postgres user: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// shippedConfig reads a file of configs/ and replaces the value of each
// key of set (key = value lines, as in pgbouncer.ini); a key that is not
// in the file fails the test, so the test follows the file.
func shippedConfig(t *testing.T, name string, set map[string]string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "configs", name))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		key, _, ok := strings.Cut(line, "=")
		key = strings.TrimSpace(key)
		if v, found := set[key]; ok && found && !strings.HasPrefix(key, ";") {
			line = key + " = " + v
			seen[key] = true
		}
		out = append(out, line)
	}
	for k := range set {
		if !seen[k] {
			t.Fatalf("configs/%s has no %s", name, k)
		}
	}
	return strings.Join(out, "\n")
}

// bouncer is a running PgBouncer.
type bouncer struct {
	addr string // listen address, ip:6432
	logs *testkit.Buffer
}

// startPgBouncer runs configs/pgbouncer.ini on ip:6432 with pgdns at
// dnsIP:53 as its only name server, trust auth for postgres (also its
// admin), and waits until it accepts connections.
func startPgBouncer(t *testing.T, ip, dnsIP string) *bouncer {
	t.Helper()
	return startPgBouncerResolv(t, ip, "nameserver "+dnsIP+"\n")
}

// startPgBouncerResolv is startPgBouncer with resolvConf as PgBouncer's
// resolv_conf.
func startPgBouncerResolv(t *testing.T, ip, resolvConf string) *bouncer {
	t.Helper()
	bin := testkit.RequireTool(t, "pgbouncer")
	dir := sharedTempDir(t, "pgdns-pgbouncer-")
	files := map[string]string{
		"resolv.conf":  resolvConf,
		"userlist.txt": `"postgres" ""` + "\n",
		"pgbouncer.ini": shippedConfig(t, "pgbouncer.ini", map[string]string{
			"listen_addr":     ip,
			"unix_socket_dir": "",
			"auth_type":       "trust",
			"auth_file":       filepath.Join(dir, "userlist.txt"),
			"admin_users":     "postgres",
			"resolv_conf":     filepath.Join(dir, "resolv.conf"),
		}),
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b := &bouncer{addr: net.JoinHostPort(ip, "6432"), logs: &testkit.Buffer{}}
	cmd := exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	cmd.Stdout, cmd.Stderr = b.logs, b.logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: postgresCredential(t), Setpgid: true}
	startProxy(t, "pgbouncer", cmd, b.logs, 6000, false, b.addr)
	return b
}

// connect opens a client session to db through PgBouncer, in the simple
// query protocol (transaction pooling has no prepared statements in 1.18).
func (b *bouncer) connect(ctx context.Context, db string) (*pgx.Conn, error) {
	host, port, _ := net.SplitHostPort(b.addr)
	cfg, err := pgx.ParseConfig(fmt.Sprintf("host=%s port=%s user=postgres dbname=%s sslmode=disable connect_timeout=5", host, port, db))
	if err != nil {
		return nil, err
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	return pgx.ConnectConfig(ctx, cfg)
}

// mustConnect is connect for the test's set-up; the session is closed when
// the test ends.
func (b *bouncer) mustConnect(t *testing.T, db string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := b.connect(ctx, db)
	if err != nil {
		t.Fatalf("connect to %s through pgbouncer: %v", db, err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// servers returns the addresses of PgBouncer's server connections for db,
// from SHOW SERVERS on its admin console.
func (b *bouncer) servers(t *testing.T, db string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	admin, err := b.connect(ctx, "pgbouncer")
	if err != nil {
		t.Fatalf("pgbouncer admin console: %v", err)
	}
	defer admin.Close(context.Background())
	rows, err := admin.Query(ctx, "SHOW SERVERS")
	if err != nil {
		t.Fatalf("SHOW SERVERS: %v", err)
	}
	defer rows.Close()
	col := map[string]int{}
	for i, f := range rows.FieldDescriptions() {
		col[f.Name] = i
	}
	var addrs []string
	for rows.Next() {
		v := rows.RawValues()
		if string(v[col["database"]]) == db {
			addrs = append(addrs, string(v[col["addr"]]))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("SHOW SERVERS: %v", err)
	}
	slices.Sort(addrs)
	return addrs
}

// pgbWriter is a client session that writes through PgBouncer and reopens
// itself when PgBouncer closes it.
type pgbWriter struct {
	b        *bouncer
	conn     *pgx.Conn
	n        int // rows written so far
	errs     int
	reopened int
	lastErr  error
}

// write inserts one row and returns the address of the server that
// committed it.
func (w *pgbWriter) write() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if w.conn == nil || w.conn.IsClosed() {
		c, err := w.b.connect(ctx, "app")
		if err != nil {
			w.errs++
			w.lastErr = err
			return "", err
		}
		w.conn = c
		w.reopened++
	}
	var addr string
	err := w.conn.QueryRow(ctx, "INSERT INTO w (i) VALUES ($1) RETURNING host(inet_server_addr())", w.n+1).Scan(&addr)
	if err != nil {
		w.errs++
		w.lastErr = err
		return "", err
	}
	w.n++
	return addr, nil
}

func (w *pgbWriter) close() {
	if w.conn != nil {
		_ = w.conn.Close(context.Background())
	}
}

// writeUntil writes every 20 ms until a write is committed by want, for
// at most 20 s, and fails the test if one is committed by never (the old
// primary, stopped). It returns how long that took from start.
func (w *pgbWriter) writeUntil(t *testing.T, start time.Time, want, never string) time.Duration {
	t.Helper()
	for range 1000 {
		if time.Since(start) > 20*time.Second {
			break
		}
		addr, err := w.write()
		switch {
		case err != nil:
		case addr == never:
			t.Fatalf("write %d was committed by %s, which was stopped", w.n, never)
		case addr == want:
			return time.Since(start)
		default:
			t.Fatalf("write %d was committed by %s, want %s", w.n, addr, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no write reached %s through pgbouncer within 20 s (%d errors, last: %v)", want, w.errs, w.lastErr)
	return 0
}

// waitServers polls SHOW SERVERS until pred holds for db's server
// addresses, for at most 15 s, and returns how long that took from start.
func (b *bouncer) waitServers(t *testing.T, db string, start time.Time, what string, pred func([]string) bool) time.Duration {
	t.Helper()
	var got []string
	for range 300 {
		if got = b.servers(t, db); pred(got) {
			return time.Since(start)
		}
		if time.Since(start) > 15*time.Second {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: SHOW SERVERS for %s still lists %v after 15 s", what, db, got)
	return 0
}

// warmReads runs n concurrent reads through app_ro, so that PgBouncer opens
// several server connections, and returns the addresses that served them.
func (b *bouncer) warmReads(t *testing.T, n int) []string {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	var addrs []string
	var errs []error
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := b.connect(ctx, "app_ro")
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				return
			}
			defer c.Close(context.Background())
			var addr string
			err = c.QueryRow(ctx, "SELECT host(inet_server_addr()) FROM pg_sleep(0.5)").Scan(&addr)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			addrs = append(addrs, addr)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("reads through app_ro: %v", err)
	}
	slices.Sort(addrs)
	return slices.Compact(addrs)
}

// newPgBouncerEnv starts a cluster on the test's own addresses (11 the
// primary, 12.. the replicas), pgdns on .53 port 53 and PgBouncer on .64,
// with a table w in the database app, created through PgBouncer.
func newPgBouncerEnv(t *testing.T, replicas int) (*env, *bouncer, []string) {
	t.Helper()
	testkit.RequireRoot(t, "pgdns listens on port 53, where PgBouncer's c-ares asks")
	testkit.RequireTool(t, "pgbouncer")
	e, b, ips := newProxiedEnv(t, replicas, 53, "CREATE DATABASE app")
	bn := startPgBouncer(t, b.IP(64), b.IP(53))
	c := bn.mustConnect(t, "app")
	if _, err := c.Exec(context.Background(), "CREATE TABLE w (i int PRIMARY KEY, at timestamptz DEFAULT now())"); err != nil {
		t.Fatalf("create table through pgbouncer: %v", err)
	}
	if replicas > 0 {
		// Every replica has replayed the database and the table before a
		// read goes there.
		tok := e.insertAndTakeLSN(t, e.pg.Nodes[0])
		e.waitFor(t, "lsn-"+tok+".replica.db.local.", ips[1:])
	}
	return e, bn, ips
}

// TestPgBouncerFollowsSwitchover: a client session writing through
// PgBouncer keeps writing across a switchover (stop the primary with -m
// fast, promote a replica), and its writes reach the new primary through
// the same PgBouncer, never the old one; PgBouncer's server connections to
// the old primary are gone, and so are its read pool's connections to the
// replica that was promoted, once the zone's SOA serial has told it so.
func TestPgBouncerFollowsSwitchover(t *testing.T) {
	t.Parallel()
	e, bn, ips := newPgBouncerEnv(t, 2)
	p, r1, r2 := ips[0], ips[1], ips[2]

	w := &pgbWriter{b: bn}
	defer w.close()
	for range 10 {
		if addr, err := w.write(); err != nil || addr != p {
			t.Fatalf("write through pgbouncer: committed by %q, %v; want %s", addr, err, p)
		}
	}
	// Concurrent reads until PgBouncer holds server connections to both
	// replicas (it opens them one at a time, each on the next address).
	var served []string
	for n := 4; n <= 16 && !slices.Equal(served, []string{r1, r2}); n *= 2 {
		served = bn.warmReads(t, n)
	}
	if !slices.Equal(served, []string{r1, r2}) {
		t.Fatalf("reads through app_ro were served by %v, want both replicas %v", served, []string{r1, r2})
	}
	if got := bn.servers(t, "app_ro"); !slices.Contains(got, r1) {
		t.Fatalf("SHOW SERVERS for app_ro: %v, want a connection to %s", got, r1)
	}

	promoted := switchover(t, e.pg.Nodes[0], e.pg.Nodes[1])
	writes := w.writeUntil(t, promoted, r1, p)
	// The other replica follows the new primary: the replica names answer
	// it, no longer the promoted one.
	e.pg.Nodes[2].Follow(t, e.pg.Nodes[1])
	noOld := bn.waitServers(t, "app", promoted, "write pool", func(s []string) bool { return !slices.Contains(s, p) })
	noPromoted := bn.waitServers(t, "app_ro", promoted, "read pool", func(s []string) bool { return !slices.Contains(s, r1) })
	for range 10 {
		if addr, err := w.write(); err != nil || addr != r1 {
			t.Fatalf("write through pgbouncer after the switchover: committed by %q, %v; want %s", addr, err, r1)
		}
	}
	if got := bn.servers(t, "app"); !slices.Equal(got, []string{r1}) {
		t.Errorf("SHOW SERVERS for app after the switchover: %v, want [%s]", got, r1)
	}
	t.Logf("pgbouncer switchover: writes through the same PgBouncer reached the new primary %v after pg_ctl promote returned (%d failed writes, session reopened %d times); write pool free of the old primary after %v; read pool's connections to the promoted replica closed after %v",
		writes.Round(time.Millisecond), w.errs, w.reopened-1, noOld.Round(time.Millisecond), noPromoted.Round(time.Millisecond))
	if writes > 5*time.Second {
		t.Errorf("writes reached the new primary only after %v", writes)
	}
}

// TestPgBouncerRecoversFromNoPrimary: while pgdns answers primary.db.local
// with NODATA (the primary is down, nothing promoted yet), PgBouncer's
// lookups and logins fail; with dns_nxdomain_ttl and server_login_retry
// of configs/pgbouncer.ini it does not hold on to that failure, and writes
// through it reach the new primary shortly after pgdns answers one.
func TestPgBouncerRecoversFromNoPrimary(t *testing.T) {
	t.Parallel()
	e, bn, ips := newPgBouncerEnv(t, 1)
	p, r1 := ips[0], ips[1]
	ctx := context.Background()

	w := &pgbWriter{b: bn}
	defer w.close()
	if addr, err := w.write(); err != nil || addr != p {
		t.Fatalf("write through pgbouncer: committed by %q, %v; want %s", addr, err, p)
	}
	if err := e.pg.Nodes[0].Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", nil)
	// Three seconds without a primary: PgBouncer looks the name up, gets
	// NODATA, and its logins fail, over and over.
	var addr string
	failed, ok := testkit.Holds(3*time.Second, 50*time.Millisecond, func() bool {
		var err error
		addr, err = w.write()
		return err != nil
	})
	if !ok {
		t.Fatalf("write committed by %s while no primary was answered", addr)
	}
	if !strings.Contains(bn.logs.String(), "DNS lookup failed: primary.db.local") {
		t.Errorf("pgbouncer never logged a failed lookup of primary.db.local during the outage")
	}
	if err := e.pg.Nodes[1].Promote(ctx); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	dnsAfter := e.waitFor(t, "primary.db.local.", []string{r1})
	writes := w.writeUntil(t, promoted, r1, p)
	t.Logf("pgbouncer after %d failed writes in a 3 s outage (NODATA): pgdns answered the new primary %v after the promote, writes through PgBouncer reached it after %v",
		failed, dnsAfter.Round(time.Millisecond), writes.Round(time.Millisecond))
	if writes > 5*time.Second {
		t.Errorf("pgbouncer held on to the outage: writes reached the new primary only after %v", writes)
	}
}
