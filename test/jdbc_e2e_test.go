package test

// JDBC (pgjdbc, Debian's jar) finding the primary through pgdns via the
// system resolver, across a switchover: examples/jdbc run as a user would
// run it, with the JVM's DNS cache cut to pgdns's TTL.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// pgjdbcJar is where Debian's libpostgresql-jdbc-java puts pgjdbc.
const pgjdbcJar = "/usr/share/java/postgresql.jar"

// requireJar finds a jar like testkit.RequireTool finds a program:
// missing, it fails the test under CI (where .ci/run installs it) and
// skips it elsewhere.
func requireJar(t *testing.T, path, pkg string) string {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		testkit.Require(t, fmt.Errorf("%s is missing (apt-get install %s)", path, pkg))
	}
	return path
}

// jdbcEvent is one line of examples/jdbc's output.
type jdbcEvent struct {
	kind   string // "cache", "write", "fail", "done"
	seq    int
	at     time.Time
	server string
	text   string
}

func parseJDBCEvent(line string) jdbcEvent {
	f := strings.Fields(line)
	ev := jdbcEvent{kind: f[0], text: line}
	millis := func(s string) time.Time {
		ms, _ := strconv.ParseInt(s, 10, 64)
		return time.UnixMilli(ms)
	}
	switch {
	case ev.kind == "write" && len(f) == 4:
		ev.seq, _ = strconv.Atoi(f[1])
		ev.at, ev.server = millis(f[2]), f[3]
	case ev.kind == "fail" && len(f) >= 2:
		ev.at = millis(f[1])
	}
	return ev
}

