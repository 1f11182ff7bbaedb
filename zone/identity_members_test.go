package zone

import (
	"strings"
	"testing"
)

// An established identity is replaced only by a majority of hosts seen
// with it (Host.OfIdentity): a rebuild at the cluster's addresses is
// followed, while another cluster's hosts listed by mistake, never seen
// with it, do not outvote it once its own host is down: no primary, the
// foreign hosts' note says why, and Unfollowed names the identity not
// followed (review 7, H6).
func TestIdentityReplacedOnlyByHostsSeenWithIt(t *testing.T) {
	ours, f1, f2 := seen("10.0.0.1", false, 0), seen("10.0.0.11", false, 0), seen("10.0.0.12", true, 0)
	f1.SystemID, f2.SystemID = 99, 99
	c := &Cluster{Name: "main", Identity: 7, Hosts: []Host{ours, f1, f2}}
	c.Hosts[0].OfIdentity = 7
	c.Decide(t0, stale, 3)
	if c.Identity != 7 || c.Primary != 0 || c.Unfollowed != 0 {
		t.Fatalf("ours live: identity %d primary %d unfollowed %d", c.Identity, c.Primary, c.Unfollowed)
	}
	if c.Hosts[1].OfIdentity != 0 || c.Hosts[0].OfIdentity != 7 {
		t.Fatalf("seen with the identity: %d %d", c.Hosts[0].OfIdentity, c.Hosts[1].OfIdentity)
	}
	c.Hosts[0].Fails = 3 // ours stops
	c.Decide(t0, stale, 3)
	if c.Identity != 7 || c.Primary != -1 || c.Unfollowed != 99 {
		t.Fatalf("foreign majority: identity %d primary %d unfollowed %d", c.Identity, c.Primary, c.Unfollowed)
	}
	if n := c.Hosts[1].Note; c.Hosts[1].Aside != AsideForeign || !strings.Contains(n, "is not the cluster's 7") ||
		!strings.Contains(n, "but none was seen with 7") || !strings.Contains(n, "clusters.main.system_identifier") {
		t.Fatalf("foreign host's note: %v %q", c.Hosts[1].Aside, n)
	}
	c.Hosts[0].Fails = 0 // back: kept, nothing unfollowed
	c.Decide(t0, stale, 3)
	if c.Identity != 7 || c.Primary != 0 || c.Unfollowed != 0 {
		t.Fatalf("ours back: identity %d primary %d unfollowed %d", c.Identity, c.Primary, c.Unfollowed)
	}

	// Rebuilt at the same addresses: hosts seen with 7 now show 42.
	rebuilt := &Cluster{Name: "main", Identity: 7, Hosts: []Host{seen("10.0.0.1", false, 0), seen("10.0.0.2", true, 0), seen("10.0.0.3", true, 0)}}
	for i := range rebuilt.Hosts {
		rebuilt.Hosts[i].SystemID, rebuilt.Hosts[i].OfIdentity = 42, 7
	}
	rebuilt.Hosts[2].OfIdentity = 0 // one new host: two of three seen with 7 are a majority
	rebuilt.Decide(t0, stale, 3)
	if rebuilt.Identity != 42 || rebuilt.Primary != 0 || rebuilt.Unfollowed != 0 {
		t.Fatalf("rebuilt: identity %d primary %d unfollowed %d", rebuilt.Identity, rebuilt.Primary, rebuilt.Unfollowed)
	}
}
