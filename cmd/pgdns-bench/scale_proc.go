package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// What the scale step reads of a process from /proc.

// rssKiB reads a process's resident set size.
func rssKiB(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			return strconv.ParseInt(strings.Fields(v)[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmRSS")
}

// cpuTime is a process's CPU time so far: the sum of its threads'
// time on a CPU from /proc/PID/task/*/schedstat (nanoseconds, exact,
// where /proc/PID/stat counts clock ticks of 10 ms). A thread that has
// exited is no longer listed; Go's threads live as long as the process,
// and cpuTicks below, which counts them, is the cross-check.
func cpuTime(pid int) (time.Duration, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil {
		return 0, err
	}
	if len(tasks) == 0 {
		return 0, fmt.Errorf("process %d: no /proc/%d/task/*/schedstat", pid, pid)
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // the thread exited meanwhile
		}
		ns, err := parseSchedstat(string(b))
		if err != nil {
			return 0, fmt.Errorf("%s: %w", t, err)
		}
		sum += ns
	}
	return sum, nil
}

// parseSchedstat reads the first field of a schedstat line: time spent on
// a CPU, in nanoseconds ("1837798 0 1": run time, wait time, time slices).
func parseSchedstat(line string) (time.Duration, error) {
	f := strings.Fields(line)
	if len(f) != 3 {
		return 0, fmt.Errorf("schedstat %q: want 3 fields", line)
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("schedstat %q: %w", line, err)
	}
	return time.Duration(ns), nil
}

// cpuTicks reads a process's user+system CPU time in clock ticks (1/100 s),
// its threads that exited included.
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+2:])
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s, nil
}

// raiseNoFile makes RLIMIT_NOFILE at least need, soft and hard, for the
// bench and every process it starts from now on (they inherit it: a
// Setrlimit of our own tells os/exec not to put the soft limit back). The
// soft limit is raised up to the hard one by anyone; the hard one only
// by root with CAP_SYS_RESOURCE, up to fs.nr_open.
func raiseNoFile(need uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	if lim.Cur >= need && lim.Max >= need {
		return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim) // children keep it
	}
	next := syscall.Rlimit{Cur: need, Max: max(lim.Max, need)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &next); err != nil {
		return fmt.Errorf("the scale step needs %d open files (a socket per host in pgdns, two in the fakes' process), and RLIMIT_NOFILE is %d (hard %d); raising it failed (%v): raise the hard limit (ulimit -Hn %d, as root with CAP_SYS_RESOURCE, and fs.nr_open if it is lower) or measure fewer hosts (-scale-hosts)", need, lim.Cur, lim.Max, err, need)
	}
	return nil
}