// TestJDBCSwitchover runs examples/jdbc, a pgjdbc program that writes in a
// loop and reconnects on failure, against pgdns through the system
// resolver; it stops the primary (-m fast) and promotes a replica, and
// checks that the program's writes reach the new primary soon after the
// promote, that none lands on the old host after it stopped, and that
// every acknowledged write is on the new primary.
func TestJDBCSwitchover(t *testing.T) {
	t.Parallel()
	b := pgtest.Addrs(t)
	dnsIP := b.IP(53)
	ns := newResolverNS(t, dnsIP)
	javac, java := testkit.RequireTool(t, "javac"), testkit.RequireTool(t, "java")
	jar := requireJar(t, pgjdbcJar, "libpostgresql-jdbc-java")
	src, err := filepath.Abs("../examples/jdbc")
	if err != nil {
		t.Fatal(err)
	}

	// javac is slow on a loaded machine: compile while the cluster starts.
	classes := t.TempDir()
	compiled := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, javac, "-J-XX:+UseSerialGC", "-J-XX:TieredStopAtLevel=1",
			"-cp", jar, "-d", classes, filepath.Join(src, "PgdnsWrites.java")).CombinedOutput()
		if err != nil {
			err = fmt.Errorf("javac: %w: %s", err, out)
		}
		compiled <- err
	}()

	e := newEnvIn(t, b, envOptions{Interval: "250ms", Listen: dnsIP + ":53"})
	p, r1, r2 := e.ip(0), e.ip(1), e.ip(2)
	e.waitFor(t, "replica.db.local.", []string{r1, r2})
	if err := <-compiled; err != nil {
		t.Fatal(err)
	}

	// The program, in a mount namespace whose /etc/resolv.conf names pgdns.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const url = "jdbc:postgresql://primary.db.local/postgres?targetServerType=primary" +
		"&user=postgres&sslmode=disable&connectTimeout=2&socketTimeout=5&loginTimeout=5"
	cmd := exec.CommandContext(ctx, "unshare", "-m", "sh", "-c",
		`mount --bind "$1" /etc/resolv.conf && shift && exec "$@"`, "sh", ns.conf,
		java, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx64m",
		"-Djava.security.properties="+filepath.Join(src, "pgdns.java.security"),
		"-cp", jar+string(os.PathListSeparator)+classes, "PgdnsWrites", url, "100")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr testkit.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Far more room than the program can fill (it stops after 100 s), so
	// that it never blocks on its output while the test is busy.
	events := make(chan jdbcEvent, 50000)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if line := strings.TrimSpace(sc.Text()); line != "" {
				events <- parseJDBCEvent(line)
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var seen []jdbcEvent
	// next waits for the program's next line.
	next := func(within time.Duration) (jdbcEvent, bool) {
		select {
		case ev, ok := <-events:
			if ok {
				seen = append(seen, ev)
			}
			return ev, ok
		case <-time.After(within):
			return jdbcEvent{}, false
		}
	}
	defer func() {
		stdin.Close()
		_ = cmd.Wait()
		if t.Failed() {
			var lines []string
			for _, ev := range seen[max(0, len(seen)-40):] {
				lines = append(lines, ev.text)
			}
			t.Logf("last lines of examples/jdbc:\n%s\nstderr:\n%s", strings.Join(lines, "\n"), stderr.String())
		}
	}()
	// waitWrites reads events until n writes have landed on server.
	waitWrites := func(server string, n int, within time.Duration) time.Time {
		t.Helper()
		deadline := time.Now().Add(within)
		for got := 0; got < n; {
			ev, ok := next(time.Until(deadline))
			if !ok {
				t.Fatalf("%d of %d writes on %s within %v", got, n, server, within)
			}
			if ev.kind == "write" && ev.server == server {
				if got++; got == n {
					return ev.at
				}
			}
		}
		return time.Time{}
	}

	if ev, ok := next(60 * time.Second); !ok || ev.text != "cache ttl=1 negative=0" {
		t.Fatalf("first line %q, want the JVM's DNS cache at 1 s and 0 s", ev.text)
	}
	waitWrites(p, 5, 30*time.Second)

	bg := context.Background()
	if err := e.pg.Nodes[0].Stop(bg, "fast"); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	if err := e.pg.Nodes[1].Promote(bg); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	firstOnNew := waitWrites(r1, 1, 20*time.Second)
	waitWrites(r1, 20, 20*time.Second)
	stdin.Close()
	for range 50000 { // to the program's last line
		if ev, ok := next(20 * time.Second); !ok || ev.kind == "done" {
			break
		}
	}

	// What the program saw, by server.
	acked := []int{}
	var lastOnOld time.Time
	failures := 0
	for _, ev := range seen {
		switch ev.kind {
		case "write":
			acked = append(acked, ev.seq)
			switch ev.server {
			case p:
				lastOnOld = ev.at
				if ev.at.After(stopped) {
					t.Errorf("write %d landed on the old primary %s at %s, after it stopped at %s",
						ev.seq, p, ev.at.Format("15:04:05.000"), stopped.Format("15:04:05.000"))
				}
			case r1:
			default:
				t.Errorf("write %d landed on %s, neither the old nor the new primary", ev.seq, ev.server)
			}
		case "fail":
			failures++
		}
	}
	// Every write the program saw committed is on the new primary: a fast
	// shutdown sends all WAL to the replicas before it completes.
	var onNew []int32
	e.pg.Nodes[1].Query(t, "SELECT coalesce(array_agg(seq ORDER BY seq), '{}') FROM jdbc_writes", &onNew)
	for _, s := range acked {
		if !slices.Contains(onNew, int32(s)) {
			t.Errorf("acknowledged write %d is not on the new primary", s)
		}
	}
	after := firstOnNew.Sub(promoted)
	t.Logf("JDBC switchover: %d writes, %d failed attempts; last write on the old primary %v before pg_ctl stop returned; "+
		"first write on the new primary %v after pg_ctl promote returned (%v after the old primary stopped)",
		len(acked), failures, stopped.Sub(lastOnOld).Round(time.Millisecond),
		after.Round(time.Millisecond), firstOnNew.Sub(stopped).Round(time.Millisecond))
	if after > 10*time.Second {
		t.Errorf("writes reached the new primary %v after the promote, want within 10 s", after)
	}
}
