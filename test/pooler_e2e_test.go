package test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/probe"
)

// startTxPooler runs PgBouncer on ip:6432 in pool_mode = transaction with
// one server connection to node, ignoring the probe's startup parameters
// when ignore is set, and returns its address.
func startTxPooler(t *testing.T, ip string, node *pgtest.Node, ignore bool) string {
	t.Helper()
	bin := testkit.RequireTool(t, "pgbouncer")
	dir := sharedTempDir(t, "pgdns-pooler-")
	ini := shippedConfig(t, "pgbouncer.ini", map[string]string{
		"app":               "host=" + node.IP + " port=" + strconv.Itoa(node.Port) + " dbname=postgres",
		"listen_addr":       ip,
		"unix_socket_dir":   "",
		"auth_type":         "trust",
		"auth_file":         filepath.Join(dir, "userlist.txt"),
		"admin_users":       "postgres",
		"resolv_conf":       filepath.Join(dir, "resolv.conf"),
		"default_pool_size": "1", // every client session on the one server connection
	})
	if ignore {
		// The probe's startup parameters (probe/dsn.go), which PgBouncer
		// refuses unless told to ignore them.
		ini += "\nignore_startup_parameters = search_path, statement_timeout, lock_timeout, idle_in_transaction_session_timeout, idle_session_timeout, default_transaction_isolation\n"
	}
	for name, text := range map[string]string{"resolv.conf": "", "userlist.txt": `"postgres" ""` + "\n", "pgbouncer.ini": ini} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	addr := net.JoinHostPort(ip, "6432")
	logs := &testkit.Buffer{}
	cmd := exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: postgresCredential(t), Setpgid: true}
	startProxy(t, "pgbouncer", cmd, logs, 6000, false, addr)
	return addr
}

// Probing through a transaction pooler cannot be right: the probe relies
// on session state, and PgBouncer in pool_mode = transaction hands a new
// client session a server connection another client prepared pgdns_probe
// on (review 5, F7: two pgdns instances on one PgBouncer, every host down
// with "prepared statement already exists", a mystery). The probe's
// error says what it means: the host is a pooler, and hosts must be the
// PostgreSQL servers themselves (docs/configuration.md), and so does the
// error of a PgBouncer that refuses the probe's startup parameters.
func TestProbeThroughTransactionPoolerSaysSo(t *testing.T) {
	t.Parallel()
	ips := pgtest.Addrs(t).IPs(3)
	pg := pgtest.New(t, pgtest.Options{IPs: ips[:1]})
	refusing, addr := startTxPooler(t, ips[1], pg.Nodes[0], false), startTxPooler(t, ips[2], pg.Nodes[0], true)
	newChecker, err := probe.PostgresCheckers("user=postgres dbname=app sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A pooler that refuses the probe's startup parameters: before the
	// fix the error was "connect: default_transaction_isolation (SQLSTATE
	// 08P01)", the parameter's name alone.
	c, err := newChecker(refusing)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Check(ctx); err == nil || !strings.Contains(err.Error(), "unsupported startup parameter") ||
		!strings.Contains(err.Error(), "hosts must be the PostgreSQL servers themselves") {
		t.Errorf("the probe through a PgBouncer refusing its startup parameters: %v, want the reason", err)
	}

	first, err := newChecker(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if _, err := first.Check(ctx); err != nil { // prepares on the server connection
		t.Fatalf("the first probe through PgBouncer: %v", err)
	}
	second, err := newChecker(addr) // another pgdns, or this one's next session
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	_, err = second.Check(ctx)
	if err == nil || !strings.Contains(err.Error(), "42P05") {
		t.Fatalf("the second session's probe: %v, want the server's 42P05", err)
	}
	// Before the fix: only "prepared statement "pgdns_probe" already exists".
	for _, want := range []string{"transaction pooler", "hosts must be the PostgreSQL servers themselves"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
}
