package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
)

func runMain(t *testing.T, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, nil, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pgdns.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestVersion(t *testing.T) {
	code, out, _ := runMain(t, context.Background(), "-version")
	if code != 0 || !strings.HasPrefix(out, "pgdns ") {
		t.Fatalf("exit %d, %q", code, out)
	}
}

func TestCheck(t *testing.T) {
	code, out, errOut := runMain(t, context.Background(), "-config", "../../configs/pgdns.yaml", "-check")
	if code != 0 || out != "../../configs/pgdns.yaml: OK (1 cluster, zone db.local)\n" {
		t.Fatalf("example config: exit %d, %q %q", code, out, errOut)
	}

	bad := writeConfig(t, "dns:\n  ttl: 61\nprobe:\n  interval: soon\n  dsn: \"sslmode=sometimes\"\nclusters:\n  main:\n    hosts: [a:1, a:1]\n")
	code, _, errOut = runMain(t, context.Background(), "-config", bad, "-check")
	if code != 1 {
		t.Fatalf("bad config: exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	for _, want := range []string{"dns.ttl", "probe.interval", "clusters.main.hosts[1]"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("-check output lacks %s:\n%s", want, errOut)
		}
	}
	if len(lines) != 3 {
		t.Errorf("want one line per error, got %d:\n%s", len(lines), errOut)
	}

	badDSN := writeConfig(t, "probe:\n  dsn: \"sslmode=sometimes\"\nclusters:\n  main:\n    hosts: [a:1]\n")
	if code, _, errOut = runMain(t, context.Background(), "-config", badDSN, "-check"); code != 1 || !strings.Contains(errOut, "probe.dsn") {
		t.Errorf("bad DSN: exit %d, %q", code, errOut)
	}

	if code, _, errOut = runMain(t, context.Background(), "-config", filepath.Join(t.TempDir(), "missing.yaml")); code != 1 ||
		strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, "missing.yaml") {
		t.Errorf("missing file: exit %d, %q", code, errOut)
	}
}

// -check and the start-up error print no password, whatever shape
// carries it (issue 29, item 7); the reload path reads the file the same
// way (config.Load, then app.Check).
func TestConfigErrorsPrintNoPassword(t *testing.T) {
	const canary = "canary-0xC0FFEE"
	for _, yaml := range []string{
		"probe:\n  password: " + canary + "\n",
		"probe:\n  dsn: {password: " + canary + ", user: probe}\n",
		"probe:\n  dsn: 'user=probe password=ab\"" + canary + " sslmode=sometimes'\n",
		"probe:\n  dsn: \"postgres://u:" + canary + "@/db?sslmode=sometimes\"\n",
		"probe:\n  dsn: \"postgres://u:" + canary + "@h/db\"\n", // names a host
	} {
		path := writeConfig(t, yaml+"clusters:\n  main:\n    hosts: [a:1]\n")
		for _, args := range [][]string{{"-config", path, "-check"}, {"-config", path}} {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // should it start after all
			code, out, errOut := runMain(t, ctx, args...)
			cancel()
			if code != 1 || !strings.Contains(errOut, "pgdns: config: probe.") {
				t.Errorf("%q %v: exit %d, %q", yaml, args[2:], code, errOut)
			}
			if strings.Contains(out+errOut, "C0FFEE") {
				t.Errorf("%q %v: the password was printed: %s", yaml, args[2:], errOut)
			}
		}
	}
}

