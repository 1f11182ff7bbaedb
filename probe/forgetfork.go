package probe

import (
	"context"
	"errors"
	"time"

	"github.com/pgdns/pgdns/zone"
)

// An operator's way out of a fork proof for one replica (ForgetFork). A
// replica proven on another branch (forks.go) stays aside across restarts
// of its server, since a restart keeps the other branch's data directory,
// and nothing pgdns reads tells a re-clone or a pg_rewind from a restart
// (review 6, G7b). The operator who has rebuilt it says so, and the proof
// goes at once, for the server run the host has now: never while that is
// still the run the proof was made on (or, from the state file or a
// reload, last seen with), which is the other branch's for certain. A
// request made before the rebuild is refused instead of waiting for the
// next run, which may be a plain restart of the unrebuilt replica (a
// crash, a reboot: review 7, H11).

// ErrUnknownHost is returned for a host the cluster does not list.
var ErrUnknownHost = errors.New("no such host in the cluster")

// ErrNoForkProof is returned when asked to forget the fork proof of a host
// that has none.
var ErrNoForkProof = errors.New("the host is not proven on another branch")

// ErrForkProofRunning is returned when the host still runs the server run
// its fork proof was made on (or was last seen with), or has not been
// probed yet: rebuild it first.
var ErrForkProofRunning = errors.New("the host still runs the server run proven on another branch")

// ErrForkHostDown is returned when the host's last probe failed: the run
// pgdns saw last may be gone (a re-clone under way, or a plain restart),
// and the operator's word is for the run it has now, which pgdns has not
// seen yet.
var ErrForkHostDown = errors.New("the host is down: its server run now is not known")

// ForkForgotten says what ForgetFork did, or (with ErrForkProofRunning)
// why not.
type ForkForgotten struct {
	Proof  string    // the proof, for people (the host's note)
	Run    time.Time // the host's server run now (zero: not probed yet)
	Proven time.Time // the run the proof was made on or last seen with (zero: not known)
}

// forgetForkRequest is a ForgetFork call for the aggregator.
type forgetForkRequest struct {
	cluster, host string
	reply         chan forgetForkReply
}

type forgetForkReply struct {
	done ForkForgotten
	err  error
}

// ForgetFork makes the prober forget that host (an address as the config
// lists it) of cluster is on another branch: the operator rebuilt it. It
// applies at the next publish, which it causes. Errors wrap
// ErrUnknownCluster, ErrUnknownHost, ErrNoForkProof or
// ErrForkProofRunning (nothing forgotten: the host still runs the run
// proven, or was not probed yet).
func (p *Prober) ForgetFork(ctx context.Context, cluster, host string) (ForkForgotten, error) {
	req := forgetForkRequest{cluster: cluster, host: host, reply: make(chan forgetForkReply, 1)}
	select {
	case p.requests <- req:
	case <-ctx.Done():
		return ForkForgotten{}, ctx.Err()
	case <-p.stopped:
		return ForkForgotten{}, errors.New("the prober has stopped")
	}
	select {
	case r := <-req.reply:
		return r.done, r.err
	case <-ctx.Done():
		return ForkForgotten{}, ctx.Err()
	}
}

// forgetFork applies r. Only the aggregator calls it.
func (p *Prober) forgetFork(r forgetForkRequest) (ForkForgotten, error) {
	for ci, c := range p.state {
		if c.Name != r.cluster {
			continue
		}
		for hi := range c.Hosts {
			h := &c.Hosts[hi]
			if h.Addr != r.host {
				continue
			}
			var run time.Time
			if h.Seen {
				run = h.StartedAt
			}
			done := ForkForgotten{Proof: h.DivergedNote, Run: run, Proven: p.provenRun[ci][h.Addr]}
			if h.DivergedFrom == "" {
				f, ok := p.pending[ci][h.Addr]
				if !ok {
					return ForkForgotten{}, ErrNoForkProof
				}
				done.Proof, done.Proven = f.note, f.run // remembered, not applied yet
			}
			if h.Seen && h.Fails > 0 {
				return done, ErrForkHostDown
			}
			if run.IsZero() || done.Proven.IsZero() || run.Equal(done.Proven) {
				return done, ErrForkProofRunning
			}
			h.DivergedFrom, h.DivergedNote, h.DivergedRun = "", "", time.Time{}
			delete(p.pending[ci], h.Addr)
			delete(p.provenRun[ci], h.Addr)
			p.markRebuild(ci) // not p.rebuild[ci] alone: a flag set outside the dirty list froze the cluster's snapshot for good
			return done, nil
		}
		return ForkForgotten{}, ErrUnknownHost
	}
	return ForkForgotten{}, ErrUnknownCluster
}

// proven notes run as the server run host h of cluster ci was proven on
// another branch in (checkForks), or last seen with a remembered proof
// (restoreFork): ForgetFork refuses while h runs it.
func (p *Prober) proven(ci int, h *zone.Host, run time.Time) {
	if p.provenRun == nil {
		p.provenRun = map[int]map[string]time.Time{}
	}
	if p.provenRun[ci] == nil {
		p.provenRun[ci] = map[string]time.Time{}
	}
	p.provenRun[ci][h.Addr] = run
}
