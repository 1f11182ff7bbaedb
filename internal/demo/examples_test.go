package main

import (
	"bytes"
	"context"
	"errors"
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

// TestExamplesAgainstTheDemo runs every program under examples/ against
// the demo the way docs/clients (pgx.md, jdbc.md) say to: the Go ones with -dns naming pgdns, the
// JDBC one through the system resolver (pgdns on port 53, as
// `make demo DEMO_FLAGS='-dns 127.0.0.1:53'` starts it, in a mount
// namespace whose /etc/resolv.conf names it) with nothing created for it
// beforehand.
func TestExamplesAgainstTheDemo(t *testing.T) {
	pgtest.Require(t)
	testkit.RequireRoot(t, "pgdns on port 53 and a resolv.conf of its own for the JDBC example")
	goBin := testkit.RequireTool(t, "go")
	javac, java := testkit.RequireTool(t, "javac"), testkit.RequireTool(t, "java")
	const jar = "/usr/share/java/postgresql.jar"
	if _, err := os.Stat(jar); err != nil {
		testkit.Require(t, err)
	}
	entries, err := os.ReadDir("../../examples")
	if err != nil {
		t.Fatal(err)
	}
	var examples []string
	for _, e := range entries {
		examples = append(examples, e.Name())
	}
	if strings.Join(examples, " ") != "jdbc pgxpool ryow" {
		t.Fatalf("examples/ holds %v: run each new one here as its docs/clients page says", examples)
	}

	// Build while the demo starts: go run compiles the same way.
	bin := t.TempDir()
	built := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		var errs []string
		for _, c := range [][]string{
			{goBin, "build", "-o", filepath.Join(bin, "ryow"), "../../examples/ryow"},
			{goBin, "build", "-o", filepath.Join(bin, "pgxpool"), "../../examples/pgxpool"},
			{javac, "-J-XX:+UseSerialGC", "-J-XX:TieredStopAtLevel=1", "-cp", jar, "-d", bin, "../../examples/jdbc/PgdnsWrites.java"},
		} {
			if out, err := exec.CommandContext(ctx, c[0], c[1:]...).CombinedOutput(); err != nil {
				errs = append(errs, strings.Join(c, " ")+": "+err.Error()+"\n"+string(out))
			}
		}
		if len(errs) > 0 {
			built <- errors.New(strings.Join(errs, "\n"))
			return
		}
		built <- nil
	}()

	b := pgtest.Addrs(t)
	o := options{dns: b.Addr(53, 53), http: b.Addr(53, 8080), ips: b.IPs(3)}
	ctx, cancel := context.WithCancel(context.Background())
	var out testkit.Buffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, o, &out) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	waitServing(t, o, &out)
	if err := <-built; err != nil {
		t.Fatal(err)
	}

	runs := map[string][]string{
		"ryow":    {filepath.Join(bin, "ryow"), "-dns", o.dns, "-rounds", "10"},
		"pgxpool": {filepath.Join(bin, "pgxpool"), "-dns", o.dns, "-for", "3s"},
	}
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver "+b.IP(53)+"\noptions timeout:1 attempts:2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runs["jdbc"] = []string{"unshare", "-m", "sh", "-c", `mount --bind "$1" /etc/resolv.conf && shift && exec "$@"`, "sh", resolv,
		java, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx64m",
		"-Djava.security.properties=../../examples/jdbc/pgdns.java.security",
		"-cp", jar + string(os.PathListSeparator) + bin, "PgdnsWrites",
		"jdbc:postgresql://primary.db.local/postgres?targetServerType=primary&user=postgres", "3"}
	for _, name := range examples {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			c := runs[name]
			cmd := exec.CommandContext(ctx, c[0], c[1:]...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			// The JDBC example also stops when its input closes: give it
			// an input that stays open.
			cmd.Stdin = neverEOF(t)
			if err := cmd.Run(); err != nil {
				t.Fatalf("%s: %v\n%s\n%s", name, err, stdout.String(), stderr.String())
			}
			if name == "jdbc" && (!strings.Contains(stdout.String(), "write 1 ") || strings.Contains(stdout.String(), "fail ")) {
				t.Errorf("the JDBC example did not write through primary.db.local at once:\n%s", stdout.String())
			}
		})
	}
}

// waitServing waits until the demo answers primary.db.local.
func waitServing(t *testing.T, o options, out *testkit.Buffer) {
	t.Helper()
	if !testkit.Poll(90*time.Second, 100*time.Millisecond, func() bool {
		req := new(dns.Msg)
		req.SetQuestion("primary.db.local.", dns.TypeA)
		m, _, err := (&dns.Client{Timeout: 500 * time.Millisecond}).Exchange(req, o.dns)
		return err == nil && len(m.Answer) == 1
	}) {
		t.Fatalf("the demo never served:\n%s", out.String())
	}
}

// neverEOF is a reader that blocks until the test ends.
func neverEOF(t *testing.T) *os.File {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(); r.Close() })
	return r
}
