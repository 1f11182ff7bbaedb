package test

// A server whose postmaster admits no new session while everything else
// runs (review 8, R8-1): a postmaster frozen alone (SIGSTOP of the
// postmaster: its backends, pgdns's open session among them, and the WAL
// receiver run on), which lets the kernel complete every TCP connect in
// its listen queue and never answers one, and a postmaster that cannot
// fork (RLIMIT_NPROC), which answers every connection with "could not
// fork new process for connection". postmaster.pid still says "ready" and
// pgdns's session works: before the fix both stayed in replica.db.local
// for good, with a probe role that reads the status (the bare connect was
// complete once the kernel had accepted it, and was closed before the
// postmaster's answer) and with one that may not (the new-session attempt
// timed out, which proved nothing, or read the postmaster's old-style
// error as a malformed message).

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdns/pgdns/internal/testkit"
)

// One cluster, two pgdns in front of it (twoRoles): one probing as postgres (which
// reads postmaster.pid: the bare connect, reach, is what checks), one as
// a role in pg_monitor only (a new session every admission interval).
func TestPostmasterAdmittingNoSessionLeaves(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pg, pgdns := twoRoles(t, ctx)
	n2 := pg.Nodes[1]
	both := []string{pg.Nodes[1].IP, pg.Nodes[2].IP}
	pid, err := n2.PostmasterPID()
	if err != nil {
		t.Fatal(err)
	}
	// leaves applies fault to n2 and checks that a client's connect to n2
	// fails, that every pgdns takes n2 out of replica.db.local with a
	// host_down event whose reason contains why, and that n2 comes back
	// once the fault is undone.
	leaves := func(t *testing.T, why string, fault func() (undo func())) {
		t.Helper()
		since := map[string]uint64{}
		for name, e := range pgdns {
			_, page, err := e.watch(ctx, "index=0")
			if err != nil {
				t.Fatal(err)
			}
			since[name] = page.Index
		}
		undo := fault()
		defer undo()
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		if c, err := pgx.Connect(cctx, n2.DSN()+" connect_timeout=2"); err == nil {
			c.Close(cctx)
			t.Fatal("a new session to n2 was admitted")
		} else {
			t.Logf("a client's connect to n2: %v", err)
		}
		for name, e := range pgdns {
			t.Run(name, func(t *testing.T) {
				took := e.waitFor(t, "replica.db.local.", []string{pg.Nodes[2].IP})
				evs, _ := e.follow(t, since[name], "host_down", n2.Addr())
				res := find(evs, "host_down", n2.Addr()).Detail
				t.Logf("pgdns probing for %s took n2 out after %v: %s", name, took, res)
				if !strings.Contains(res, why) {
					t.Fatalf("n2 is out because %q, want %q", res, why)
				}
			})
		}
		undo()
		for _, e := range pgdns {
			e.waitFor(t, "replica.db.local.", both)
		}
	}

	t.Run("a frozen postmaster", func(t *testing.T) {
		leaves(t, "new connections get no answer", func() func() {
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			return func() { _ = syscall.Kill(pid, syscall.SIGCONT) }
		})
	})

	t.Run("a postmaster that cannot fork", func(t *testing.T) {
		prlimit := testkit.RequireTool(t, "prlimit")
		limit := func(n string) error {
			out, err := exec.Command("runuser", "-u", "postgres", "--", prlimit, "--pid", strconv.Itoa(pid), "--nproc="+n+":").CombinedOutput()
			if err != nil {
				return fmt.Errorf("prlimit --nproc=%s: %v: %s", n, err, out)
			}
			return nil
		}
		// The soft limit goes back to what it was: "unlimited" would
		// exceed a finite hard limit and be refused.
		limits, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/limits")
		if err != nil {
			t.Fatal(err)
		}
		var was string
		for _, l := range strings.Split(string(limits), "\n") {
			if f := strings.Fields(strings.TrimPrefix(l, "Max processes")); len(f) > 0 && len(f) < len(strings.Fields(l)) {
				was = f[0]
			}
		}
		if was == "" {
			t.Fatalf("no process limit in /proc/%d/limits:\n%s", pid, limits)
		}
		leaves(t, "could not fork new process for connection", func() func() {
			if err := limit("1"); err != nil {
				t.Fatal(err)
			}
			return func() {
				if err := limit(was); err != nil {
					t.Error(err)
				}
			}
		})
	})
}
