package probe

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// hostCfg is the connection config the checker of addr would use.
func hostCfg(t *testing.T, dsn, addr string) *connConfig {
	t.Helper()
	return pgCheckerOf(t, dsn, addr).config()
}

// Each host's config is the parsed DSN with the host's address and TLS
// server name set on it, in the main config and in every fallback; no
// trace of the stand-in host remains.
func TestHostConfigIsSetOnTheParsedDSN(t *testing.T) {
	cases := []struct {
		dsn, addr  string
		tlsConfigs int    // the main config and its fallbacks with TLS
		plain      int    // ... without
		serverName string // every TLS config's
	}{
		{"user=u sslmode=verify-full", "10.0.0.1:5433", 1, 0, "10.0.0.1"},
		{"user=u sslmode=verify-full", "db1.example.com:5432", 1, 0, "db1.example.com"},
		{"user=u sslmode=verify-full sslsni=0", "db1.example.com:5432", 1, 0, "db1.example.com"},
		{"postgres://u@/postgres?sslmode=verify-full&port=7", "[2001:db8::1]:5432", 1, 0, "2001:db8::1"},
		{"user=u sslmode=require", "db1.example.com:5432", 1, 0, "db1.example.com"}, // SNI
		{"user=u sslmode=require", "10.0.0.1:5432", 1, 0, ""},                       // no SNI for an address
		{"user=u sslmode=require sslsni=0", "db1.example.com:5432", 1, 0, ""},
		{"user=u sslmode=prefer", "db1.example.com:5432", 1, 1, "db1.example.com"},
		{"user=u", "10.0.0.1:5432", 1, 1, ""},
		{"user=u sslmode=allow", "db1:5432", 1, 1, "db1"},
		{"user=u sslmode=disable", "db1:5432", 0, 1, ""},
	}
	for _, tc := range cases {
		cfg := hostCfg(t, tc.dsn, tc.addr)
		host, port, _ := net.SplitHostPort(tc.addr)
		if cfg.Host != host || cfg.Port != mustPort(t, port) {
			t.Errorf("%q for %s: host %q port %d", tc.dsn, tc.addr, cfg.Host, cfg.Port)
		}
		tlsConfigs, plain := 0, 0
		for _, c := range targets(cfg) {
			if c.Host != cfg.Host || c.Port != cfg.Port {
				t.Errorf("%q for %s: a fallback to %s:%d", tc.dsn, tc.addr, c.Host, c.Port)
			}
			if c.TLSConfig == nil {
				plain++
				continue
			}
			tlsConfigs++
			if c.TLSConfig.ServerName != tc.serverName {
				t.Errorf("%q for %s: TLS server name %q, want %q", tc.dsn, tc.addr, c.TLSConfig.ServerName, tc.serverName)
			}
		}
		if tlsConfigs != tc.tlsConfigs || plain != tc.plain {
			t.Errorf("%q for %s: %d configs with TLS and %d without, want %d and %d", tc.dsn, tc.addr, tlsConfigs, plain, tc.tlsConfigs, tc.plain)
		}
	}
}

// targets are the main config's address and TLS config and its fallbacks'.
func targets(cfg *connConfig) []pgconn.FallbackConfig {
	out := []pgconn.FallbackConfig{{Host: cfg.Host, Port: cfg.Port, TLSConfig: cfg.TLSConfig}}
	for _, f := range cfg.Fallbacks {
		out = append(out, *f)
	}
	return out
}

func mustPort(t *testing.T, s string) uint16 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		t.Fatal(err)
	}
	return uint16(n)
}

