package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/pgdns/pgdns/internal/state"
	"github.com/pgdns/pgdns/probe"
)

// What pgdns keeps on disk (state.path): locked for the process's life
// (state.Lock: one pgdns per state file) and read once at start-up,
// before anything is answered, and seeded into the first prober; written
// by a state.Writer each time the publishing prober learns something,
// and once more at Stop. A reload hands knowledge from prober to prober as
// before; the new one's reports replace the file's contents. Knowledge
// under a name no longer configured stays in them until a configured
// cluster of its identity inherits it (probe/orphans.go).

// stateKeeper is the running state file: its writer and how to stop it.
type stateKeeper struct {
	w    *state.Writer
	lock *state.Lock
	stop context.CancelFunc
	done chan struct{}
}

// loadState locks and reads the state file at path, if one is configured.
// A file another process holds, or one that cannot be read or does not
// parse, stops the start: answering as if nothing had been learned, or
// sharing the file with a pgdns that knows less, could answer a
// superseded primary. On success the caller owns the lock (startState).
func (a *App) loadState(path string) (*state.Lock, map[string]probe.Remembered, error) {
	if path == "" {
		return nil, nil, nil
	}
	lock, lerr := state.Acquire(path)
	if lerr != nil && !errors.Is(lerr, fs.ErrNotExist) {
		return nil, nil, lerr
	}
	m, found, err := state.Load(path)
	if err == nil && lerr != nil {
		err = lerr // the folder came back between the two: still unlocked
	}
	if err != nil {
		lock.Release()
		return nil, nil, fmt.Errorf("%v: fix or remove it, or forget it deliberately with pgdns -reset-state", err)
	}
	if !found {
		a.log.Info("no state file yet: starting from what the hosts say", "file", path)
		return lock, nil, nil
	}
	a.log.Info("state file read: starting from what pgdns learned before", "file", path, "clusters", describe(m))
	return lock, m, nil
}

// startState starts writing the state file at path, which held loaded
// and which lock keeps this process's own until stopState.
func (a *App) startState(path string, lock *state.Lock, loaded map[string]probe.Remembered) {
	if path == "" {
		return
	}
	a.metrics.TrackState()
	w := state.NewWriter(path, loaded, a.log, a.metrics.StateWritten)
	ctx, cancel := context.WithCancel(context.Background())
	sk := &stateKeeper{w: w, lock: lock, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(sk.done)
		w.Run(ctx)
	}()
	a.state = sk
}

// stopState stops the writer after its last write, once no prober
// reports to it any more, and then gives the lock up. The caller holds
// a.mu.
func (a *App) stopState() {
	if a.state == nil {
		return
	}
	a.state.stop()
	<-a.state.done
	a.state.lock.Release()
}

// learned is probe.Hooks.Learned: nil without a state file.
func (a *App) learned() func(map[string]probe.Remembered) {
	if a.state == nil {
		return nil
	}
	return a.state.w.Offer
}

// stateWarnings is httpapi.Config.Warnings: a failing state file, which
// does not make pgdns unready (it answers from memory) but will cost it
// what it learned since, should it restart now.
func (a *App) stateWarnings() []string {
	if a.state == nil {
		return nil
	}
	st := a.state.w.Status()
	if st.OK {
		return nil
	}
	return []string{fmt.Sprintf("state file %s not written since %s (%d failed writes): %s; answering from memory",
		a.state.w.Path(), st.Since.UTC().Format(time.RFC3339), st.Failures, st.Err)}
}

// ResetState is pgdns -reset-state: it removes the state file at path,
// saying loudly what pgdns forgets. A file that does not parse is removed
// all the same: forgetting it is the point. A pgdns running on the file
// (holding its lock) refuses it: it would write its knowledge back.
func ResetState(path string, log *slog.Logger) error {
	if path == "" {
		return fmt.Errorf("-reset-state: state.path is not set: pgdns keeps nothing on disk")
	}
	lock, err := state.Acquire(path)
	var inUse *state.InUseError
	switch {
	case errors.As(err, &inUse):
		return fmt.Errorf("-reset-state: state file %s is in use by pgdns pid %s: stop it first; nothing was removed", path, inUse.Holder)
	case err != nil && !errors.Is(err, fs.ErrNotExist): // no folder: nothing to remove, said below
		return fmt.Errorf("-reset-state: %v", err)
	}
	defer lock.Release()
	m, found, err := state.Load(path)
	if _, serr := os.Lstat(path); errors.Is(serr, fs.ErrNotExist) {
		found, err = false, nil // its folder may be missing too: nothing to remove either way
	}
	switch {
	case err != nil:
		log.Warn("RESETTING STATE: removing a state file that cannot be used", "file", path, "error", err)
	case !found:
		log.Warn("RESETTING STATE: no state file to remove; pgdns starts from nothing anyway", "file", path)
		return nil
	default:
		log.Warn("RESETTING STATE: pgdns forgets what it learned; its next start trusts what the hosts say, "+
			"and may answer a primary that a promotion superseded", "file", path, "forgotten", describe(m))
	}
	return state.Remove(path)
}

// describe sums up what m remembers, for the logs.
func describe(m map[string]probe.Remembered) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(m)) {
		r := m[name]
		parts = append(parts, fmt.Sprintf("%s (system identifier %d, newest timeline %d, %d timeline histories)",
			name, r.Identity, r.NewestTimeline, len(r.Timelines)))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