func TestListenAddressInUse(t *testing.T) {
	b := pgtest.Addrs(t)
	pc, err := net.ListenPacket("udp", b.Addr(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	path := writeConfig(t, "dns:\n  listen: "+pc.LocalAddr().String()+"\nhttp:\n  listen: \"\"\nclusters:\n  main:\n    hosts: ["+b.Addr(2, 1)+"]\n")
	code, _, errOut := runMain(t, context.Background(), "-config", path)
	if code != 1 || !strings.Contains(errOut, "dns.listen") || !strings.Contains(errOut, "in use") {
		t.Fatalf("exit %d, %q", code, errOut)
	}
}

// The whole program serves until its context ends (SIGINT/SIGTERM in main)
// and then exits 0 promptly.
func TestGracefulShutdown(t *testing.T) {
	b := pgtest.Addrs(t)
	path := writeConfig(t, "dns:\n  listen: "+b.Addr(1, 0)+"\nhttp:\n  listen: \"\"\nprobe:\n  interval: 50ms\nclusters:\n  main:\n    hosts: ["+b.Addr(2, 1)+"]\n")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var stderr bytes.Buffer
	go func() { done <- run(ctx, []string{"-config", path}, nil, new(bytes.Buffer), &stderr) }()
	time.Sleep(300 * time.Millisecond)
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit 10 s after the signal")
	}
	if !strings.Contains(stderr.String(), "shutting down") || strings.Count(stderr.String(), "version="+version+" ") != 1 {
		t.Errorf("logs: %s", stderr.String())
	}
}

// pgdns -check warns, one line naming the cluster and the hosts, when a
// cluster's hosts are not all on one port, and still exits 0: the config
// is valid, and the other hosts are answered by SRV only.
func TestCheckWarnsOfHostsOnTwoPorts(t *testing.T) {
	conf := writeConfig(t, "clusters:\n  main:\n    hosts: [10.0.0.11:5432, 10.0.0.13:5433, 10.0.0.12:5432]\n")
	code, out, errOut := runMain(t, context.Background(), "-config", conf, "-check")
	want := "pgdns: warning: clusters.main: hosts are not all on port 5432 (the port of its A and AAAA answers, the one most hosts share, " +
		"which adding or removing a host can change; set clusters.main.port to keep it): 10.0.0.13:5433 answered by SRV only (_postgresql._tcp.<name>)\n" +
		conf + ": OK (1 cluster, zone db.local)\n"
	if code != 0 || out != want {
		t.Fatalf("exit %d, stdout %q, stderr %q; want stdout %q", code, out, errOut, want)
	}
}

// pgdns -check warns when two configured hosts are one server written two
// ways: an IPv4 address and its IPv4-mapped IPv6 form ([::ffff:a.b.c.d])
// on one port are one server listed twice, in one cluster or in two; on
// two ports they share an address, as two spellings of one IPv6 address
// already did. The config stays valid: exit 0.
func TestCheckSeesAnIPv4MappedAddress(t *testing.T) {
	for _, c := range []struct {
		what, config, want string
	}{
		{"one cluster, one port",
			"clusters:\n  main:\n    hosts: [\"[::ffff:10.0.0.11]:5432\", 10.0.0.11:5432, 10.0.0.12:5432]\n",
			"pgdns: warning: clusters.main.hosts: 10.0.0.11:5432 is clusters.main's [::ffff:10.0.0.11]:5432 written another way (one address and port: one server listed twice); list it once\n"},
		{"two clusters, one port",
			"clusters:\n  a:\n    hosts: [10.0.0.11:5432]\n  b:\n    hosts: [\"[::FFFF:a00:b]:5432\"]\ndns:\n  default_cluster: a\n",
			"pgdns: warning: clusters.b.hosts: [::FFFF:a00:b]:5432 is clusters.a's 10.0.0.11:5432 written another way (one address and port: one server listed twice); list it once\n"},
		{"two ports",
			"clusters:\n  main:\n    hosts: [\"[::ffff:10.0.0.11]:5433\", 10.0.0.11:5432, 10.0.0.12:5432]\n",
			"pgdns: warning: clusters.main: [::ffff:10.0.0.11]:5433, 10.0.0.11:5432 share an address on different ports: answered by SRV only (_postgresql._tcp.<name>), never by A or AAAA, whatever the client port (give each its own address)\n"},
	} {
		conf := writeConfig(t, c.config)
		code, out, errOut := runMain(t, context.Background(), "-config", conf, "-check")
		if want := c.want + conf + ": OK ("; code != 0 || !strings.HasPrefix(out, want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want stdout from %q", c.what, code, out, errOut, want)
		}
	}
}
