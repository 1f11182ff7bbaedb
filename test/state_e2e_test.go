package test

// Tests of what pgdns keeps on disk (state.path, issue 23) against real
// PostgreSQL: a restart answers as the pgdns that stopped would have.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/config"
	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/state"
	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/zone"
)

// waitState polls the state file at path until ok accepts what it holds.
func waitState(t *testing.T, path, what string, ok func(newest uint32) bool) {
	t.Helper()
	testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "the state file to hold "+what, func() (string, bool) {
		m, _, err := state.Load(path)
		if err != nil {
			return err.Error(), false
		}
		r, found := m["main"]
		return string(state.Encode(m)), found && r.Identity != 0 && ok(r.NewestTimeline)
	})
}

// firstAnswer waits until pgdns answers name at all (it answers SERVFAIL
// until its first probe round is in) and returns that first answer.
func (e *env) firstAnswer(t *testing.T, name string) []string {
	t.Helper()
	return testkit.Eventually(t, 20*time.Second, 5*time.Millisecond, "a first answer to "+name, func() ([]string, bool) {
		m := e.query(t, "udp", name, dns.TypeA)
		if m.Rcode == dns.RcodeServerFailure {
			return nil, false
		}
		return answerIPs(t, m), true
	})
}

// The reproduction of issue 23: a replica is promoted while the old
// primary keeps running (unfenced, as after a network split), with one
// replica still following it; then the new primary stops. A running pgdns
// rightly answers no primary. A pgdns restarted without its state sees
// only the old primary, writable on timeline 1 with a replica following
// it, and answers it (measured before state.path existed: every restart
// did). Restarted with its state, it answers no primary from its first
// answer on, and agrees with an instance that kept running.
func TestRestartWithStateKeepsTheSupersededPrimaryOut(t *testing.T) {
	t.Parallel()
	ips := pgtest.Addrs(t).IPs(3)
	pg := pgtest.New(t, pgtest.Options{IPs: ips})
	old, promoted := pg.Nodes[0], pg.Nodes[1]
	dir := t.TempDir()
	restartedPath, runningPath := filepath.Join(dir, "restarted.json"), filepath.Join(dir, "running.json")
	restarted := attach(t, pg, envOptions{State: restartedPath})
	running := attach(t, pg, envOptions{State: runningPath})
	waitState(t, restartedPath, "the cluster's identity on timeline 1", func(tl uint32) bool { return tl == 1 })
	ctx := context.Background()

	if err := promoted.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	restarted.waitFor(t, "primary.db.local.", []string{promoted.IP})
	running.waitFor(t, "primary.db.local.", []string{promoted.IP})
	waitState(t, restartedPath, "timeline 2", func(tl uint32) bool { return tl == 2 })
	if err := promoted.Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	restarted.waitFor(t, "primary.db.local.", nil)
	running.waitFor(t, "primary.db.local.", nil)

	// Restarted with its state: no primary from the first answer on.
	if err := restarted.app.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	again := launch(t, pg, envOptions{State: restartedPath})
	if got := again.firstAnswer(t, "primary.db.local."); len(got) != 0 {
		t.Fatalf("restarted with its state, the first answer of primary.db.local was %v: the superseded primary", got)
	}
	if got := running.ips(t, "primary.db.local."); len(got) != 0 {
		t.Fatalf("the instance that kept running answers %v", got)
	}
	again.holds(t, "primary.db.local.", 2*time.Second, exactly(), "the superseded primary after a restart with state")
	running.holds(t, "primary.db.local.", 200*time.Millisecond, exactly(), "the superseded primary")
	_, hosts := again.get(t, http.DefaultClient, "/v1/hosts", "")
	if !strings.Contains(hosts, "writable on timeline 1, superseded by timeline 2") {
		t.Errorf("/v1/hosts of the restarted pgdns does not say why the old primary is out: %s", hosts)
	}
	if !strings.Contains(again.logs.String(), "state file read") {
		t.Errorf("the start did not log reading the state file:\n%s", again.logs)
	}

	// Without its state, a restart answers the old primary: the case the
	// state file exists for.
	forgetful := launch(t, pg, envOptions{})
	forgetful.waitFor(t, "primary.db.local.", []string{old.IP})

	// Without its state but with the identity pinned and the newest
	// timeline as a floor in the config (a new pod): no primary.
	var id string
	old.Query(t, "SELECT system_identifier::text FROM pg_control_system()", &id)
	floored := launch(t, pg, envOptions{Cluster: "    system_identifier: \"" + id + "\"\n    min_timeline: 2\n"})
	if got := floored.firstAnswer(t, "primary.db.local."); len(got) != 0 {
		t.Fatalf("with min_timeline 2 and no state, the first answer of primary.db.local was %v", got)
	}
	floored.holds(t, "primary.db.local.", time.Second, exactly(), "a writable host below min_timeline")
	_, hosts = floored.get(t, http.DefaultClient, "/v1/hosts", "")
	if !strings.Contains(hosts, "writable on timeline 1, below the configured min_timeline 2") {
		t.Errorf("/v1/hosts does not say why the old primary is out: %s", hosts)
	}
	// The floor is not learned: a reload without it answers the old
	// primary again (pgdns never saw timeline 2's primary).
	next := *floored.cfg
	next.Clusters = slices.Clone(next.Clusters)
	next.Clusters[0].MinTimeline = 0
	if err := floored.app.Reload(&next); err != nil {
		t.Fatal(err)
	}
	floored.waitFor(t, "primary.db.local.", []string{old.IP})
}

