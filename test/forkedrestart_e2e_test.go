package test

// A replica proven on another branch than the primary's (rule 1, "another
// branch of timeline 1") stays aside across restarts of its server: a
// restart keeps the data directory, the other branch's (review 6, G7b).
// Here PostgreSQL even replays the restored primary's WAL on top of it:
// n2 ends up with both branches' writes, at the primary's position.

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/state"
	"github.com/pgdns/pgdns/internal/testkit"
)

func TestForkedReplicaStaysAsideAcrossItsRestart(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.json")
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(3)})
	e := attach(t, pg, envOptions{State: path})
	n1, n2 := pg.Nodes[0], pg.Nodes[1]
	ctx := context.Background()
	forkedByARestore(t, e)

	// Once the state file names n2's new run, pgdns has probed it.
	remembered := func(run time.Time) {
		t.Helper()
		testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "the state file to hold n2's fork, of its run started "+run.String(), func() (string, bool) {
			m, _, err := state.Load(path)
			if err != nil {
				return err.Error(), false
			}
			f, ok := m["main"].Forks[n2.Addr()]
			return string(state.Encode(m)), ok && f.Run.Equal(run) && strings.Contains(f.Note, "another branch of timeline 1")
		})
	}
	// n2 restarted: a new run of the replica, whose data is still the
	// dead branch's.
	remembered(restartUnrebuilt(t, n2))
	e.holds(t, "replica.db.local.", 2*time.Second, without(n2.IP), "n2, restarted, still another branch of timeline 1 (it has a write the primary lost)")

	// pgdns stopped, n2 restarted meanwhile, pgdns started from its state
	// file: the proof is of n2's server, not of the run it saw.
	if err := e.app.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	run := restartUnrebuilt(t, n2)
	again := launch(t, pg, envOptions{State: path})
	again.waitFor(t, "primary.db.local.", []string{n1.IP})
	remembered(run)
	again.holds(t, "replica.db.local.", 2*time.Second, without(n2.IP), "n2, restarted while pgdns was away, still another branch of timeline 1")
}