// Issue 29, item 1: a host address carrying connection keywords of its own
// (from Patroni's /cluster or the configuration) turned sslmode=verify-full
// off, and a fake server there was handed the probe's password in clear
// text. Every such address is refused before anything is dialled, and a
// well-formed address of that server gets nothing either: the DSN's
// sslmode holds.
func TestPasswordNeverReachesAFakeServer(t *testing.T) {
	t.Parallel()
	bl := pgtest.Addrs(t)
	trap := pgtest.NewPasswordTrap(t, bl.Addr(1, 5432))
	ip, port := bl.IP(1), "5432"
	const password = "canary-0xC0FFEE"

	for _, sslmode := range []string{"verify-full", "require"} {
		dsn := "user=probe dbname=postgres password=" + password + " sslmode=" + sslmode + " connect_timeout=2"
		newChecker, err := PostgresCheckers(dsn)
		if err != nil {
			t.Fatal(err)
		}
		for _, addr := range []string{
			ip + "' sslmode='disable:" + port, // the attack as reported
			ip + "' sslmode=disable host='" + ip + ":" + port,
			ip + " sslmode=disable:" + port,      // a space
			"sslmode=disable:" + port,            // a '='
			ip + `\' sslmode=disable:` + port,    // a backslash
			ip + ":" + port + " sslmode=disable", // keywords in the port field
			"[" + ip + "' sslmode='disable]:" + port,
		} {
			c, err := newChecker(addr)
			if err == nil {
				_, err = check(t, func(string) (Checker, error) { return c, nil }, addr, 3*time.Second)
				t.Errorf("sslmode=%s: address %q accepted (probe: %v)", sslmode, addr, err)
				continue
			}
			if !strings.HasPrefix(err.Error(), fmt.Sprintf("host %q: ", addr)) {
				t.Errorf("sslmode=%s: address %q refused without saying why: %v", sslmode, addr, err)
			}
		}
		// The same server at a good address: TLS is required and refused,
		// so the client stops before its startup message.
		if _, err := check(t, newChecker, ip+":"+port, 3*time.Second); err == nil {
			t.Errorf("sslmode=%s: a server without TLS passed the probe", sslmode)
		}
	}
	if got := trap.Passwords(); len(got) != 0 || trap.Startups() != 0 {
		t.Fatalf("the fake server got %d startup messages and the passwords %q", trap.Startups(), got)
	}

	// The trap works: without TLS the password does reach it.
	newChecker, err := PostgresCheckers("user=probe password=" + password + " sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = check(t, newChecker, ip+":"+port, 3*time.Second)
	if got := trap.Passwords(); len(got) != 1 || got[0] != password {
		t.Fatalf("control: the fake server got %q, want the password", got)
	}
}

// A DSN naming its own host is refused: pgdns connects to each host of the
// clusters, and the DSN's host would decide where TLS points.
func TestDSNWithAHostIsRefused(t *testing.T) {
	for _, dsn := range []string{
		"host=10.0.0.1 user=u",
		"user=u host=/var/run/postgresql",
		"postgres://u@/db?host=10.0.0.1",
		"postgres://u:pw@db1/db",
		"postgresql://db1,db2:5433/db",
	} {
		if _, err := PostgresCheckers(dsn); err == nil || !strings.Contains(err.Error(), "must not name a host") {
			t.Errorf("%q: %v", dsn, err)
		}
	}
}

// sslmode=verify-full against real PostgreSQL: the certificate is checked
// against each host's own address, not the DSN's stand-in. The server's
// certificate is issued for its address only; reached through a second
// address (a TCP forwarder), verify-full refuses it and verify-ca, which
// checks the chain alone, accepts it.
func TestVerifyFullChecksEachHostsName(t *testing.T) {
	t.Parallel()
	bl := pgtest.Addrs(t)
	ca := pgtest.NewCA(t)
	cl := pgtest.NewTLS(t, ca, pgtest.Options{IPs: []string{bl.IP(1)},
		HBA: []string{"hostnossl all all 127.0.0.0/8 reject"},
	}, bl.IP(1))
	other := forward(t, bl.Addr(2, 5432), cl.Nodes[0].Addr())

	fullDSN := "user=postgres dbname=postgres sslmode=verify-full connect_timeout=3 sslrootcert=" + ca.File
	full, err := PostgresCheckers(fullDSN)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := check(t, full, cl.Nodes[0].Addr(), 5*time.Second); err != nil {
		t.Fatalf("verify-full at the certificate's address: %v", err)
	}
	if _, err := check(t, full, other, 5*time.Second); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("verify-full at another address: %v, want a certificate error", err)
	}
	verifyCA, err := PostgresCheckers(strings.Replace(fullDSN, "verify-full", "verify-ca", 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := check(t, verifyCA, other, 5*time.Second); err != nil {
		t.Fatalf("verify-ca at another address: %v", err)
	}
}

// forward relays TCP connections from listen to to until the test ends,
// and returns listen.
func forward(t *testing.T, listen, to string) string {
	t.Helper()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); _ = ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var d net.Dialer
				up, err := d.DialContext(ctx, "tcp", to)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
				_, _ = io.Copy(c, up)
			}()
		}
	}()
	return listen
}

// A DSN pgx cannot parse is quoted through zone.Redact, with pgx's reason;
// the password never appears, whatever broke the DSN (issue 29, item 7).
func TestDSNErrorsNeverQuoteThePassword(t *testing.T) {
	const canary = "canary-0xC0FFEE"
	for dsn, want := range map[string]string{
		"user=a password=" + canary + " sslmode=bogus":       `cannot parse "user=a password=REDACTED sslmode=bogus": failed to configure TLS (sslmode is invalid)`,
		"user=a password=" + canary + " x":                   `cannot parse "user=a password=REDACTED (the rest cannot be read as a DSN)": failed to parse as keyword/value`,
		"user=a password='" + canary:                         `cannot parse "user=a password=REDACTED (the rest cannot be read as a DSN)": failed to parse as keyword/value`,
		`user=a password=ab"` + canary + ` sslmode=bogus`:    `cannot parse "user=a password=REDACTED sslmode=bogus": failed to configure TLS`,
		"postgres://u:" + canary + "@/db?sslmode=bogus":      `cannot parse "postgres://u:REDACTED@/db?sslmode=bogus": failed to configure TLS (sslmode is invalid)`,
		"postgres://u:" + canary + "@h:bad/db":               `cannot parse "postgres://REDACTED@h:bad/db" as a URL`,
		"postgres://u@/db?password=" + canary + "&sslmode=x": `cannot parse "postgres://u@/db?password=REDACTED&sslmode=x"`,
		"postgresql://u:" + canary + "@/db?sslmode=bogus#x":  `cannot parse "postgresql://u:REDACTED@/db?sslmode=bogus#REDACTED"`,
	} {
		_, err := PostgresCheckers(dsn)
		if err == nil {
			t.Errorf("%q: parsed", dsn)
			continue
		}
		if strings.Contains(err.Error(), canary) || strings.Contains(err.Error(), "C0FFEE") {
			t.Errorf("%q: the password reached the error: %v", dsn, err)
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %q, want %q", dsn, err, want)
		}
	}
}

