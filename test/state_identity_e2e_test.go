package test

// Tests that what pgdns remembers belongs to a cluster's system identity,
// not to its name in the config, and that remembered knowledge of another
// identity is never applied and never dropped silently (review findings
// R5 and R3), against real PostgreSQL.

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/state"
	"github.com/pgdns/pgdns/internal/testkit"
)

// waitStateOf polls the state file at path until cluster name's entry
// has a newest timeline ok accepts and no other name is left in it.
func waitStateOf(t *testing.T, path, name, what string, ok func(newest uint32) bool) {
	t.Helper()
	testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "the state file to hold "+what, func() (string, bool) {
		m, _, err := state.Load(path)
		if err != nil {
			return err.Error(), false
		}
		r, found := m[name]
		return string(state.Encode(m)), len(m) == 1 && found && r.Identity != 0 && ok(r.NewestTimeline)
	})
}

// The reproduction of R5: a promotion while the old primary keeps running
// unfenced (one replica still following it), then the new primary stops:
// pgdns rightly answers no primary. A reload renaming the cluster (main:
// → prod:, same hosts) used to start the new cluster from nothing: it
// answered the superseded primary, and the state file was rewritten
// without timeline 2. Now prod inherits main's knowledge (same system
// identifier), and so does a restart from that file under a third name.
func TestRenamedClusterKeepsItsNewestTimeline(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.json")
	e := newEnv(t, envOptions{State: path})
	promoted := e.pg.Nodes[1]
	ctx := context.Background()
	if err := promoted.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", []string{promoted.IP})
	waitStateOf(t, path, "main", "timeline 2", func(tl uint32) bool { return tl == 2 })
	if err := promoted.Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", nil)

	next := *e.cfg
	next.Clusters = slices.Clone(e.cfg.Clusters)
	next.Clusters[0].Name = "prod"
	next.DNS.DefaultCluster = "prod"
	if err := e.app.Reload(&next); err != nil {
		t.Fatal(err)
	}
	e.holds(t, "primary.prod.db.local.", 2*time.Second, exactly(), "the superseded primary after a reload renaming the cluster")
	waitStateOf(t, path, "prod", "timeline 2 under the new name", func(tl uint32) bool { return tl == 2 })
	if !strings.Contains(e.logs.String(), `msg="cluster inherits what pgdns knew of it under another name`) {
		t.Errorf("the reload did not log the inheritance:\n%s", e.logs)
	}

	// Restarted from the file, the cluster renamed once more.
	if err := e.app.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	again := launch(t, e.pg, envOptions{State: path, Name: "stage"})
	if got := again.firstAnswer(t, "primary.stage.db.local."); len(got) != 0 {
		t.Fatalf("restarted under another name, the first answer of primary was %v: the superseded primary", got)
	}
	again.holds(t, "primary.stage.db.local.", 2*time.Second, exactly(), "the superseded primary after a restart under another name")
	waitStateOf(t, path, "stage", "timeline 2 under the third name", func(tl uint32) bool { return tl == 2 })
}

// R3: a state file whose identity no live host has (another cluster's
// file, a restore of the wrong volume) is not applied: the hosts'
// majority identity is taken, as a running pgdns takes a rebuilt
// cluster's. It used to be dropped without a word; now a WARN line names
// the cluster, both identities and what is dropped. With the identity
// pinned in the config, the other file's entry is dropped the same way,
// loudly too.
func TestStateFileOfAnotherClusterIsDroppedLoudly(t *testing.T) {
	t.Parallel()
	ips := pgtest.Addrs(t).IPs(3)
	pg := pgtest.New(t, pgtest.Options{IPs: ips})
	var id string
	pg.Nodes[0].Query(t, "SELECT system_identifier::text FROM pg_control_system()", &id)
	const foreign = "1234567890123456789"
	write := func(path string) {
		t.Helper()
		data := `{"version": 1, "clusters": {"main": {"system_identifier": "` + foreign + `", "newest_timeline": 2,
  "timelines": {"2": {"from_history_file": true, "ends": [{"timeline": 1, "end": "0/3000060"}]}}}}}`
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()

	path := filepath.Join(dir, "unpinned.json")
	write(path)
	e := attach(t, pg, envOptions{State: path})
	want := []string{`level=WARN msg="cluster identity replaced`, "cluster=main", "system_identifier_before=" + foreign,
		"system_identifier_after=" + id, "dropped_newest_timeline=2", "dropped_timeline_histories=1", `remembered_from="the state file"`}
	testkit.Eventually(t, 10*time.Second, 20*time.Millisecond, "a WARN line about the replaced identity", func() (string, bool) {
		line := logLine(e.logs.String(), want[0])
		return e.logs.String(), containsAll(line, want)
	})

	pinned := filepath.Join(dir, "pinned.json")
	write(pinned)
	p := attach(t, pg, envOptions{State: pinned, Cluster: "    system_identifier: \"" + id + "\"\n"})
	want = []string{`level=WARN msg="remembered knowledge not applied`, "cluster=main", "system_identifier_pinned=" + id,
		"system_identifier_remembered=" + foreign, "dropped_newest_timeline=2", "dropped_timeline_histories=1"}
	if line := logLine(p.logs.String(), want[0]); !containsAll(line, want) {
		t.Errorf("no WARN line about the pinned identity's mismatch with %v:\n%s", want, p.logs)
	}
}

// logLine is the first line of logs containing s, or "".
func logLine(logs, s string) string {
	for line := range strings.Lines(logs) {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}

func containsAll(line string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(line, p) {
			return false
		}
	}
	return true
}
