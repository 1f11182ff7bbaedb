package zone

import (
	"strconv"
	"time"
)

// Decide sets each host's Role and Note and the cluster's Primary from the
// observed fields. The probe calls it on a Cluster it is building, before
// the Snapshot is published. The rules, in order:
//
//   - maxFails failed probes in a row, or no good probe for staleAfter: down;
//   - never probed successfully (and not down yet): unknown;
//   - a system identifier other than the cluster's (the one most live hosts
//     share; on a tie, the first configured host's): unknown, set aside,
//     since it belongs to another cluster;
//   - in recovery: replica;
//   - writable: primary if it is the only writable host on the highest
//     timeline among the writable ones. A promoted replica is on a higher
//     timeline than the primary it replaced, so it wins; two writable hosts
//     on the same timeline cannot be told apart, and neither is answered.
func (c *Cluster) Decide(now time.Time, staleAfter time.Duration, maxFails int) {
	c.Primary = -1
	live := make([]bool, len(c.Hosts))
	for i := range c.Hosts {
		h := &c.Hosts[i]
		h.Note = ""
		switch {
		case h.Fails >= maxFails:
			h.Role = RoleDown
		case !h.Seen:
			h.Role = RoleUnknown
		case now.Sub(h.ProbedAt) > staleAfter:
			h.Role = RoleDown
			h.Note = "no successful probe for " + now.Sub(h.ProbedAt).Round(time.Millisecond).String()
		default:
			live[i] = true
		}
	}

	sysid := c.identity(live)
	var bestTL uint32
	writable := 0
	for i := range c.Hosts {
		if !live[i] {
			continue
		}
		h := &c.Hosts[i]
		if h.SystemID != sysid {
			h.Role = RoleUnknown
			h.Note = "system identifier " + strconv.FormatUint(h.SystemID, 10) +
				" is not the cluster's " + strconv.FormatUint(sysid, 10)
			live[i] = false
			continue
		}
		if h.InRecovery {
			h.Role = RoleReplica
			continue
		}
		switch {
		case writable == 0 || h.Timeline > bestTL:
			bestTL, writable, c.Primary = h.Timeline, 1, i
		case h.Timeline == bestTL:
			writable++
		}
	}

	for i := range c.Hosts {
		h := &c.Hosts[i]
		if !live[i] || h.InRecovery {
			continue
		}
		switch {
		case writable > 1:
			h.Role = RoleUnknown
			h.Note = "split brain: " + strconv.Itoa(writable) + " writable hosts on timeline " +
				strconv.FormatUint(uint64(bestTL), 10)
		case i == c.Primary:
			h.Role = RolePrimary
		default:
			h.Role = RoleUnknown
			h.Note = "writable on timeline " + strconv.FormatUint(uint64(h.Timeline), 10) +
				", superseded by timeline " + strconv.FormatUint(uint64(bestTL), 10)
		}
	}
	c.SplitBrain = writable > 1
	if c.SplitBrain {
		c.Primary = -1
	}
	c.markSyncStandbys()
}

// markSyncStandbys sets Sync on the replicas that the primary lists as
// synchronous standbys. Without a primary nobody is known to be one.
func (c *Cluster) markSyncStandbys() {
	p := c.PrimaryHost()
	for i := range c.Hosts {
		h := &c.Hosts[i]
		h.Sync = false
		if p == nil || h.Role != RoleReplica || h.AppName == "" {
			continue
		}
		for _, name := range p.SyncStandbys {
			if name == h.AppName {
				h.Sync = true
			}
		}
	}
}

// identity returns the system identifier most live hosts share; on a tie,
// the one that comes first in configured order.
func (c *Cluster) identity(live []bool) uint64 {
	var best uint64
	bestN := 0
	for i := range c.Hosts {
		if !live[i] {
			continue
		}
		id, n := c.Hosts[i].SystemID, 0
		for j := range c.Hosts {
			if live[j] && c.Hosts[j].SystemID == id {
				n++
			}
		}
		if n > bestN {
			best, bestN = id, n
		}
	}
	return best
}
