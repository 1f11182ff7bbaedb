package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Lock is one process's hold on a state file: an exclusive flock(2) on a
// lock file beside it (LockPath), which holds the holder's pid. Two pgdns
// processes on one state file (a scaled compose service on a shared
// volume, two systemd instances from one config) would each overwrite
// the file with their own view, and the one that knows less would erase
// a newer timeline. The lock lives on an open file description, so it
// conflicts within one process too, and the kernel drops it when the
// process dies: a crash leaves no stale lock. The lock file is never
// removed: removing it while another process opens it would let both
// hold a lock on different files.
type Lock struct {
	f *os.File
}

// InUseError is Acquire's error when another process holds the lock.
type InUseError struct {
	Path   string // the state file
	Holder string // the holder's pid as its lock file says, or "unknown"
}

func (e *InUseError) Error() string {
	return fmt.Sprintf("state file %s is in use by pgdns pid %s: give each instance its own state.path", e.Path, e.Holder)
}

// kindError is a one-line message that still matches a sentinel with
// errors.Is, without the sentinel's text appended.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// LockPath is the lock file of the state file at path.
func LockPath(path string) string { return path + ".lock" }

// Acquire takes the lock of the state file at path without waiting. Held
// by another process, it fails with one line naming the file and the
// holder's pid (an *InUseError). A folder that is not there fails
// wrapping fs.ErrNotExist.
func Acquire(path string) (*Lock, error) {
	lp := LockPath(path)
	// Opened read-only: flock needs no write access, and a file held open
	// for writing would keep its file system from being remounted
	// read-only. A read-only folder (pgdns then only reads the state file)
	// still locks the lock file an earlier start left.
	f, err := os.OpenFile(lp, os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		f, err = os.Open(lp)
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if fi, serr := os.Stat(filepath.Dir(path)); serr != nil || !fi.IsDir() {
				return nil, &kindError{fmt.Sprintf("state file %s cannot be written: its folder %s is not there", path, filepath.Dir(path)), fs.ErrNotExist}
			}
		}
		return nil, fmt.Errorf("state file %s cannot be locked: lock file %s: %v", path, lp, unwrapPath(err))
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := "unknown"
			if b, rerr := os.ReadFile(lp); rerr == nil {
				if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
					holder = strconv.Itoa(pid)
				}
			}
			return nil, &InUseError{Path: path, Holder: holder}
		}
		return nil, fmt.Errorf("state file %s cannot be locked: lock file %s: %v", path, lp, err)
	}
	// Who holds it, for the next one refused, written through a descriptor
	// closed at once. Best effort (a read-only folder keeps the old pid):
	// the lock, not the pid, is what keeps a second process out.
	_ = os.WriteFile(lp, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600)
	return &Lock{f: f}, nil
}

// Release gives the lock up. The pid stays in the file; only a held lock
// makes it mean anything.
func (l *Lock) Release() {
	if l == nil || l.f == nil {
		return
	}
	_ = l.f.Close() // closing the last descriptor drops the flock
	l.f = nil
}
