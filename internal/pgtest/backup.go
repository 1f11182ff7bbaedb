package pgtest

// A base backup of a running node, and the node restored in place from
// it: the same address, the same timeline, an earlier position (review 6,
// G5: a disk snapshot or a backup restored without a new timeline).

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
	if _, err := n.c.run(ctx, "pg_basebackup", "-h", n.IP, "-p", strconv.Itoa(n.Port), "-U", "postgres",
		"-D", dir, "-X", "stream", "-c", "fast", "--no-sync"); err != nil {
		return "", err
	}
	return dir, nil
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
