package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/state"
	"github.com/pgdns/pgdns/internal/testkit"
)

// stateConfig writes a config whose state.path is path and returns it.
func stateConfig(t *testing.T, path string) string {
	t.Helper()
	b := pgtest.Addrs(t)
	return writeConfig(t, "dns:\n  listen: "+b.Addr(1, 0)+"\nhttp:\n  listen: \"\"\nclusters:\n  main:\n    hosts: ["+
		b.Addr(2, 1)+"]\nstate:\n  path: "+path+"\n")
}

// A state file pgdns cannot use stops the start with one line naming the
// file and what is wrong with it, and pointing at -reset-state: starting
// as if nothing had been learned could answer a superseded primary.
func TestStartRefusesAnUnusableStateFile(t *testing.T) {
	good := `{"version": 1, "clusters": {"main": {"system_identifier": "7713995393360043562", "newest_timeline": 2}}}`
	for _, tc := range []struct{ name, data, want string }{
		{"empty", "", "is empty"},
		{"truncated", good[:40], "does not parse as JSON (truncated or corrupt?)"},
		{"corrupt", strings.Replace(good, ":", "\x00", 3), "does not parse as JSON"},
		{"future version", fmt.Sprintf(`{"version": %d, "clusters": {}}`, state.Version+1),
			fmt.Sprintf("was written by a newer pgdns (format version %d; this one reads up to %d)", state.Version+1, state.Version)},
		{"a folder", "", "cannot be read: is a directory"},
		{"no folder", "", "cannot be written: its folder"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.json")
			var err error
			switch tc.name {
			case "a folder":
				err = os.Mkdir(path, 0o700)
			case "no folder":
				path = filepath.Join(filepath.Dir(path), "missing", "state.json")
			default:
				err = os.WriteFile(path, []byte(tc.data), 0o600)
			}
			if err != nil {
				t.Fatal(err)
			}
			// A file pgdns wrongly accepts would start it: a deadline ends
			// that start, so the case fails instead of hanging the package.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			code, _, errOut := runMain(t, ctx, "-config", stateConfig(t, path))
			// The start-up log line naming the build comes first, by design;
			// what is wrong is said in the one line after it.
			if first, rest, ok := strings.Cut(errOut, "\n"); ok && strings.HasPrefix(first, "time=") && strings.Contains(first, "msg=pgdns version=") {
				errOut = rest
			}
			want := "pgdns: state file " + path + " "
			if code != 1 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.HasPrefix(errOut, want) ||
				!strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "-reset-state") {
				t.Errorf("exit %d, stderr %q; want exit 1 and one line starting %q saying %q", code, errOut, want, tc.want)
			}
		})
	}
}

// -reset-state removes the state file, says loudly what is forgotten, and
// exits; a file that does not parse is removed all the same.
func TestResetState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	cfg := stateConfig(t, path)
	for _, tc := range []struct{ name, data, want string }{
		{"good", `{"version": 1, "clusters": {"main": {"system_identifier": "7713995393360043562", "newest_timeline": 2}}}`,
			"main (system identifier 7713995393360043562, newest timeline 2, 0 timeline histories)"},
		{"corrupt", `{"version": 1, `, "removing a state file that cannot be used"},
		{"missing", "", "no state file to remove"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name != "missing" {
				if err := os.WriteFile(path, []byte(tc.data), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			code, _, errOut := runMain(t, context.Background(), "-config", cfg, "-reset-state")
			if code != 0 || !strings.Contains(errOut, "level=WARN msg=\"RESETTING STATE") || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit 0 and a warning saying %q", code, errOut, tc.want)
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("the state file is still there: %v", err)
			}
		})
	}
	noPath := writeConfig(t, "clusters:\n  main:\n    hosts: [127.0.0.1:5432]\n")
	if code, _, errOut := runMain(t, context.Background(), "-config", noPath, "-reset-state"); code != 1 || !strings.Contains(errOut, "state.path is not set") {
		t.Errorf("without state.path: exit %d, %q", code, errOut)
	}
}

// Two pgdns processes on one state.path (a scaled compose service on a
// shared volume, two systemd instances from one config) would overwrite
// each other's knowledge: the one that knows less erased a newer timeline,
// and a restart answered the superseded primary (review R6). The second
// one is refused with one line naming the file and the holder's pid, and
// so is -reset-state while pgdns runs; the first one's file is left as it
// wrote it. Once the first stops, the file is free again.
func TestOneProcessPerStateFile(t *testing.T) {
	b := pgtest.Addrs(t)
	pg := pgtest.New(t, pgtest.Options{IPs: b.IPs(2)})
	path := filepath.Join(t.TempDir(), "state.json")
	conf := func(dnsAddr string) string {
		return writeConfig(t, fmt.Sprintf("dns: {listen: %q}\nhttp: {listen: \"\"}\nprobe: {interval: 100ms, dsn: \"user=postgres dbname=postgres sslmode=disable\"}\n"+
			"clusters:\n  main:\n    hosts: [%s, %s]\nstate:\n  path: %s\n", dnsAddr, pg.Nodes[0].Addr(), pg.Nodes[1].Addr(), path))
	}
	first, second := b.Addr(53, 5353), b.Addr(54, 5353)
	cmd, _ := startProcess(t, conf(first))
	waitAnswer(t, first, "primary.db.local.", 1)
	written := testkit.Eventually(t, 15*time.Second, 50*time.Millisecond, "the first pgdns to write its state file", func() (string, bool) {
		data, err := os.ReadFile(path)
		m, _, lerr := state.Load(path)
		return string(data), err == nil && lerr == nil && m["main"].NewestTimeline == 1
	})

	want := fmt.Sprintf("pgdns: state file %s is in use by pgdns pid %d: give each instance its own state.path", path, cmd.Process.Pid)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // bounds a start that is not refused
	defer cancel()
	code, _, errOut := runMain(t, ctx, "-config", conf(second))
	if lines := strings.Split(strings.TrimSpace(errOut), "\n"); code != 1 || lines[len(lines)-1] != want {
		t.Errorf("a second pgdns on the same state.path: exit %d, stderr:\n%s\nwant exit 1 and the last line %q", code, errOut, want)
	}
	code, _, errOut = runMain(t, context.Background(), "-config", conf(second), "-reset-state")
	if code != 1 || !strings.Contains(errOut, fmt.Sprintf("in use by pgdns pid %d: stop it first; nothing was removed", cmd.Process.Pid)) {
		t.Errorf("-reset-state while pgdns runs: exit %d, stderr:\n%s", code, errOut)
	}
	if data, err := os.ReadFile(path); err != nil || string(data) != written {
		t.Errorf("the first pgdns's state file changed: %v\n%s\nwant\n%s", err, data, written)
	}

	// Stopped, the first one frees the file: -reset-state may forget it.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the first pgdns: %v", err)
	}
	if code, _, errOut := runMain(t, context.Background(), "-config", conf(second), "-reset-state"); code != 0 {
		t.Errorf("-reset-state after pgdns stopped: exit %d, stderr:\n%s", code, errOut)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the state file is still there after -reset-state: %v", err)
	}
}
