package pgtest

// A base backup of a running node, and the node restored in place from
// it: the same address, the same timeline, an earlier position (review 6,
// G5: a disk snapshot or a backup restored without a new timeline).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// BaseBackup copies the running node with pg_basebackup (WAL streamed
// along, no standby.signal) into a new folder beside the cluster's data
// directories, and returns that folder. The copy carries the node's own
// settings (its listen address).
func (n *Node) BaseBackup(ctx context.Context) (string, error) {
	dir, err := os.MkdirTemp(n.c.root, n.Name+"-backup-")
	if err != nil {
		return "", err
	}
	if err := os.Remove(dir); err != nil { // pg_basebackup makes it, as postgres
		return "", err
	}
	if err := n.c.baseBackup(ctx, n, dir); err != nil {
		return "", err
	}
	return dir, nil
}

// baseBackupStep bounds one pg_basebackup. A copy of a test's cluster
// takes a second or two on a quiet machine, tens of seconds at load 50;
// one still running after this is stuck (a checkpoint or a WAL stream
// waiting on a starved server), and is stopped and made once more.
const baseBackupStep = 2 * time.Minute

// baseBackup copies from into dir (which must not exist) with
// pg_basebackup and more args (-R: as a replica of from), WAL streamed
// along, after a fast checkpoint, unsynced. A copy stopped by its own
// step's deadline while ctx still runs is removed and made once more; a
// copy stopped by ctx's end is not (run's error says which stopped it).
func (c *Cluster) baseBackup(ctx context.Context, from *Node, dir string, args ...string) error {
	args = append([]string{"-h", from.IP, "-p", strconv.Itoa(from.Port), "-U", "postgres",
		"-D", dir, "-X", "stream", "-c", "fast", "--no-sync"}, args...)
	for attempt := 1; ; attempt++ {
		step := c.backupStep
		if step == 0 {
			step = baseBackupStep
		}
		sctx, cancel := context.WithTimeout(ctx, step)
		_, err := c.run(sctx, "pg_basebackup", args...)
		own := sctx.Err() != nil && ctx.Err() == nil
		cancel()
		if err == nil || !own || attempt == 2 {
			return err
		}
		if rerr := os.RemoveAll(dir); rerr != nil {
			return errors.Join(err, rerr)
		}
	}
}

// RestoreInPlace kills the node (SIGKILL to its postmaster, as a lost
// disk would end it), replaces its data directory with a copy of backup
// (BaseBackup's) and starts it: without a recovery signal file it replays
// the backup's WAL and comes back writable on the same timeline, at the
// backup's position, at the same address with a new start time. The
// backup stays, for another restore.
func (n *Node) RestoreInPlace(ctx context.Context, backup string) error {
	if err := n.killAndRemove(ctx); err != nil {
		return err
	}
	// cp -a keeps the owner (postgres) and the folder's mode (0700).
	if out, err := exec.CommandContext(ctx, "cp", "-a", backup, n.Dir).CombinedOutput(); err != nil {
		return fmt.Errorf("restoring %s from %s: %v: %s", n.Name, filepath.Base(backup), err, out)
	}
	return n.Start(ctx)
}
