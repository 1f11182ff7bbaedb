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
// (review 6, G7b). The operator who rebuilds it says so: the proof is
// dropped at the replica's next server run, never for the run it holds
// now (which may still be the other branch's), so that asking before the
// rebuild is safe, and a host answered again is one that started anew.

// ErrUnknownHost is returned for a host the cluster does not list.
var ErrUnknownHost = errors.New("no such host in the cluster")

// ErrNoForkProof is returned when asked to forget the fork proof of a host
// that has none.
var ErrNoForkProof = errors.New("the host is not proven on another branch")

// ForkForgotten says what ForgetFork did.
type ForkForgotten struct {
	Proof string // the proof to be forgotten, for people (the host's note)
	// Run is the server run that stays aside: the proof is dropped when
	// the host is seen in any other (zero: no run known yet, the first
	// run seen drops it).
	Run time.Time
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
// lists it) of cluster is on another branch, once its server starts a new
// run: the rebuilt replica. Its current run stays aside. Errors wrap
// ErrUnknownCluster, ErrUnknownHost or ErrNoForkProof. A reload or a
// restart of pgdns before the new run keeps the proof (ask again then).
func (p *Prober) ForgetFork(ctx context.Context, cluster, host string) (ForkForgotten, error) {
	req := forgetForkRequest{cluster: cluster, host: host, reply: make(chan forgetForkReply, 1)}
	select {
	case p.forkForgets <- req:
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

// forgetFork marks the proof of r's host to be dropped at its next server
// run. Only the aggregator calls it.
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
			done := ForkForgotten{Proof: h.DivergedNote, Run: h.StartedAt}
			if h.DivergedFrom == "" {
				f, ok := p.pending[ci][h.Addr]
				if !ok {
					return ForkForgotten{}, ErrNoForkProof
				}
				done = ForkForgotten{Proof: f.note, Run: f.run} // remembered, not applied yet
			}
			if p.forgotten == nil {
				p.forgotten = map[int]map[string]time.Time{}
			}
			if p.forgotten[ci] == nil {
				p.forgotten[ci] = map[string]time.Time{}
			}
			p.forgotten[ci][h.Addr] = done.Run
			return done, nil
		}
		return ForkForgotten{}, ErrUnknownHost
	}
	return ForkForgotten{}, ErrUnknownCluster
}

// dropForgottenFork drops the fork proof of host h of cluster ci, seen in
// server run run, when an operator forgot it (ForgetFork) and run is not
// the run that stays aside. record calls it after restoreFork.
func (p *Prober) dropForgottenFork(ci int, h *zone.Host, run time.Time) {
	stays, ok := p.forgotten[ci][h.Addr]
	if !ok || run.Equal(stays) {
		return
	}
	delete(p.forgotten[ci], h.Addr)
	delete(p.pending[ci], h.Addr)
	if h.DivergedFrom == "" {
		return
	}
	was := h.DivergedNote
	h.DivergedFrom, h.DivergedNote, h.DivergedRun = "", "", time.Time{}
	if p.log != nil {
		p.log.Warn("fork proof forgotten by an operator: the replica's server started a new run (rebuilt); it is judged from this run on",
			"cluster", p.state[ci].Name, "host", h.Addr, "server_started", run.UTC().Format(time.RFC3339Nano), "forgotten", was)
	}
}