// mountTmpfs mounts a tmpfs of size bytes at dir for the test: a folder
// that can be made read-only or full, even for root.
func mountTmpfs(t *testing.T, dir string, size int) {
	t.Helper()
	testkit.RequireRoot(t, "mounting a small tmpfs to make the state folder read-only or full")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.Itoa(size)+",mode=0700"); err != nil {
		testkit.Require(t, fmt.Errorf("mount tmpfs: %w", err))
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
}

// remount makes the tmpfs at dir read-only or writable again.
func remount(t *testing.T, dir string, readOnly bool) {
	t.Helper()
	flags := uintptr(syscall.MS_REMOUNT)
	if readOnly {
		flags |= syscall.MS_RDONLY
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", flags, ""); err != nil {
		t.Fatal(err)
	}
}

// fill writes a file into dir until the file system is full.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for range 1 << 16 {
		if _, err := f.Write(chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return path
			}
			t.Fatal(err)
		}
	}
	t.Fatal("the tmpfs never filled up")
	return ""
}

// A state folder that turns read-only, then full, costs pgdns nothing but
// the file: it keeps answering from memory (the promotion is answered at
// once), says so in a metric, a log line and /readyz (still 200), retries,
// and writes what it learned meanwhile once it can. Restarted on a
// read-only folder, it starts from the file it can still read.
func TestStateWriteFailuresKeepPgdnsAnswering(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "state")
	mountTmpfs(t, dir, 64<<10)
	path := filepath.Join(dir, "state.json")
	e := newEnv(t, envOptions{State: path})
	waitState(t, path, "timeline 1", func(tl uint32) bool { return tl == 1 })
	if got := e.metricSum(t, "pgdns_state_write_ok"); got != 1 {
		t.Errorf("pgdns_state_write_ok %v after a good write, want 1", got)
	}

	// Full already (so that no retry can slip in between the two
	// faults), and read-only at write time.
	filler := fill(t, dir)
	remount(t, dir, true)
	if err := e.pg.Nodes[1].Promote(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", []string{e.pg.Nodes[1].IP})
	wantFailing := func(why string) {
		t.Helper()
		e.eventually(t, "/readyz", "", func(code int, body string) bool {
			return code == http.StatusOK && strings.Contains(body, `"ready":true`) && strings.Contains(body, why) &&
				strings.Contains(body, "state file "+path+" not written since")
		})
		if got := e.metricSum(t, "pgdns_state_write_ok"); got != 0 {
			t.Errorf("pgdns_state_write_ok %v while writes fail (%s), want 0", got, why)
		}
		if !strings.Contains(e.logs.String(), `level=ERROR msg="state file not written; pgdns keeps answering`) ||
			!strings.Contains(e.logs.String(), why) {
			t.Errorf("no log line of the failed write (%s):\n%s", why, e.logs)
		}
	}
	wantFailing("read-only file system")
	failures := e.metricSum(t, "pgdns_state_write_failures_total")
	if failures < 1 {
		t.Errorf("pgdns_state_write_failures_total %v after a failed write", failures)
	}
	if m, _, err := state.Load(path); err != nil || m["main"].NewestTimeline != 1 {
		t.Errorf("the file changed on a read-only folder: %+v %v", m, err)
	}

	// Writable again but full at the retry.
	remount(t, dir, false)
	wantFailing("no space left on device")
	// Retried every 5 s, logged once.
	testkit.Eventually(t, 30*time.Second, 100*time.Millisecond, "two more failed writes", func() (float64, bool) {
		got := e.metricSum(t, "pgdns_state_write_failures_total")
		return got, got >= failures+2
	})
	if n := strings.Count(e.logs.String(), "no space left on device"); n != 1 {
		t.Errorf("the full folder was logged %d times, want once:\n%s", n, e.logs)
	}
	e.holds(t, "primary.db.local.", 300*time.Millisecond, exactly(e.pg.Nodes[1].IP), "the new primary while the state file fails")

	// Room again: the next retry writes what was learned meanwhile.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitState(t, path, "timeline 2 once there is room", func(tl uint32) bool { return tl == 2 })
	e.eventually(t, "/readyz", "", func(code int, body string) bool { return code == http.StatusOK && !strings.Contains(body, "warnings") })
	if got := e.metricSum(t, "pgdns_state_write_ok"); got != 1 {
		t.Errorf("pgdns_state_write_ok %v after writing again, want 1", got)
	}
	if !strings.Contains(e.logs.String(), "state file written again") {
		t.Errorf("no log line of the recovery:\n%s", e.logs)
	}

	// A restart on a read-only folder reads the file and answers. It
	// warns only while it has something the file lacks: never a serial
	// alone, but the primary's WAL positions once they move past the
	// file's (written at most a second behind, for a crash of pgdns).
	if err := e.app.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	m, _, err := state.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	saved := m["main"].Branches[2].Insert
	remount(t, dir, true)
	again := launch(t, e.pg, envOptions{State: path})
	if got := again.firstAnswer(t, "primary.db.local."); len(got) != 1 || got[0] != e.pg.Nodes[1].IP {
		t.Fatalf("restarted on a read-only state folder: primary %v, want %s", got, e.pg.Nodes[1].IP)
	}
	again.eventually(t, "/readyz", "", func(code int, body string) bool {
		if code != http.StatusOK || !strings.Contains(body, `"ready":true`) {
			return false
		}
		if !strings.Contains(body, "warnings") {
			return true
		}
		var now string
		e.pg.Nodes[1].Query(t, "SELECT pg_current_wal_insert_lsn()::text", &now)
		return strings.Contains(body, "not written since") && zone.LSN(parseLSN(t, now)) > saved
	})
}

