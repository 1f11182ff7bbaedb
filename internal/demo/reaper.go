package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// reaperEnv marks a run of the demo's binary as its reaper (not PGDNS_...:
// the demo's configuration would take it for a key).
const reaperEnv = "DEMO_REAPER"

// reaper is a process of its own that outlives the demo: when the demo's
// end of a pipe closes, however the demo ended (Ctrl-C, kill -9, a panic,
// a broken stdout), it stops every process that names the demo's folder
// and removes the folder. pg_ctl starts PostgreSQL as a daemon, which
// nothing of the demo's own death would reach.
type reaper struct {
	cmd  *exec.Cmd
	pipe *os.File // the demo's end; the reaper reads it until EOF
}

// startReaper starts the demo's binary again as the reaper of dir.
func startReaper(dir string) (*reaper, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cmd := exec.Command(exe, dir)
	cmd.Env = append(os.Environ(), reaperEnv+"=1")
	cmd.Stdin = r
	cmd.Stderr = os.Stderr
	// A group of its own: a Ctrl-C at the terminal must not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, err
	}
	return &reaper{cmd: cmd, pipe: w}, nil
}

// finish lets the reaper go over dir (nothing should be left after the
// demo's own teardown) and waits for it, so that the demo exits last.
func (r *reaper) finish() {
	r.pipe.Close()
	done := make(chan struct{})
	go func() { _ = r.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
	}
}

// reap is the reaper's life: wait for the demo to end, then clean dir.
func reap(dir string) {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := clean(dir); err != nil {
		fmt.Fprintln(os.Stderr, "demo reaper:", err)
		os.Exit(1)
	}
}

// clean stops every process whose command line names a path under dir
// (the postmasters, and any initdb, pg_basebackup or pg_ctl still at work)
// and removes dir. A postmaster gets SIGQUIT, PostgreSQL's immediate
// shutdown, which takes its backends down with it; the rest and anything
// still there after 10 s get SIGKILL.
func clean(dir string) error {
	if !strings.HasPrefix(filepath.Base(dir), "pgdns-demo-") {
		return fmt.Errorf("refusing to clean %s: not a demo folder", dir)
	}
	start := time.Now()
	for {
		pids := processesNaming(dir)
		if len(pids) == 0 {
			break
		}
		if time.Since(start) > 30*time.Second {
			return fmt.Errorf("processes %v still run 30 s after SIGKILL", pids)
		}
		for pid, comm := range pids {
			sig := syscall.SIGKILL
			if comm == "postgres" && time.Since(start) < 10*time.Second {
				sig = syscall.SIGQUIT
			}
			_ = syscall.Kill(pid, sig)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return os.RemoveAll(dir)
}

// processesNaming maps the pid of every other process whose command line
// names a path under dir to its command name.
func processesNaming(dir string) map[int]string {
	found := map[int]string{}
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range cmdlines {
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), dir+"/") {
			continue
		}
		comm, err := os.ReadFile(filepath.Join(filepath.Dir(p), "comm"))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		found[pid] = strings.TrimSpace(string(comm))
	}
	return found
}
