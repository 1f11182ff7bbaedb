package probe

import (
	"context"
	"testing"
	"time"

	"github.com/pgdns/pgdns/zone"
)

// A reload renaming a cluster swaps probers: once Activate returns, the
// table must already hold the new prober's snapshot, or a lookup of the
// new name right after the reload gets NXDOMAIN from the old one (CI saw
// it: TestRenamedClusterKeepsItsNewestTimeline, primary.prod.db.local.
// NXDOMAIN right after Reload).
func TestActivateReturnsOncePublished(t *testing.T) {
	primary := &fakeHost{ip: "10.0.0.1", lsn: 100}
	replica := &fakeHost{ip: "10.0.0.2", inRecovery: true, lsn: 100}
	hosts := map[string]*fakeHost{"p:1": primary, "r:1": replica}
	table := zone.NewTable()
	cfg := func(name string, inactive bool) Config {
		return Config{Interval: time.Minute, Timeout: time.Second, MaxFails: 3, Inactive: inactive,
			Clusters: []ClusterConfig{{Name: name, Hosts: []string{"p:1", "r:1"}}}}
	}
	running := startFake(t, cfg("main", false), table, hosts)
	waitSnapshot(t, table, "of main ready", func(s *zone.Snapshot) bool { return s.Ready && roles(s) == "pr" })

	// Each swap renames the cluster; a few of them, since before the fix
	// the old snapshot was seen only when the aggregator had not run yet.
	for i, name := range []string{"prod", "stage", "main", "prod", "stage"} {
		next := startFake(t, cfg(name, true), table, hosts)
		waitClosed(t, next.Ready(), "the new prober's first round")
		running.Deactivate()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		next.Activate(ctx, running)
		cancel()
		s := table.Load()
		if len(s.Clusters) != 1 || s.Clusters[0].Name != name {
			got := []string{}
			for _, c := range s.Clusters {
				got = append(got, c.Name)
			}
			t.Fatalf("swap %d: Activate returned with clusters %v in the table, not %q", i, got, name)
		}
		running = next
	}
}
