package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/pgdns/pgdns/httpapi"
	"github.com/pgdns/pgdns/probe"
)

// The admin endpoints (httpapi/admin.go) act on the prober that publishes;
// httpapi does not know the probe, so they reach it through adminOps.

// adminOps implements httpapi.Admin for a.
type adminOps struct{ a *App }

// ForgetTimeline forgets a timeline in the publishing prober. It holds
// a.mu, so that no reload or Patroni membership change hands the
// prober's knowledge on while it changes.
func (o adminOps) ForgetTimeline(ctx context.Context, cluster string, tl uint32) (uint32, uint32, error) {
	o.a.mu.Lock()
	defer o.a.mu.Unlock()
	if o.a.running == nil {
		return 0, 0, errors.New("pgdns is not running")
	}
	before, after, err := o.a.running.p.ForgetTimeline(ctx, cluster, tl)
	switch {
	case errors.Is(err, probe.ErrUnknownCluster):
		err = httpapi.ErrNoSuchCluster
	case errors.Is(err, probe.ErrTimelineNotKnown):
		// The same words as the probe's: keep them once.
		err = fmt.Errorf("%w%s", httpapi.ErrTimelineNotProven, strings.TrimPrefix(err.Error(), probe.ErrTimelineNotKnown.Error()))
	}
	return before, after, err
}

// ForgetFork forgets a host's fork proof in the publishing prober; it
// holds a.mu as ForgetTimeline does.
func (o adminOps) ForgetFork(ctx context.Context, cluster, host string) (string, time.Time, time.Time, error) {
	o.a.mu.Lock()
	defer o.a.mu.Unlock()
	if o.a.running == nil {
		return "", time.Time{}, time.Time{}, errors.New("pgdns is not running")
	}
	done, err := o.a.running.p.ForgetFork(ctx, cluster, host)
	switch {
	case errors.Is(err, probe.ErrUnknownCluster):
		err = httpapi.ErrNoSuchCluster
	case errors.Is(err, probe.ErrUnknownHost):
		err = httpapi.ErrNoSuchHost
	case errors.Is(err, probe.ErrNoForkProof):
		err = httpapi.ErrNoForkProof
	case errors.Is(err, probe.ErrForkProofRunning):
		err = httpapi.ErrForkProofRunning
	case errors.Is(err, probe.ErrForkHostDown):
		err = httpapi.ErrForkHostDown
	}
	return done.Proof, done.Run, done.Proven, err
}

// adminToken returns a reader of the admin token in path, or nil when
// path is "" (the admin endpoints are off).
func adminToken(path string) func() ([]byte, error) {
	if path == "" {
		return nil
	}
	return func() ([]byte, error) { return readAdminToken(path) }
}

// readAdminToken reads the token in path: the file's content without
// surrounding white space, which must not be empty.
func readAdminToken(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return nil, fmt.Errorf("%s is empty", path)
	}
	return []byte(tok), nil
}
