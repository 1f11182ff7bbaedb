package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgdns/pgdns/internal/pgtest"
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
		{"future version", `{"version": 2, "clusters": {}}`, "was written by a newer pgdns (format version 2; this one reads up to 1)"},
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
			code, _, errOut := runMain(t, context.Background(), "-config", stateConfig(t, path))
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
