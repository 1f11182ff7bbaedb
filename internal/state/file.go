package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/pgdns/pgdns/probe"
)

// Load reads the state file at path. A file that does not exist is no
// error: nothing learned yet (found is false). Any other problem is one
// line naming the file and what is wrong with it.
func Load(path string) (m map[string]probe.Remembered, found bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		// A first start, unless the folder is missing too: then no write
		// would ever succeed (a typo, a volume not mounted).
		if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
			return nil, false, fmt.Errorf("state file %s cannot be written: its folder %s is not there", path, filepath.Dir(path))
		}
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("state file %s cannot be read: %v", path, unwrapPath(err))
	}
	m, err = Decode(data)
	if err != nil {
		return nil, true, fmt.Errorf("state file %s %v", path, err)
	}
	return m, true, nil
}

// WriteFile replaces the file at path with data atomically: a temporary
// file in the same folder, written and synced, renamed over path, and the
// folder synced so that the rename itself survives a crash. A reader, or
// a pgdns starting after a crash, sees the old file or the new one, never
// a part of either. On failure path is left as it was.
func WriteFile(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("creating a temporary file in %s: %w", dir, unwrapPath(err))
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return fmt.Errorf("writing a temporary file in %s: %w", dir, unwrapPath(err))
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("syncing a temporary file in %s: %w", dir, unwrapPath(err))
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("closing a temporary file in %s: %w", dir, unwrapPath(err))
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("renaming a temporary file over it: %w", unwrapLink(err))
	}
	d, err := os.Open(dir)
	if err == nil {
		err = d.Sync()
		_ = d.Close()
	}
	if err != nil {
		return fmt.Errorf("syncing the folder %s: %w", dir, unwrapPath(err))
	}
	return nil
}

// Remove deletes the state file: pgdns -reset-state. A file that does not
// exist is no error.
func Remove(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("state file %s cannot be removed: %v", path, unwrapPath(err))
	}
	return nil
}

// unwrapLink drops the paths and operation of a *os.LinkError (rename).
func unwrapLink(err error) error {
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// unwrapPath drops the path and operation of a *fs.PathError, which the
// caller names itself: "permission denied", not "open /x/y: permission
// denied" after "state file /x/y".
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
