package probe

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgdns/pgdns/zone"
)

// writerHost is a writable host of the tests' cluster (identity 7) on
// timeline tl, in the server run that started at run, inserting at at.
func writerHost(addr string, tl uint32, run time.Time, at zone.LSN) zone.Host {
	return zone.Host{Addr: addr, Seen: true, SystemID: 7, Timeline: tl, TimelineExact: true, StartedAt: run, InsertLSN: at, Role: zone.RolePrimary}
}

// reachSteps returns the steps of a fresh prober's branch watch of
// cluster "main" (identity 7): each step is one snapshot with the newest
// timeline and the hosts given, and returns the snapshot's reach.
func reachSteps() func(newest uint32, hosts ...zone.Host) []zone.TimelineReach {
	p := &Prober{branches: []map[uint32]Branch{{}}, forks: make([][]zone.TimelineFork, 1), writing: []map[uint32]bool{{}}}
	return func(newest uint32, hosts ...zone.Host) []zone.TimelineReach {
		c := &zone.Cluster{Name: "main", Identity: 7, NewestTimeline: newest, Hosts: hosts}
		p.watchBranches(0, c)
		return c.Reached
	}
}

// Review 5, F12: a timeline is forked once two different servers were
// seen writable on it, at once or one after the other; the same server
// restarted (a new start time, the same address) or listed under another
// address (the same run) is not a fork; what is remembered (the state
// file, a predecessor) takes part.
func TestWatchBranches(t *testing.T) {
	run1, run2 := time.Unix(1000, 0), time.Unix(2000, 0)
	p := &Prober{branches: []map[uint32]Branch{{}}, forks: make([][]zone.TimelineFork, 1)}
	step := func(hosts ...zone.Host) []zone.TimelineFork {
		c := &zone.Cluster{Name: "main", Identity: 7, Hosts: hosts}
		p.watchBranches(0, c)
		return c.ForkedTimelines
	}
	if f := step(writerHost("a:5432", 2, run1, 0x100)); f != nil {
		t.Fatalf("one writer forked %v", f)
	}
	if f := step(writerHost("a:5432", 2, run2, 0x200)); f != nil {
		t.Fatalf("the same server restarted forked %v", f)
	}
	if f := step(writerHost("a-by-name:5432", 2, run2, 0x200)); f != nil {
		t.Fatalf("the same server run under another address forked %v", f)
	}
	foreign := writerHost("x:5432", 2, run1, 0x300)
	foreign.SystemID = 8
	if f := step(foreign); f != nil {
		t.Fatalf("another cluster's server forked %v", f)
	}
	replica := writerHost("b:5432", 2, run1, 0)
	replica.InRecovery, replica.Role = true, zone.RoleReplica
	if f := step(replica); f != nil {
		t.Fatalf("a replica forked %v", f)
	}
	f := step(writerHost("b:5432", 2, run1, 0x400))
	if len(f) != 1 || f[0].Timeline != 2 || f[0].Note != "a:5432 writable on it at 0/100, then b:5432 at 0/400" {
		t.Fatalf("a second server writable on timeline 2: forks %+v", f)
	}
	if g := step(writerHost("b:5432", 3, run1, 0x500)); len(g) != 1 || &g[0] != &f[0] {
		t.Errorf("a later timeline: forks %+v, want timeline 2's, the same slice", g)
	}

	// At once: a split brain.
	p = &Prober{branches: []map[uint32]Branch{{}}, forks: make([][]zone.TimelineFork, 1)}
	a, b := writerHost("a:5432", 2, run1, 0x100), writerHost("b:5432", 2, run2, 0x200)
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

// Review 6, G2: a new server run at the first writer's address is the same
// branch only when its WAL provably continues the last run's: not promoted
// to the timeline in its own run (seen in recovery first, or its last
// checkpoint on an older timeline) and at an insert position at least the
// last run's last flush position there. A restart (the shutdown checkpoint,
// or the one ending crash recovery, on the timeline; WAL past the flushed)
// is not a fork.
func TestWatchBranchesNewRunAtTheWritersAddress(t *testing.T) {
	run1, run2, run3 := time.Unix(1000, 0), time.Unix(2000, 0), time.Unix(3000, 0)
	type obs struct {
		run               time.Time
		recovery          bool
		tl, ckpt          uint32
		insert, flush     zone.LSN
		wantFork, wantWhy string
	}
	for _, tc := range []struct {
		name  string
		steps []obs
	}{
		{"restarted, WAL continues", []obs{
			{run: run1, tl: 2, ckpt: 1, insert: 0x200, flush: 0x180},
			{run: run1, tl: 2, ckpt: 2, insert: 0x500, flush: 0x400},
			{run: run2, tl: 2, ckpt: 2, insert: 0x478, flush: 0x478}, // crashed: its unflushed tail past 0x400 lost
			{run: run2, tl: 2, ckpt: 2, insert: 0x900, flush: 0x900},
		}},
		{"rebuilt from a standby, seen in recovery, promoted", []obs{
			{run: run1, tl: 2, ckpt: 1, insert: 0x200, flush: 0x200},
			{run: run2, recovery: true, tl: 1, ckpt: 1},
			{run: run2, tl: 2, ckpt: 2, insert: 0x9000, flush: 0x9000, wantFork: "a:5432 writable on it at 0/200, then a:5432 at 0/9000 in another server run",
				wantWhy: "promoted to it in its own run: seen in recovery in that run"},
		}},
		{"rebuilt and promoted, first seen writable", []obs{
			{run: run1, tl: 2, ckpt: 1, insert: 0x200, flush: 0x200},
			{run: run2, tl: 2, ckpt: 1, insert: 0x9000, flush: 0x9000, wantFork: "then a:5432 at 0/9000 in another server run",
				wantWhy: "promoted to it in its own run: its last checkpoint is on timeline 1"},
		}},
		{"rebuilt, checkpointed since, behind", []obs{
			{run: run1, tl: 2, ckpt: 1, insert: 0x200, flush: 0x200},
			{run: run1, tl: 2, ckpt: 1, insert: 0x800, flush: 0x700},
			{run: run3, tl: 2, ckpt: 2, insert: 0x600, flush: 0x600, wantFork: "then a:5432 at 0/600 in another server run",
				wantWhy: "at 0/600, below 0/700 that the run before flushed"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &zone.Cluster{Name: "main", Identity: 7, Hosts: []zone.Host{{Addr: "a:5432"}}}
			p := &Prober{state: []*zone.Cluster{src}, branches: []map[uint32]Branch{{}}, forks: make([][]zone.TimelineFork, 1),
				runs: map[*zone.Host]writableRun{}, writing: []map[uint32]bool{{}}}
			for i, o := range tc.steps {
				h := &src.Hosts[0]
				p.watchRun(h, Sample{InRecovery: o.recovery, StartedAt: o.run, Timeline: o.tl, CheckpointTimeline: o.ckpt, FlushLSN: o.flush})
				h.Seen, h.SystemID, h.InRecovery, h.StartedAt, h.Timeline, h.TimelineExact, h.InsertLSN = true, 7, o.recovery, o.run, o.tl, true, o.insert
				c := &zone.Cluster{Name: "main", Identity: 7, Hosts: []zone.Host{*h}}
				if c.Hosts[0].Role = zone.RolePrimary; o.recovery {
					c.Hosts[0].Role = zone.RoleReplica
				}
				p.watchBranches(0, c)
				f := c.ForkedTimelines
				switch {
				case o.wantFork == "" && f != nil:
					t.Fatalf("step %d: forked %+v", i, f)
				case o.wantFork != "" && (len(f) != 1 || !strings.Contains(f[0].Note, o.wantFork) || !strings.Contains(f[0].Note, o.wantWhy)):
					t.Fatalf("step %d: forks %+v, want a note with %q and %q", i, f, o.wantFork, o.wantWhy)
				}
			}
			if tc.steps[len(tc.steps)-1].wantFork == "" {
				last := tc.steps[len(tc.steps)-1]
				if b := p.branches[0][2]; !b.Run.Equal(last.run) || b.Last != last.flush || !p.writing[0][2] {
					t.Errorf("branch %+v, writing %v: want the newest run and its flush position", b, p.writing[0])
				}
			}
		})
	}
}

// A first writer's flush position moves with every probe of it: it is not
// reported (no state file write) while its run writes, but once the run is
// no longer seen writable, and when the prober stops.
func TestWriterFlushPositionReported(t *testing.T) {
	var reports []map[string]Remembered
	src := &zone.Cluster{Name: "main", Identity: 7, Hosts: []zone.Host{{Addr: "a:5432"}}}
	p := &Prober{state: []*zone.Cluster{src}, timelines: []map[uint32]timelineHistory{{}}, branches: []map[uint32]Branch{{}},
		forks: make([][]zone.TimelineFork, 1), runs: map[*zone.Host]writableRun{}, writing: []map[uint32]bool{{}},
		pending: make([]map[string]fork, 1)}
	p.cfg.Hooks.Learned = func(m map[string]Remembered) { reports = append(reports, m) }
	p.active.Store(true)
	run := time.Unix(1000, 0)
	probe := func(writable bool, flush zone.LSN) {
		h := &src.Hosts[0]
		p.watchRun(h, Sample{InRecovery: !writable, StartedAt: run, Timeline: 2, CheckpointTimeline: 2, FlushLSN: flush})
		h.Seen, h.SystemID, h.InRecovery, h.StartedAt, h.Timeline, h.TimelineExact, h.InsertLSN = true, 7, !writable, run, 2, true, flush
		c := &zone.Cluster{Name: "main", Identity: 7, Hosts: []zone.Host{*h}}
		c.Hosts[0].Role = zone.RolePrimary
		if !writable {
			c.Hosts[0].Role, c.Hosts[0].Fails = zone.RoleDown, 3
		}
		p.watchBranches(0, c)
		p.reportLearned()
	}
	probe(true, 0x100)
	probe(true, 0x200)
	probe(true, 0x300)
	if len(reports) != 1 || reports[0]["main"].Branches[2].Last != 0x100 {
		t.Fatalf("while the writer writes: %d reports, want the first one only (%+v)", len(reports), reports)
	}
	probe(false, 0)
	if len(reports) != 2 || reports[1]["main"].Branches[2].Last != 0x300 {
		t.Fatalf("the writer gone: %d reports, want one more with its last flush position 0/300 (%+v)", len(reports), reports)
	}
	run = time.Unix(2000, 0) // restarted, writing on
	probe(true, 0x400)
	probe(true, 0x500)
	n := len(reports)
	p.reportFinal()
	if len(reports) != n+1 || reports[n]["main"].Branches[2].Last != 0x500 || !reports[n]["main"].Branches[2].Run.Equal(run) {
		t.Fatalf("stopping: want a report of the running writer's flush position 0/500 (%+v)", reports[len(reports)-1])
	}
}

// Review 6, G6: the first writer's run seen under another address (a
// reload moved its entry from an IP to a DNS name, or to a forwarder)
// makes that address the writer's: a later run there is its restart when
// its WAL continues, as at the first address; one promoted in its own run
// there is still another branch (G2). What a predecessor saw the run under
// is merged in.
func TestWatchBranchesWriterRelisted(t *testing.T) {
	run1, run2, run3 := time.Unix(1000, 0), time.Unix(2000, 0), time.Unix(3000, 0)
	src := &zone.Cluster{Name: "main", Identity: 7, Hosts: []zone.Host{{Addr: "a:5432"}}}
	p := &Prober{state: []*zone.Cluster{src}, branches: []map[uint32]Branch{{}}, forks: make([][]zone.TimelineFork, 1),
		runs: map[*zone.Host]writableRun{}, writing: []map[uint32]bool{{}}}
	step := func(addr string, run time.Time, ckpt uint32, at zone.LSN) []zone.TimelineFork {
		h := &src.Hosts[0]
		h.Addr = addr
		p.watchRun(h, Sample{StartedAt: run, Timeline: 2, CheckpointTimeline: ckpt, FlushLSN: at})
		h.Seen, h.SystemID, h.StartedAt, h.Timeline, h.TimelineExact, h.InsertLSN = true, 7, run, 2, true, at
		c := &zone.Cluster{Name: "main", Identity: 7, Hosts: []zone.Host{*h}}
		c.Hosts[0].Role = zone.RolePrimary
		p.watchBranches(0, c)
		return c.ForkedTimelines
	}
	step("a:5432", run1, 1, 0x100) // promoted to 2
	if f := step("db1:5432", run1, 2, 0x200); f != nil {
		t.Fatalf("the writer's run relisted forked %v", f)
	}
	if b := p.branches[0][2]; b.Writer != "a:5432" || !slices.Equal(b.Aliases, []string{"db1:5432"}) || b.Last != 0x200 || !p.writing[0][2] {
		t.Fatalf("branch %+v, writing %v: want db1:5432 an alias, its flush position the writer's", b, p.writing[0])
	}
	if f := step("db1:5432", run2, 2, 0x300); f != nil {
		t.Fatalf("the writer restarted under its alias forked %v", f)
	}
	if f := step("db1:5432", run3, 1, 0x9000); len(f) != 1 || !strings.Contains(f[0].Note, "promoted to it in its own run") {
		t.Fatalf("a server promoted at the alias: forks %+v, want timeline 2 forked", f)
	}

	mine := map[uint32]Branch{2: {Writer: "db1:5432", Aliases: []string{"vip:5432"}, Run: run1, At: 0x200}}
	mergeBranches(mine, map[uint32]Branch{2: {Writer: "a:5432", Run: run1, At: 0x100}})
	if got := mine[2]; got.Writer != "a:5432" || got.Forked != "" || !slices.Equal(got.Aliases, []string{"db1:5432", "vip:5432"}) {
		t.Errorf("merged %+v: one run under three addresses, the first writer's first", got)
	}
}

// An operator forgets a timeline that only a replica's lower bound showed
// (zone.Cluster.Witnessed, review 6, G1c): allowed, and it is gone; one
// above both it and the newest is refused.
func TestForgetAWitnessedTimeline(t *testing.T) {
	c := &zone.Cluster{Name: "main", Identity: 7, NewestTimeline: 1, Witnessed: 2, WitnessedBy: "n3:5432"}
	p := &Prober{state: []*zone.Cluster{c}, timelines: []map[uint32]timelineHistory{{}}, rebuild: make([]bool, 1),
		lastExact: map[*zone.Host]zone.TimelineEnd{}}
	if _, _, err := p.forget(forgetRequest{cluster: "main", timeline: 3}); err == nil {
		t.Fatal("forgot timeline 3, above the witnessed 2")
	}
	if _, before, err := p.forget(forgetRequest{cluster: "main", timeline: 2}); err != nil || before != 1 ||
		c.NewestTimeline != 1 || c.Witnessed != 0 || c.WitnessedBy != "" {
		t.Fatalf("forget 2: %v, before %d; newest %d witnessed %d %q", err, before, c.NewestTimeline, c.Witnessed, c.WitnessedBy)
	}
}

// A running writer's positions are reported at most once per
// positionsEvery (a second, or the probe interval when longer), not only
// with another change, once the run is gone or when the prober stops: a
// pgdns killed -9 left the state file's "last" and "insert" as old as its
// last other change, and a restore in place that lost the writes after
// them passed for a restart (rule 13's window too small, rule 12's check
// weaker).
func TestRunningWriterPositionsReportedAtABoundedRate(t *testing.T) {
	var reports []map[string]Remembered
	src := &zone.Cluster{Name: "main", Identity: 7, Hosts: []zone.Host{{Addr: "a:5432"}}}
	p := &Prober{state: []*zone.Cluster{src}, timelines: []map[uint32]timelineHistory{{}}, branches: []map[uint32]Branch{{}},
		forks: make([][]zone.TimelineFork, 1), runs: map[*zone.Host]writableRun{}, writing: []map[uint32]bool{{}},
		pending: make([]map[string]fork, 1)}
	p.cfg.Interval = 100 * time.Millisecond
	p.cfg.Hooks.Learned = func(m map[string]Remembered) { reports = append(reports, m) }
	p.active.Store(true)
	run, t0 := time.Unix(1000, 0), time.Unix(5000, 0)
	probe := func(at time.Duration, pos zone.LSN) {
		h := &src.Hosts[0]
		p.watchRun(h, Sample{StartedAt: run, Timeline: 2, CheckpointTimeline: 2, FlushLSN: pos})
		h.Seen, h.SystemID, h.StartedAt, h.Timeline, h.TimelineExact, h.InsertLSN = true, 7, run, 2, true, pos
		c := &zone.Cluster{Name: "main", Identity: 7, Hosts: []zone.Host{*h}}
		c.Hosts[0].Role = zone.RolePrimary
		p.watchBranches(0, c)
		p.report(false, t0.Add(at))
	}
	// expect checks that there are n reports and, when last is not 0,
	// that the newest says timeline 2's writer was last seen at last.
	expect := func(n int, last zone.LSN, when string) {
		t.Helper()
		if len(reports) != n || last != 0 && reports[n-1]["main"].Branches[2].Last != last {
			t.Fatalf("%s: %d reports, want %d, the newest with last %s (%+v)", when, len(reports), n, last, reports)
		}
	}
	probe(0, 0x100) // the writer learned: reported
	for i := 1; i < 10; i++ {
		probe(time.Duration(i)*100*time.Millisecond, zone.LSN(0x100+i*0x10))
	}
	expect(1, 0, "within a second of the first report")
	probe(time.Second, 0x200)
	expect(2, 0x200, "a second after")
	if insert := reports[1]["main"].Branches[2].Insert; insert != 0x200 {
		t.Fatalf("a second after: the second report's insert %s, want 0/200", insert)
	}
	probe(1500*time.Millisecond, 0x300)
	probe(1900*time.Millisecond, 0x300)
	expect(2, 0, "within a second of the second report")
	probe(2100*time.Millisecond, 0x300)
	expect(3, 0x300, "a second after the second")
	probe(5*time.Second, 0x300) // nothing moved: nothing to report
	expect(3, 0, "positions unchanged")
	p.cfg.Interval = 3 * time.Second // a probe interval over a second bounds it instead
	probe(6*time.Second, 0x400)
	expect(4, 0, "3.9 s after the last report with probe.interval 3s")
	probe(7500*time.Millisecond, 0x500)
	probe(8500*time.Millisecond, 0x580)
	expect(4, 0, "2.5 s after the last report with probe.interval 3s")
	probe(9*time.Second, 0x600)
	expect(5, 0x600, "3 s after the last report with probe.interval 3s")
}

// Review 7, H4: how far each older timeline's writer was seen to write
// goes into the snapshot (zone.Cluster.Reached), for the timelines below
// the newest only, the same slice while it holds.
func TestReachedTimelines(t *testing.T) {
	run := time.Unix(1000, 0)
	step := reachSteps()
	if r := step(1, writerHost("a:5432", 1, run, 0x100)); r != nil {
		t.Fatalf("one timeline: reached %+v, want none (the newest timeline's writer writes on)", r)
	}
	if r := step(1, writerHost("a:5432", 1, run, 0x300)); r != nil {
		t.Fatalf("one timeline: reached %+v", r)
	}
	r := step(2, writerHost("b:5432", 2, run, 0x280))
	if want := []zone.TimelineReach{{Timeline: 1, Insert: 0x300}}; !slices.Equal(r, want) {
		t.Fatalf("after the failover: reached %+v, want %+v", r, want)
	}
	if again := step(2, writerHost("b:5432", 2, run, 0x400)); len(again) != 1 || &again[0] != &r[0] {
		t.Errorf("unchanged: reached %+v, want the same slice", again)
	}
}

// Review 12a, R12a-1: a replica streaming an older timeline that received
// or replayed past what its writer was seen to insert (the writer's last write before
// it died reached that replica only) raises the timeline's reach, and says
// so; a replica of no known writer's timeline, one of another identity,
// and one behind the writer change nothing; a replica on the newest
// timeline does not either; one without an exact timeline counts as a
// possible position of every timeline at or above its lower bound.
func TestReachedTimelinesByAReplica(t *testing.T) {
	run := time.Unix(1000, 0)
	step := reachSteps()
	writable := writerHost("a:5432", 1, run, 0x300)
	replica := func(addr string, tl uint32, exact bool, id uint64, replay zone.LSN) zone.Host {
		return zone.Host{Addr: addr, Seen: true, InRecovery: true, SystemID: id, Timeline: tl, TimelineExact: exact, ReplayLSN: replay, Role: zone.RoleReplica}
	}
	step(1, writable, replica("c:5432", 1, true, 7, 0x200))
	// The writer is gone (down: not writable in this build); c replays
	// WAL of timeline 1 past what pgdns saw a insert; e's says nothing
	// (another identity), d's is a possible position (no exact timeline).
	step(1, replica("c:5432", 1, true, 7, 0x380), replica("d:5432", 1, false, 7, 0x900), replica("e:5432", 1, true, 8, 0x900))
	r := step(2, writerHost("b:5432", 2, run, 0x400),
		replica("c:5432", 1, true, 7, 0x380), replica("f:5432", 2, true, 7, 0x990))
	if want := []zone.TimelineReach{{Timeline: 1, Insert: 0x380, Replica: "c:5432", Possible: 0x900, PossibleBy: "d:5432", PossibleFloor: 1}}; !slices.Equal(r, want) {
		t.Fatalf("after the failover: reached %+v, want %+v", r, want)
	}
	// g, paused, received past what it replayed: its received WAL counts.
	paused := replica("g:5432", 1, true, 7, 0x200)
	paused.ReceiveLSN = 0x3c0
	r = step(2, writerHost("b:5432", 2, run, 0x400), paused)
	if want := []zone.TimelineReach{{Timeline: 1, Insert: 0x3c0, Replica: "g:5432", Possible: 0x900, PossibleBy: "d:5432", PossibleFloor: 1}}; !slices.Equal(r, want) {
		t.Fatalf("a paused replica's received WAL: reached %+v, want %+v", r, want)
	}
	// A replica without a WAL receiver (d) holds a position that may be
	// any timeline's at or above its lower bound: with a lower bound of 2
	// it says nothing of timeline 1; with 1, it counts as possible for
	// timelines 1 and 2 both (published once 3 is the newest).
	step = reachSteps()
	step(1, writable)
	second := writerHost("b:5432", 2, run, 0x400)
	step(2, second, replica("h:5432", 2, false, 7, 0x700))
	r = step(3, writerHost("i:5432", 3, run, 0x500),
		replica("d:5432", 1, false, 7, 0x600))
	if want := []zone.TimelineReach{{Timeline: 1, Insert: 0x300, Possible: 0x600, PossibleBy: "d:5432", PossibleFloor: 1},
		{Timeline: 2, Insert: 0x400, Possible: 0x700, PossibleBy: "h:5432", PossibleFloor: 2}}; !slices.Equal(r, want) {
		t.Fatalf("receiver-less replicas: reached %+v, want %+v", r, want)
	}
	// A replica behind the writer leaves the writer's reach.
	step = reachSteps()
	step(1, writable, replica("c:5432", 1, true, 7, 0x280))
	r = step(2, writerHost("b:5432", 2, run, 0x400))
	if want := []zone.TimelineReach{{Timeline: 1, Insert: 0x300}}; !slices.Equal(r, want) {
		t.Fatalf("a replica behind the writer: reached %+v, want %+v", r, want)
	}
}

// Review 7, H5: the first writer's run refused a session in crash
// recovery, and is writable again with the same start time: a crash of
// one of its processes reinitialised it. Its first sample after is already
// past the insert position last seen (clients wrote on at once), yet the
// window of a restart is set, up to that sample's position. A session that
// only ended, a refusal of a run seen in recovery, or one of another run,
// sets none.
func TestWatchBranchesReinitialisedWriter(t *testing.T) {
	run1, run2 := time.Unix(1000, 0), time.Unix(2000, 0)
	recovering := classify(connectError(&pgconn.PgError{Severity: "FATAL", Code: "57P03", Message: "the database system is in recovery mode"}))
	ended := classify(fmt.Errorf("probe query: %w", io.ErrUnexpectedEOF))
	type obs struct {
		err      error // a failed probe, else a sample:
		run      time.Time
		recovery bool
		insert   zone.LSN
		crashed  bool // the sample says a session ended with the crash notice
	}
	for _, tc := range []struct {
		name     string
		steps    []obs
		wantUpto zone.LSN
	}{
		{"refused in crash recovery, back past", []obs{
			{run: run1, insert: 0x500}, {err: ended}, {err: recovering}, {run: run1, insert: 0x900}, {run: run1, insert: 0xa00},
		}, 0x900},
		{"its session ended with the crash notice, back at once", []obs{
			{run: run1, insert: 0x500}, {run: run1, insert: 0x980, crashed: true},
		}, 0x980},
		{"only its session ended", []obs{{run: run1, insert: 0x500}, {err: ended}, {run: run1, insert: 0x900}}, 0},
		{"refused while a replica", []obs{
			{run: run1, insert: 0x500}, {run: run2, recovery: true}, {err: recovering}, {run: run2, recovery: true},
		}, 0},
		{"refused, back in another run", []obs{{run: run1, insert: 0x500}, {err: recovering}, {run: run2, insert: 0x900}}, 0x900},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &zone.Cluster{Name: "main", Identity: 7, Hosts: []zone.Host{{Addr: "a:5432"}}}
			p := &Prober{state: []*zone.Cluster{src}, branches: []map[uint32]Branch{{}}, forks: make([][]zone.TimelineFork, 1),
				runs: map[*zone.Host]writableRun{}, writing: []map[uint32]bool{{}}}
			h := &src.Hosts[0]
			for _, o := range tc.steps {
				if o.err != nil {
					if crashRecovery(o.err) {
						p.watchCrash(h, "it refused a session in crash recovery at 1970-01-01T00:25:00Z")
					}
					h.Fails++
					continue
				}
				if o.crashed {
					p.watchCrash(h, "its session was ended for a crash of another server process, 57P02")
				}
				p.watchRun(h, Sample{InRecovery: o.recovery, StartedAt: o.run, Timeline: 2, CheckpointTimeline: 2, FlushLSN: o.insert})
				h.Seen, h.Fails, h.SystemID, h.InRecovery, h.StartedAt, h.Timeline, h.TimelineExact, h.InsertLSN = true, 0, 7, o.recovery, o.run, 2, true, o.insert
				c := &zone.Cluster{Name: "main", Identity: 7, Hosts: []zone.Host{*h}}
				if c.Hosts[0].Role = zone.RolePrimary; o.recovery {
					c.Hosts[0].Role = zone.RoleReplica
				}
				p.watchBranches(0, c)
			}
			b := p.branches[0][2]
			if b.Upto != tc.wantUpto {
				t.Fatalf("window up to %v (%q), want %v", b.Upto, b.Restarted, tc.wantUpto)
			}
			if tc.name == "refused in crash recovery, back past" &&
				b.Restarted != "a:5432's server reinitialised after a crash (it refused a session in crash recovery at 1970-01-01T00:25:00Z)" {
				t.Errorf("window noted %q", b.Restarted)
			}
		})
	}
}
