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

// What pgdns keeps on disk (state.path): read once at start-up, before
// anything is answered, and seeded into the first prober; written by a
// state.Writer each time the publishing prober learns something, and
// once more at Stop. A reload hands knowledge from prober to prober as
// before; the new one's reports replace the file's contents. Knowledge
// under a name no longer configured stays in them until a configured
// cluster of its identity inherits it, or none could (probe/orphans.go).

// stateKeeper is the running state file: its writer and how to stop it.
type stateKeeper struct {
	w    *state.Writer
	stop context.CancelFunc
	done chan struct{}
}

// loadState reads the state file of cfg, if one is configured. A file
// that cannot be read or does not parse stops the start: answering as if
// nothing had been learned could answer a superseded primary.
func (a *App) loadState(path string) (map[string]probe.Remembered, error) {
	if path == "" {
		return nil, nil
	}
	m, found, err := state.Load(path)
	if err != nil {
		return nil, fmt.Errorf("%v: fix or remove it, or forget it deliberately with pgdns -reset-state", err)
	}
	if !found {
		a.log.Info("no state file yet: starting from what the hosts say", "file", path)
		return nil, nil
	}
	a.log.Info("state file read: starting from what pgdns learned before", "file", path, "clusters", describe(m))
	return m, nil
}

// startState starts writing the state file at path, which held loaded.
func (a *App) startState(path string, loaded map[string]probe.Remembered) {
	if path == "" {
		return
	}
	a.metrics.TrackState()
	w := state.NewWriter(path, loaded, a.log, a.metrics.StateWritten)
	ctx, cancel := context.WithCancel(context.Background())
	sk := &stateKeeper{w: w, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(sk.done)
		w.Run(ctx)
	}()
	a.state = sk
}

// stopState stops the writer after its last write, once no prober
// reports to it any more. The caller holds a.mu.
func (a *App) stopState() {
	if a.state == nil {
		return
	}
	a.state.stop()
	<-a.state.done
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
// all the same: forgetting it is the point.
func ResetState(path string, log *slog.Logger) error {
	if path == "" {
		return fmt.Errorf("-reset-state: state.path is not set: pgdns keeps nothing on disk")
	}
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
