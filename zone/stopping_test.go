package zone

import "testing"

// A writable host shutting down while other sessions on it remain
// (Stopping) is in no answer, primary nor any, and no replica has it
// for a primary; it is no second writer either: a promoted replica on a
// newer timeline is the primary, and one on the same timeline is no
// split brain with it.
func TestStoppingWriterIsSetAside(t *testing.T) {
	p := seen("10.0.0.1", false, 0x3000060)
	p.Stopping = true
	r := seen("10.0.0.2", true, 0x3000060)
	s := cluster(p, r)
	c := s.Clusters[0]
	if h := c.Hosts[0]; h.Aside != AsideStopping || h.Role != RoleUnknown || h.Note != stoppingNote || c.Primary != -1 {
		t.Errorf("stopping writer: %v, aside %v (%s), cluster primary %d", h.Role, h.Aside, h.Note, c.Primary)
	}
	for _, name := range []string{"primary.db.local.", "any.db.local.", "prefer-replica.db.local."} {
		if got := selectIPs(t, s, name, t0, 0); len(got) > 1 || len(got) == 1 && got[0] == "10.0.0.1" {
			t.Errorf("%s answered %v", name, got)
		}
	}
	promoted := seen("10.0.0.2", false, 0x3000100)
	if c := cluster(p, promoted).Clusters[0]; c.SplitBrain || c.Primary != 1 {
		t.Errorf("a writer beside the stopping one: split brain %v, primary %d", c.SplitBrain, c.Primary)
	}
}
