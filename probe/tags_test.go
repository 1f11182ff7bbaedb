package probe

import (
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/zone"
)

// Patroni's tags reach a prober from its config at start and through
// SetTags while it runs, and a host left out of a later SetTags loses
// its tag; a tag of the wrong type is said in the host's note.
func TestProberTakesPatroniTags(t *testing.T) {
	primary := &fakeHost{ip: "10.0.0.1", lsn: 0x5000}
	replica := &fakeHost{ip: "10.0.0.2", inRecovery: true, lsn: 0x5000}
	// A timeout far above the interval: no host hangs here, and at 100ms
	// the staleness bound it sets took the primary out under load (its
	// goroutine waiting for a CPU), so it was not the primary (runPair).
	cfg := Config{Interval: 10 * time.Millisecond, Timeout: 5 * time.Second, MaxFails: 3,
		Clusters: []ClusterConfig{{Name: "main", Hosts: []string{"p:1", "r:1"}, Patroni: true, Leader: "p:1",
			Tags: map[string]MemberTags{"r:1": {NoLoadBalance: true}}}}}
	table := zone.NewTable()
	p := startFakeLogging(t, cfg, table, map[string]*fakeHost{"p:1": primary, "r:1": replica}, &testkit.Buffer{})
	waitSnapshot(t, table, "with the replica drained by its tag", func(s *zone.Snapshot) bool {
		if !s.Ready {
			return false
		}
		h := s.Clusters[0].Hosts[1]
		return h.Role == zone.RoleReplica && h.Drained && h.DrainedBy == zone.DrainByTag
	})

	p.SetTags("main", map[string]MemberTags{"p:1": {NoLoadBalance: true, Note: "odd tag"}})
	s := waitSnapshot(t, table, "with the tag moved to the primary", func(s *zone.Snapshot) bool {
		c := s.Clusters[0]
		return c.Hosts[0].Drained && !c.Hosts[1].Drained
	})
	if h := s.Clusters[0].Hosts[0]; h.Role != zone.RolePrimary || h.Note != "odd tag" {
		t.Errorf("tagged primary: role %v note %q, want still the primary and the note", h.Role, h.Note)
	}
	p.SetTags("nope", map[string]MemberTags{"r:1": {NoLoadBalance: true}}) // another cluster's: nothing here
	p.SetTags("main", nil)
	waitSnapshot(t, table, "without tags", func(s *zone.Snapshot) bool {
		c := s.Clusters[0]
		return !c.Hosts[0].Drained && !c.Hosts[1].Drained && c.Hosts[0].Note == ""
	})
}
