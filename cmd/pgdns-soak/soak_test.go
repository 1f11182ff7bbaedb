package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// TestSoakShort plays every fault kind once, in the order of a fixed seed,
// against a real cluster with a foreign host listed, while three clients
// check every answer. Any violation fails it; empty answers do not.
func TestSoakShort(t *testing.T) {
	pgtest.Require(t)
	testkit.SkipShort(t, "the soak takes about a minute")
	// Partitions need a network namespace of the soak's own: as root, the
	// test runs itself again in one (nothing it does there reaches the
	// machine) and passes or fails with it.
	partitions := InNetns()
	switch {
	case partitions:
	case os.Geteuid() == 0:
		var out testkit.Buffer
		code, err := Reexec([]string{"-test.run=^TestSoakShort$", "-test.count=1", "-test.v", "-test.timeout=6m"}, &out)
		if err != nil {
			t.Fatal(err)
		}
		if code != 0 || testing.Verbose() {
			t.Logf("the soak in its own network namespace (exit %d):\n%s", code, out.String())
		}
		if code != 0 {
			t.Fatalf("the soak failed in its network namespace (exit %d)", code)
		}
		return
	case os.Getenv("CI") == "true":
		t.Fatal("the soak's partitions need root (a network namespace of its own, nftables); CI runs as root")
	default:
		t.Log("not root: no network namespace of its own, so no partitions")
	}
	progress := &testkit.Buffer{}
	var out io.Writer = progress
	if testing.Verbose() {
		out = io.MultiWriter(progress, os.Stderr)
	}
	pgdnsLog := &testkit.Buffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{Seed: 1, Short: true, Addrs: pgtest.Addrs(t), Foreign: true, Log: out, PGDNS: pgdnsLog, Partitions: partitions})
	if err != nil {
		t.Fatalf("soak harness: %v\n%s", err, progress)
	}
	t.Logf("\n%s", rep)
	if len(rep.Violations) > 0 {
		t.Errorf("%d violations (seed %d; reproduce with make soak SEED=%d SHORT=1)\nprogress:\n%s\npgdns's warnings and errors:\n%s",
			len(rep.Violations), rep.Seed, rep.Seed, progress, warnings(pgdnsLog.String(), 40))
	}
}

// warnings returns up to n lines of a slog text log at WARN or ERROR.
func warnings(log string, n int) string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if (strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR")) && !strings.Contains(line, "from=down to=down") {
			out = append(out, line)
		}
	}
	if len(out) > n {
		out = append(out[:n], fmt.Sprintf("… and %d more", len(out)-n))
	}
	return strings.Join(out, "\n")
}

func TestPlanIsTheSeeds(t *testing.T) {
	draw := func(seed uint64, short bool, n int) []Fault {
		p := NewPlanner(seed, short, nil)
		var out []Fault
		for range n {
			f, ok := p.Next()
			if !ok {
				break
			}
			out = append(out, f)
		}
		return out
	}
	a, b := draw(7, false, 50), draw(7, false, 50)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("seed 7 drew %v then %v at %d", a[i], b[i], i)
		}
	}
	if c := draw(8, false, 50); c[0] == a[0] && c[1] == a[1] && c[2] == a[2] {
		t.Errorf("seeds 7 and 8 drew the same start: %v", c[:3])
	}
	short := draw(1, true, 100)
	if len(short) != len(Kinds)+1 { // and a second restart-pgdns, into an unfenced failover
		t.Fatalf("short plan has %d faults, want %d", len(short), len(Kinds)+1)
	}
	seen := map[string]bool{}
	for _, f := range short {
		seen[f.Kind] = true
	}
	if len(seen) != len(Kinds) {
		t.Errorf("short plan misses kinds: %v", short)
	}
}

func TestLSN(t *testing.T) {
	l, err := ParseLSN("1/3000060")
	if err != nil || l != 1<<32|0x3000060 || l.String() != "1/3000060" || l.Label() != "1-3000060" {
		t.Fatalf("ParseLSN = %v %v", l, err)
	}
	if _, err := ParseLSN("3000060"); err == nil {
		t.Error("no slash accepted")
	}
}

