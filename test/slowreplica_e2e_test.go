package test

import (
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// slowReplica is a primary and a streaming replica that pgdns reaches
// through a proxy holding every query delay on its way to the replica:
// the setting in which a lag bound outlives its sample (review 5 F2, F2b).
type slowReplica struct {
	primary, replica *pgtest.Node
	e                *env
	proxied          string // the replica's address as pgdns answers it
}

// startSlowReplica starts the cluster, the proxy and pgdns probing every
// interval, and waits for the primary to be answered.
func startSlowReplica(t *testing.T, delay, interval time.Duration) slowReplica {
	t.Helper()
	b := pgtest.Addrs(t)
	pg := pgtest.New(t, pgtest.Options{IPs: []string{b.IP(11), b.IP(12)}})
	primary, replica := pg.Nodes[0], pg.Nodes[1]
	proxy := b.Addr(31, 5432)
	testkit.DelayProxy(t, proxy, replica.Addr(), delay)
	e := attach(t, pg, envOptions{Interval: interval.String(), Timeout: "6s", Hosts: []string{primary.Addr(), proxy}})
	return slowReplica{primary: primary, replica: replica, e: e, proxied: b.IP(31)}
}

// pauseReplay pauses replay on the replica (resumed when the test ends)
// and returns a moment by which it had stopped: the replica lacks every
// commit begun since.
func (s slowReplica) pauseReplay(t *testing.T) time.Time {
	t.Helper()
	s.replica.Exec(t, "SELECT pg_wal_replay_pause()")
	t.Cleanup(func() { s.replica.Exec(t, "SELECT pg_wal_replay_resume()") })
	testkit.Eventually(t, 10*time.Second, 5*time.Millisecond, "replay paused", func() (string, bool) {
		var state string
		s.replica.Query(t, "SELECT pg_get_wal_replay_pause_state()", &state)
		return state, state == "paused"
	})
	return time.Now()
}

// replicaLookup is one lookup of a name: when it was sent, and whether
// the slow replica was in its answer.
type replicaLookup struct {
	sent     time.Time
	answered bool
}

// lookups asks name every 10 ms for 3 s after since (at most 300 times)
// and says, for each lookup, whether the slow replica was answered.
func (s slowReplica) lookups(t *testing.T, name string, since time.Time) []replicaLookup {
	t.Helper()
	var out []replicaLookup
	for time.Since(since) < 3*time.Second && len(out) < 300 {
		sent := time.Now()
		answered := false
		for _, ev := range s.e.answerEvidence(t, name) {
			answered = answered || ev.host == s.proxied
		}
		out = append(out, replicaLookup{sent, answered})
		time.Sleep(10 * time.Millisecond)
	}
	return out
}
