package probe

import (
	"testing"
	"time"

	"github.com/pgdns/pgdns/zone"
)

// Review 5, F12: a timeline is forked once two different servers were
// seen writable on it, at once or one after the other; the same server
// restarted (a new start time, the same address) or listed under another
// address (the same run) is not a fork; what is remembered (the state
// file, a predecessor) takes part.
func TestWatchBranches(t *testing.T) {
	run1, run2 := time.Unix(1000, 0), time.Unix(2000, 0)
	writable := func(addr string, tl uint32, run time.Time, at zone.LSN) zone.Host {
		return zone.Host{Addr: addr, Seen: true, SystemID: 7, Timeline: tl, TimelineExact: true, StartedAt: run, InsertLSN: at, Role: zone.RolePrimary}
	}
	p := &Prober{branches: []map[uint32]Branch{{}}, forks: make([][]zone.TimelineFork, 1)}
	step := func(hosts ...zone.Host) []zone.TimelineFork {
		c := &zone.Cluster{Name: "main", Identity: 7, Hosts: hosts}
		p.watchBranches(0, c)
		return c.ForkedTimelines
	}
	if f := step(writable("a:5432", 2, run1, 0x100)); f != nil {
		t.Fatalf("one writer forked %v", f)
	}
	if f := step(writable("a:5432", 2, run2, 0x200)); f != nil {
		t.Fatalf("the same server restarted forked %v", f)
	}
	if f := step(writable("a-by-name:5432", 2, run2, 0x200)); f != nil {
		t.Fatalf("the same server run under another address forked %v", f)
	}
	foreign := writable("x:5432", 2, run1, 0x300)
	foreign.SystemID = 8
	if f := step(foreign); f != nil {
		t.Fatalf("another cluster's server forked %v", f)
	}
	replica := writable("b:5432", 2, run1, 0)
	replica.InRecovery, replica.Role = true, zone.RoleReplica
	if f := step(replica); f != nil {
		t.Fatalf("a replica forked %v", f)
	}
	f := step(writable("b:5432", 2, run1, 0x400))
	if len(f) != 1 || f[0].Timeline != 2 || f[0].Note != "a:5432 writable on it at 0/100, then b:5432 at 0/400" {
		t.Fatalf("a second server writable on timeline 2: forks %+v", f)
	}
	if g := step(writable("b:5432", 3, run1, 0x500)); len(g) != 1 || &g[0] != &f[0] {
		t.Errorf("a later timeline: forks %+v, want timeline 2's, the same slice", g)
	}

	// At once: a split brain.
	p = &Prober{branches: []map[uint32]Branch{{}}, forks: make([][]zone.TimelineFork, 1)}
	a, b := writable("a:5432", 2, run1, 0x100), writable("b:5432", 2, run2, 0x200)
	a.Role, a.Aside, b.Role, b.Aside = zone.RoleUnknown, zone.AsideSplitBrain, zone.RoleUnknown, zone.AsideSplitBrain
	c := &zone.Cluster{Name: "main", Identity: 7, Hosts: []zone.Host{a, b}, SplitBrain: true}
	p.watchBranches(0, c)
	if f := c.ForkedTimelines; len(f) != 1 || f[0].Note != "a:5432 writable on it at 0/100, then b:5432 at 0/200; split brain seen" {
		t.Fatalf("split brain: forks %+v", f)
	}

	// Remembered: a pgdns restarted between the two promotions.
	mine := map[uint32]Branch{2: {Writer: "b:5432", Run: run2, At: 0x200}}
	mergeBranches(mine, map[uint32]Branch{2: {Writer: "a:5432", Run: run1, At: 0x100}, 1: {Writer: "o:5432", At: 0x10}})
	if got := mine[2]; got.Writer != "a:5432" || got.Forked != "a:5432 writable on it at 0/100, then b:5432 at 0/200" {
		t.Errorf("merged %+v: the remembered first writer stands, and a different one forks", got)
	}
	if got := mine[1]; got.Writer != "o:5432" || got.Forked != "" {
		t.Errorf("merged %+v", got)
	}
}
