package pgtest

// Faults beyond Stop, Promote and Signal, for the soak (cmd/pgdns-soak):
// a postmaster killed outright, a node re-cloned from a new primary, and
// Follow for programs that are not tests.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostmasterPID reads the node's postmaster.pid.
func (n *Node) PostmasterPID() (int, error) {
	b, err := os.ReadFile(filepath.Join(n.Dir, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
}

// KillPostmaster sends SIGKILL to the postmaster only, as a crash or the
// OOM killer would: its backends notice and exit on their own.
func (n *Node) KillPostmaster() error {
	pid, err := n.PostmasterPID()
	if err != nil {
		return err
	}
	return syscall.Kill(pid, syscall.SIGKILL)
}

// WaitGone waits until no process of the node is left (the postmaster and
// every backend, found by data directory or cluster_name in /proc).
func (n *Node) WaitGone(ctx context.Context) error {
	for {
		left := n.processes()
		if len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: processes %v still running: %w", n.Name, left, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// processes lists the pids whose command line names the node.
func (n *Node) processes() []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		s := strings.ReplaceAll(string(cmdline), "\x00", " ")
		// A server's processes work in its data directory: their
		// working directory tells them from another run's servers of the
		// same name (the soak reuses addresses, hence names, in network
		// namespaces of its own, where a killed run's servers live on).
		cwd, _ := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if (strings.Contains(s, "postgres: "+n.Name+":") && cwd == n.Dir) || strings.Contains(s, "-D "+n.Dir+" ") || strings.HasSuffix(s, "-D "+n.Dir) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Reclone throws the node's data away and copies it again from upstream
// with pg_basebackup -R, then starts it as a replica of upstream: how an
// old primary rejoins after a failover. A running node is stopped first
// (immediate).
func (n *Node) Reclone(ctx context.Context, upstream *Node) error {
	if err := n.killAndRemove(ctx); err != nil {
		return err
	}
	c := n.c
	if err := c.baseBackup(ctx, upstream, n.Dir, "-R"); err != nil {
		return err
	}
	// The copy carries the upstream's own settings (listen address, and a
	// primary_conninfo it may have been given by Follow); later lines win.
	if err := c.appendFile(filepath.Join(n.Dir, "postgresql.conf"), n.ownConf()); err != nil {
		return err
	}
	if err := c.appendFile(filepath.Join(n.Dir, "postgresql.auto.conf"), n.conninfo(upstream)+"\n"); err != nil {
		return err
	}
	return n.Start(ctx)
}

// killAndRemove ends the node, if it runs, as a lost disk would (SIGKILL
// to its postmaster), waits until none of its processes is left, and
// removes its data directory.
func (n *Node) killAndRemove(ctx context.Context) error {
	if pid, err := n.PostmasterPID(); err == nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	gctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := n.WaitGone(gctx); err != nil {
		return err
	}
	return os.RemoveAll(n.Dir)
}

// FollowContext is Follow for programs that are not tests: it points a
// running replica at upstream and reloads it.
func (n *Node) FollowContext(ctx context.Context, upstream *Node) error {
	conn, err := pgx.Connect(ctx, n.DSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "ALTER SYSTEM SET "+n.conninfo(upstream)); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, "SELECT pg_reload_conf()")
	return err
}

// conninfo is the primary_conninfo setting that streams from upstream.
func (n *Node) conninfo(upstream *Node) string {
	host := upstream.IP
	if n.c.opts.Upstream != nil {
		host = n.c.opts.Upstream(n.IP, upstream.IP)
	}
	return "primary_conninfo = 'host=" + host + " port=" + strconv.Itoa(upstream.Port) +
		" user=postgres application_name=" + n.Name + "'"
}

// CheckpointLSN is the node's latest checkpoint location as pg_controldata
// reads it from the stopped (or running) node's control file: after a
// clean shutdown, the end of the WAL a replica must have received.
func (n *Node) CheckpointLSN(ctx context.Context) (string, error) {
	out, err := n.c.run(ctx, "pg_controldata", "-D", n.Dir)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "Latest checkpoint location" {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("pg_controldata -D %s: no latest checkpoint location", n.Dir)
}

// SignalWalsenders sends sig to the node's WAL senders only: SIGSTOP holds
// back replication while the server keeps committing (asynchronous
// replication then loses those commits if the node dies), SIGKILL ends
// them.
func (n *Node) SignalWalsenders(sig syscall.Signal) error {
	var errs []error
	for _, pid := range n.processesTitled("walsender") {
		if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// processesTitled lists the node's backends whose process title starts
// with kind ("walsender", "checkpointer", ...).
func (n *Node) processesTitled(kind string) []int {
	var out []int
	for _, pid := range n.processes() {
		cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if err == nil && strings.HasPrefix(string(cmdline), "postgres: "+n.Name+": "+kind) {
			out = append(out, pid)
		}
	}
	return out
}
