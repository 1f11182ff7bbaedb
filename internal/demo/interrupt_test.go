package main

import (
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// childEnv marks a run of this test binary as the demo itself (not
// PGDNS_...: the demo's configuration would take it for a key).
const childEnv = "DEMO_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestCtrlCTearsEverythingDown runs the demo as a process of its own and
// interrupts it at moments of its start-up and once it serves, and once
// kills it. Each time no process of the demo may remain, nor any of its
// files.
func TestCtrlCTearsEverythingDown(t *testing.T) {
	pgtest.Require(t)
	serving := func(out string, _ time.Duration) bool { return strings.Contains(out, "Ctrl-C stops") }
	cases := []struct {
		name  string
		group bool // SIGINT to the process group (Ctrl-C), else to the demo alone
		slow  bool // pg_basebackup sleeps 3 s first: a clone surely in progress
		tee   bool // stdout's reader goes first, as tee does at Ctrl-C in `make demo | tee demo.log`
		kill  bool // SIGKILL to the demo alone instead of SIGINT
		now   func(out string, primaryUpFor time.Duration) bool
	}{
		{name: "Ctrl-C during initdb", group: true, now: func(out string, _ time.Duration) bool { return strings.Contains(out, "starting a primary") }},
		// SIGINT to the demo alone (kill -INT, a process manager): the step
		// in progress does not get it from the terminal, the demo must stop
		// it. A second after the primary is up, the first clone sleeps.
		{name: "SIGINT while a replica is cloned", slow: true, now: func(_ string, up time.Duration) bool { return up > time.Second }},
		{name: "Ctrl-C while serving", group: true, now: serving},
		// The demo's next write after tee's death gets EPIPE (SIGPIPE
		// killed it once, and its servers ran on).
		{name: "Ctrl-C while serving into tee", group: true, tee: true, now: serving},
		// Nothing of the demo's own runs after kill -9: its servers must
		// not outlive it all the same.
		{name: "kill -9 while serving", kill: true, now: serving},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := pgtest.Addrs(t)
			ips := b.IPs(3)
			// Everything the demo writes goes under tmp, which the
			// servers (run as postgres when we are root) can reach.
			tmp, err := os.MkdirTemp("", "pgdns-demo-test-")
			if err != nil {
				t.Fatal(err)
			}
			// Whatever a failure leaves goes, as the reaper would take it.
			t.Cleanup(func() { _ = clean(tmp) })
			if err := os.Chmod(tmp, 0o755); err != nil {
				t.Fatal(err)
			}
			env := append(os.Environ(), childEnv+"=1", "TMPDIR="+tmp)
			if tc.slow {
				env = append(env, "PG_BINDIR="+slowClone(t))
			}
			cmd := exec.Command(os.Args[0], "-dns", b.Addr(53, 5353), "-http", b.Addr(53, 8080), "-ips", strings.Join(ips, ","))
			cmd.Env = env
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a group of its own, as a terminal's job
			var out, logs lockedText
			stdout, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			// With tee, stderr shares stdout's pipe (2>&1).
			cmd.Stdout, cmd.Stderr = w, &logs
			if tc.tee {
				cmd.Stderr = w
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			w.Close()
			exited := make(chan error, 1)
			go func() {
				_, _ = io.Copy(&out, stdout)
				exited <- cmd.Wait()
			}()
			t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })

			var upAt time.Time
			if !testkit.Poll(90*time.Second, time.Millisecond, func() bool {
				if upAt.IsZero() && pgUp(ips[0]) {
					upAt = time.Now()
				}
				var upFor time.Duration
				if !upAt.IsZero() {
					upFor = time.Since(upAt)
				}
				if tc.now(out.String(), upFor) {
					return true
				}
				select {
				case err := <-exited:
					t.Fatalf("the demo exited (%v) before the moment:\n%s\n%s", err, out.String(), logs.String())
				default:
				}
				return false
			}) {
				t.Fatalf("the moment never came:\n%s\n%s", out.String(), logs.String())
			}
			if tc.tee {
				// tee is gone: nobody reads what the demo writes.
				stdout.Close()
			}
			pid, sig := cmd.Process.Pid, syscall.SIGINT
			if tc.group {
				pid = -pid
			}
			if tc.kill {
				sig = syscall.SIGKILL
			}
			if err := syscall.Kill(pid, sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-exited:
				if err != nil && !tc.kill {
					t.Errorf("the demo exited with %v after SIGINT", err)
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("the demo did not exit 60 s after %v:\n%s\n%s", sig, out.String(), logs.String())
			}
			if tc.kill {
				// What stops the servers of a killed demo takes a moment.
				testkit.Poll(30*time.Second, 100*time.Millisecond, func() bool {
					files, _ := filepath.Glob(filepath.Join(tmp, "*"))
					return len(processesUnder(tmp)) == 0 && len(files) == 0
				})
			}

			// Nothing of the demo is left: no process names its
			// directory (a leftover step may yet write there: give it
			// time to show), and the directory holds nothing.
			var left []string
			testkit.Poll(5*time.Second, 100*time.Millisecond, func() bool {
				left = processesUnder(tmp)
				return len(left) > 0
			})
			if len(left) > 0 {
				t.Errorf("processes of the demo still run after SIGINT:\n%s", strings.Join(left, "\n"))
			}
			if files, _ := filepath.Glob(filepath.Join(tmp, "*")); len(files) > 0 {
				t.Errorf("the demo left %v behind", files)
			}
			for _, ip := range ips {
				if pgUp(ip) {
					t.Errorf("PostgreSQL on %s still accepts connections after SIGINT", ip)
				}
			}
			if t.Failed() {
				t.Logf("demo output:\n%s\n%s", out.String(), logs.String())
			}
		})
	}
}

// slowClone returns a PG_BINDIR in which pg_basebackup waits 3 s before it
// copies, so that an interrupt surely lands while a replica is cloned.
func slowClone(t *testing.T) string {
	t.Helper()
	real, err := pgtest.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "pgdns-demo-bin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		if err := os.Symlink(filepath.Join(real, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	script := "#!/bin/sh\nsleep 3\nexec " + filepath.Join(real, "pg_basebackup") + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "pg_basebackup"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// pgUp reports whether something accepts TCP connections on ip:5432.
func pgUp(ip string) bool {
	c, err := net.DialTimeout("tcp", ip+":5432", 200*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// processesUnder lists the running processes whose command line names a
// path under dir.
func processesUnder(dir string) []string {
	var found []string
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range cmdlines {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if line := strings.ReplaceAll(string(b), "\x00", " "); strings.Contains(line, dir+"/") {
			found = append(found, filepath.Base(filepath.Dir(p))+": "+line)
		}
	}
	return found
}

// lockedText is an io.Writer that may be read while it is written.
type lockedText struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedText) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedText) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