func TestParseTXT(t *testing.T) {
	ip, age, err := parseTXT("host=127.0.0.12:5432 role=replica lag_ms=3 lag_bytes=0 replay_lsn=0/3000060 age_ms=120")
	if err != nil || ip != "127.0.0.12" || age != 120*time.Millisecond {
		t.Fatalf("parseTXT = %q %v %v", ip, age, err)
	}
	for _, bad := range []string{"role=replica age_ms=1", "host=127.0.0.1:5432 role=replica", "host=127.0.0.1:5432 age_ms=-1", "host=x age_ms=1"} {
		if _, _, err := parseTXT(bad); err == nil {
			t.Errorf("parseTXT(%q) accepted", bad)
		}
	}
	q := question{sent: time.Unix(100, 0), ages: map[string]time.Duration{"127.0.0.12": 120 * time.Millisecond}}
	if got, want := q.sampleEnd("127.0.0.12"), time.Unix(100, 0).Add(-121*time.Millisecond); !got.Equal(want) {
		t.Errorf("sampleEnd from TXT = %v, want %v", got, want)
	}
	if got, want := q.sampleEnd("127.0.0.13"), time.Unix(100, 0).Add(-Stale); !got.Equal(want) {
		t.Errorf("sampleEnd without TXT = %v, want %v", got, want)
	}
}

// TestLackedBefore: the heartbeat a replica lacks counts only once it is
// settled in the newest timeline's history.
func TestLackedBefore(t *testing.T) {
	t0 := time.Unix(100, 0)
	w := &world{timeline: 2, forks: map[int]LSN{1: 1000}, primary: &pgtest.Node{}}
	w.hb = []ack{
		{id: 1, tl: 1, lsn: 900, at: t0},                            // before the fork: settled
		{id: 2, tl: 1, lsn: 1100, at: t0.Add(time.Millisecond)},     // past the fork: lost
		{id: 3, tl: 2, lsn: 1200, at: t0.Add(2 * time.Millisecond)}, // on the newest timeline
	}
	if hb, ok := w.lackedBefore(0, t0.Add(time.Second)); !ok || hb.id != 1 {
		t.Errorf("lacking 1..3: got %v %v, want heartbeat 1", hb.id, ok)
	}
	if hb, ok := w.lackedBefore(1, t0.Add(time.Second)); !ok || hb.id != 3 {
		t.Errorf("lacking 2..3: got %v %v, want heartbeat 3 (2 was lost)", hb.id, ok)
	}
	if _, ok := w.lackedBefore(1, t0.Add(2*time.Millisecond)); ok {
		t.Error("heartbeat 3 acknowledged at the bound counted")
	}
	w.primary = nil // its primary killed, no successor yet: 3 may be lost
	if _, ok := w.lackedBefore(1, t0.Add(time.Second)); ok {
		t.Error("a heartbeat of an undecided timeline tail counted")
	}
}

// TestReloadEpochs: a host of a new list counts as configured from when
// its reload began, before Reload returns (a client checked an answer from
// it first in the 60-minute run, and four answers were called wrong); the
// old list ends when the reload returned, and a refused reload's list
// never counts.
func TestReloadEpochs(t *testing.T) {
	w := &world{}
	w.reloading([]string{"127.0.0.1:5432"})(true)
	done := w.reloading([]string{"127.0.0.2:5432"})
	now := time.Now()
	if !w.configuredFor("127.0.0.2", now, now) || !w.configuredFor("127.0.0.1", now, now) {
		t.Fatal("during a reload, a host of either list is not configured")
	}
	done(true)
	time.Sleep(time.Millisecond)
	later := time.Now()
	if w.configuredFor("127.0.0.1", later, later) || !w.configuredFor("127.0.0.2", later, later) {
		t.Fatal("after the reload, the old list still counts or the new one does not")
	}
	w.reloading([]string{"127.0.0.3:5432"})(false)
	if w.configuredFor("127.0.0.3", time.Now(), time.Now()) {
		t.Fatal("a refused reload's host counts as configured")
	}
}