// A reload keeps what pgdns remembers and the file follows the new
// config: a cluster added joins it, a cluster removed stays in it, aside,
// for a reload that lists it again (review 14b, finding 1), and the
// timeline learned before the reload stays.
func TestReloadKeepsAndUpdatesTheState(t *testing.T) {
	t.Parallel()
	ips := pgtest.Addrs(t).IPs(3)
	pg := pgtest.New(t, pgtest.Options{IPs: ips[:2]})
	spare := pgtest.New(t, pgtest.Options{IPs: ips[2:]})
	path := filepath.Join(t.TempDir(), "state.json")
	e := attach(t, pg, envOptions{State: path})
	clusters := func() map[string]uint32 {
		m, _, err := state.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]uint32{}
		for name, r := range m {
			out[name] = r.NewestTimeline
		}
		return out
	}
	wantFile := func(what string, want map[string]uint32) {
		t.Helper()
		testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "the state file to hold "+what, func() (map[string]uint32, bool) {
			got := clusters()
			return got, maps.Equal(got, want)
		})
	}
	wantFile("main on timeline 1", map[string]uint32{"main": 1})

	withSpare := *e.cfg
	withSpare.Clusters = append(slices.Clone(e.cfg.Clusters), config.Cluster{Name: "spare", Hosts: []string{spare.Nodes[0].Addr()}})
	if err := e.app.Reload(&withSpare); err != nil {
		t.Fatal(err)
	}
	wantFile("the added cluster", map[string]uint32{"main": 1, "spare": 1})
	if err := pg.Nodes[1].Promote(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", []string{pg.Nodes[1].IP})
	// All that the promotion teaches, not only the new timeline: timeline
	// 2's history file is read a probe after timeline 2 is first seen (the
	// probe asks for the right to read it first, probe/facts.go), and that
	// is written too; under load it came after the check below began.
	wantFile("main on timeline 2", map[string]uint32{"main": 2, "spare": 1})
	testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "the state file to hold timeline 2's history file and both branches", func() (string, bool) {
		m, _, err := state.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		r := m["main"]
		return string(state.Encode(m)), r.Timelines[2].FromFile &&
			r.Branches[1].Writer == pg.Nodes[0].Addr() && r.Branches[2].Writer == pg.Nodes[1].Addr()
	})
	// Written when it changes, not on every probe: each write renames a
	// new file into place, so the inode stays while nothing is learned.
	inode := func() uint64 {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	// The old primary still runs on timeline 1, and its server writes WAL
	// of its own now and then (a standby snapshot every 15 s): branch 1's
	// position moving is something learned, and that rewrite is right.
	// Only a rewrite that changed nothing is wrong; after a right one the
	// second of quiet is watched again, three times at most.
	for attempt := 1; ; attempt++ {
		written := inode()
		before, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		n, ok := testkit.Holds(time.Second, 50*time.Millisecond, func() bool { return inode() == written })
		if ok {
			break
		}
		after, _ := os.ReadFile(path)
		if bytes.Equal(after, before) || attempt == 3 {
			t.Errorf("the state file was rewritten after %d checks (attempt %d) while nothing new was learned:\n%s\nbecame\n%s", n, attempt, before, after)
			break
		}
	}

	noSpare := *e.cfg
	noSpare.Probe.Interval = 150 * time.Millisecond
	if err := e.app.Reload(&noSpare); err != nil {
		t.Fatal(err)
	}
	wantFile("main on timeline 2 and the removed cluster aside", map[string]uint32{"main": 2, "spare": 1})
	// The reloads kept timeline 2: the new primary is answered and the
	// superseded one never again. Not exactly the new primary for the
	// whole while: under load a probe of it may time out (probe.timeout),
	// and then no primary is the right answer until the next probe.
	e.waitFor(t, "primary.db.local.", []string{pg.Nodes[1].IP})
	e.holds(t, "primary.db.local.", 300*time.Millisecond, without(pg.Nodes[0].IP), "the superseded primary after the reloads")
}
