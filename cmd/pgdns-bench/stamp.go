package main

import (
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// stamp is when, where and at which commit a section's figures were
// taken, and the command that takes them again. Every section of
// BENCHMARKS.md opens with it, so that a reader can tell one run from
// another and rerun it.
type stamp struct {
	command string        // what reproduces the section
	asRoot  bool          // the command ran as root
	commit  string        // the tree measured
	began   time.Time     // when the section's measuring began (UTC)
	took    time.Duration // how long it took; 0 leaves it unsaid
	load    string        // the one-minute load average when it began
	machine string        // cores, CPU, Go, OS
}

// stampNow stamps a section whose measuring begins now.
func (b *bench) stampNow() stamp {
	return stamp{command: b.cfg.command(), commit: b.cfg.commit,
		began: time.Now().UTC(), load: loadAverage(), machine: machineLine()}
}

// String is the stamp as the opening sentence of a section.
func (s stamp) String() string {
	root, took := "", ""
	if s.asRoot {
		root = " (as root)"
	}
	if s.took > 0 {
		took = fmt.Sprintf(", in %v", s.took.Round(time.Second))
	}
	return fmt.Sprintf("Measured with `%s`%s at %s on %s%s; %s; load average %s when it began.",
		s.command, root, s.commit, s.began.Format("2006-01-02 15:04 UTC"), took, s.machine, s.load)
}

// command is the command that runs what c asks for: make's, or the
// bench's own with its flags when some were tuned beyond make's.
func (c config) command() string {
	if len(c.tuned) > 0 {
		s := "bin/pgdns-bench"
		if c.only != "" {
			s += " -only " + c.only
		}
		if c.pprofDir != "" {
			s += " -pprof dir"
		}
		return s + " " + strings.Join(c.tuned, " ")
	}
	s := "make bench"
	if c.only != "" {
		s += " BENCH_ONLY=" + c.only
	}
	if c.pprofDir != "" && (c.only == "" || c.only == "scale") {
		s += " PPROF=dir"
	}
	return s
}

// machineLine says where the figures were taken: cores, CPU model, Go and
// OS.
func machineLine() string {
	return fmt.Sprintf("%d cores (%s), %s, %s/%s", runtime.NumCPU(), strings.TrimSpace(machine()), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// describe names the commit checked out here (git describe), with
// "-dirty" when tracked files other than the bench's own output differ
// from it; "unknown" outside a git tree.
func describe() string {
	out, err := exec.Command("git", "describe", "--always", "--abbrev=7").Output()
	if err != nil {
		return "unknown"
	}
	commit := strings.TrimSpace(string(out))
	diff := exec.Command("git", "diff", "--quiet", "HEAD", "--", ".", ":(exclude)BENCHMARKS.md", ":(exclude)failover.png", ":(exclude)scale.png")
	if diff.Run() != nil {
		commit += "-dirty"
	}
	return commit
}
