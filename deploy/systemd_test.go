package deploy

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pgdns/pgdns/internal/config"
	"github.com/pgdns/pgdns/internal/testkit"
)

const unitFile = "systemd/pgdns.service"

// unitBinary is where the unit expects pgdns.
const unitBinary = "/usr/local/bin/pgdns"

// readUnit returns a unit file's settings: section.Key → values in order.
func readUnit(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	keys := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: not key=value: %q", path, line)
			}
			keys[section+"."+k] = append(keys[section+"."+k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestSystemdUnitSettings: the unit runs pgdns as an unprivileged,
// sandboxed notify service that can bind port 53, restarts it on failure
// and reloads it with SIGHUP (which cmd/pgdns handles).
func TestSystemdUnitSettings(t *testing.T) {
	keys := readUnit(t, unitFile)
	want := map[string]string{
		"Service.Type":                    "notify",
		"Service.ExecStart":               unitBinary + " -config /etc/pgdns/pgdns.yaml",
		"Service.ExecStartPre":            unitBinary + " -config /etc/pgdns/pgdns.yaml -check",
		"Service.ExecReload":              "/bin/kill -HUP $MAINPID",
		"Service.Restart":                 "on-failure",
		"Service.DynamicUser":             "yes",
		"Service.AmbientCapabilities":     "CAP_NET_BIND_SERVICE",
		"Service.CapabilityBoundingSet":   "CAP_NET_BIND_SERVICE",
		"Service.NoNewPrivileges":         "yes",
		"Service.ProtectSystem":           "strict",
		"Service.ProtectHome":             "yes",
		"Service.PrivateTmp":              "yes",
		"Service.RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
		"Service.StateDirectory":          "pgdns",
		"Service.Environment":             "PGDNS_STATE__PATH=/var/lib/pgdns/state.json",
		"Install.WantedBy":                "multi-user.target",
	}
	for k, v := range want {
		if got := keys[k]; len(got) != 1 || got[0] != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if f := keys["Service.SystemCallFilter"]; len(f) == 0 || f[0] != "@system-service" {
		t.Errorf("SystemCallFilter = %q, want @system-service first", f)
	}
	if slices.Contains(keys["Service.User"], "root") {
		t.Error("the unit runs as root")
	}
	// The installed config (configs/pgdns.yaml) with the unit's
	// environment keeps the state file in the StateDirectory, which
	// systemd creates for the dynamic user and keeps across restarts.
	cfg, err := config.Load("../configs/pgdns.yaml", keys["Service.Environment"])
	if err != nil {
		t.Fatal(err)
	}
	if dir := "/var/lib/" + keys["Service.StateDirectory"][0]; filepath.Dir(cfg.State.Path) != dir {
		t.Errorf("state.path under the unit is %q, want a file in %s", cfg.State.Path, dir)
	}
}

// TestSystemdAnalyzeVerify checks the unit with systemd's own tools:
// `systemd-analyze verify` (syntax, unknown keys, executables) and the
// offline security review, whose exposure must stay "OK" (≤ 2.0). verify
// insists that ExecStart's binary exists, so pgdns is built into a
// temporary directory and a copy of the unit points there.
func TestSystemdAnalyzeVerify(t *testing.T) {
	t.Parallel()
	analyze := testkit.RequireTool(t, "systemd-analyze")
	goTool := testkit.RequireTool(t, "go")
	dir := t.TempDir()
	bin := filepath.Join(dir, "pgdns")
	if out, err := exec.Command(goTool, "build", "-o", bin, "../cmd/pgdns").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	unit, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "ExecStart="+unitBinary+" ") {
		t.Fatalf("ExecStart does not run %s", unitBinary)
	}
	copyPath := filepath.Join(dir, "pgdns.service")
	if err := os.WriteFile(copyPath, []byte(strings.ReplaceAll(string(unit), unitBinary, bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	// verify exits 0 on warnings (an unknown key is one): any output fails.
	out, err := exec.Command(analyze, "verify", copyPath).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	// --threshold is on the 0-100 scale of exposure × 10.
	out, err = exec.Command(analyze, "security", "--offline=yes", "--threshold=20", copyPath).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security: exposure above 2.0 (%v):\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	t.Log(lines[len(lines)-1])
}