// A password from the passfile is looked up for each host, as libpq
// does, although the DSN is parsed once for a stand-in host.
func TestPassfileIsReadPerHost(t *testing.T) {
	bl := pgtest.Addrs(t)
	cl := pgtest.New(t, pgtest.Options{IPs: []string{bl.IP(1)},
		HBA: []string{"host all probe 127.0.0.0/8 scram-sha-256"}})
	cl.Nodes[0].Exec(t, "CREATE ROLE probe LOGIN PASSWORD 'per-host-secret' IN ROLE pg_monitor")
	passfile := filepath.Join(t.TempDir(), "pgpass")
	lines := "10.9.9.9:5432:*:probe:other-host-secret\n" + bl.IP(1) + ":5432:*:probe:per-host-secret\n"
	if err := os.WriteFile(passfile, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PGPASSFILE", passfile)
	newChecker, err := PostgresCheckers("user=probe dbname=postgres sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := check(t, newChecker, cl.Nodes[0].Addr(), 5*time.Second); err != nil {
		t.Fatalf("with the passfile's line for %s: %v", bl.IP(1), err)
	}
}

// A DSN with a target_session_attrs other than any (copied from an
// application's, or PGTARGETSESSIONATTRS in pgdns's environment) is
// refused: pgx would then refuse the session of every host of the other
// role (read-write: "read only connection"), so every replica counted as
// down and, with a majority of the hosts down, the cluster had no
// identity and nothing was answered at all, while -check said OK (review
// 5, against PostgreSQL 15). pgdns probes every host whatever its role.
func TestDSNWithTargetSessionAttrsIsRefused(t *testing.T) {
	for _, dsn := range []string{
		"user=u target_session_attrs=read-write",
		"user=u target_session_attrs=primary",
		"user=u target_session_attrs=standby",
		"user=u target_session_attrs=read-only",
		"user=u target_session_attrs=prefer-standby",
		"postgres://u@/db?target_session_attrs=read-write",
	} {
		if _, err := PostgresCheckers(dsn); err == nil || !strings.Contains(err.Error(), "target_session_attrs") {
			t.Errorf("%q: got %v, want an error naming target_session_attrs", dsn, err)
		}
	}
	t.Setenv("PGTARGETSESSIONATTRS", "read-write")
	if _, err := PostgresCheckers("user=u"); err == nil || !strings.Contains(err.Error(), "PGTARGETSESSIONATTRS") {
		t.Errorf("PGTARGETSESSIONATTRS=read-write: got %v, want an error naming it", err)
	}
	t.Setenv("PGTARGETSESSIONATTRS", "any")
	if _, err := PostgresCheckers("user=u target_session_attrs=any"); err != nil {
		t.Errorf("target_session_attrs=any: %v", err)
	}
}

// A DSN asking for a replication connection is refused: the server then
// starts a WAL sender, which refuses the probe's prepared statement
// ("extended query protocol not supported in a replication connection",
// 08P01), so every host was down while -check said OK (review 5, against
// PostgreSQL 15), and each session took a max_wal_senders slot.
func TestDSNWithReplicationIsRefused(t *testing.T) {
	for _, dsn := range []string{
		"user=u replication=database",
		"user=u replication=true",
		"postgres://u@/db?replication=database",
	} {
		if _, err := PostgresCheckers(dsn); err == nil || !strings.Contains(err.Error(), "replication") {
			t.Errorf("%q: got %v, want an error naming replication", dsn, err)
		}
	}
}

// pgx's own settings in probe.dsn (statement_cache_capacity,
// description_cache_capacity, default_query_exec_mode), which pgx took out
// of the startup parameters, are still accepted and never sent to the
// server, which would refuse a session naming them.
func TestDSNWithPgxSettingsIsAccepted(t *testing.T) {
	cfg, err := parseDSN("user=postgres statement_cache_capacity=10 description_cache_capacity=0 default_query_exec_mode=exec application_name=x")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"statement_cache_capacity", "description_cache_capacity", "default_query_exec_mode"} {
		if _, ok := cfg.RuntimeParams[k]; ok {
			t.Errorf("%s would be sent to the server", k)
		}
	}
	if cfg.RuntimeParams["application_name"] != "x" {
		t.Errorf("application_name %q", cfg.RuntimeParams["application_name"])
	}
}
