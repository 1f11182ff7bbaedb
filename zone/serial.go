package zone

import (
	"net/netip"
	"time"
)

// The SOA serial is a change signal: it moves when what a role name of a
// cluster answers changes (the primary, the live replicas, the hosts that
// are down), never on lag movements, so that a client polling the SOA
// (PgBouncer's dns_zone_check_period) re-resolves exactly when it is worth
// it. It comes from the wall clock of the change, bumped past the previous
// serial: it only grows, and instances watching the same clusters give
// close values. A burst of changes runs it ahead of the clock; with
// state.path a restart starts after the serial the stopped run last gave
// (probe's followSerials), without it from the clock, which may be lower.

// StampSerials sets the Serial of every cluster of s, built after prev
// (nil for the first snapshot): carried over from the cluster of the same
// name in prev when its role answer is the same, the next serial when it
// changed. While s is not ready, serials are carried over; the first ready
// snapshot after one that was not counts as a change.
//
// A cluster s shares with prev (the same *Cluster: the builder kept one
// that nothing changed, immutable since prev was published) keeps its
// serial untouched.
func (s *Snapshot) StampSerials(prev *Snapshot) {
	if changed, ok := s.ChangedSince(prev); ok {
		for _, i := range changed {
			s.stampSerial(prev, i)
		}
		return
	}
	for i, c := range s.Clusters {
		if prev != nil && i < len(prev.Clusters) && prev.Clusters[i] == c {
			continue // shared: its serial is the one it has (no names compared)
		}
		s.stampSerial(prev, i)
	}
}

// stampSerial is StampSerials of cluster i of s.
func (s *Snapshot) stampSerial(prev *Snapshot, i int) {
	c := s.Clusters[i]
	var old *Cluster
	if prev != nil {
		old = prev.ClusterNear(i, c.Name)
	}
	switch {
	case old == c:
	case old == nil:
		c.Serial = uint32(s.Built.Unix())
	case !s.Ready:
		c.Serial = old.Serial
	case !prev.Ready || !SameRoleAnswer(old, c):
		c.Serial = NextSerial(old.Serial, s.Built)
	default:
		c.Serial = old.Serial
	}
}

// Serial is the SOA serial of the zone apex: the highest of the clusters',
// so that it moves when any of them does. 0 when there is no cluster.
func (s *Snapshot) Serial() uint32 {
	var max uint32
	found := false
	for _, c := range s.Clusters {
		if c != nil && (!found || SerialLess(max, c.Serial)) {
			max, found = c.Serial, true
		}
	}
	return max
}

// ClusterNear is clusterNamed, looking first at index i: where the
// cluster is in a snapshot of the same configuration, which makes
// comparing two snapshots cluster by cluster O(clusters) instead of
// O(clusters²) (a thousand clusters, published several times a second).
func (s *Snapshot) ClusterNear(i int, name string) *Cluster {
	if i >= 0 && i < len(s.Clusters) && s.Clusters[i] != nil && s.Clusters[i].Name == name {
		return s.Clusters[i]
	}
	return s.clusterNamed(name)
}

func (s *Snapshot) clusterNamed(name string) *Cluster {
	for _, c := range s.Clusters {
		if c != nil && c.Name == name {
			return c
		}
	}
	return nil
}

// NextSerial returns the serial that follows prev for a change at time
// now: the Unix time of now, or prev+1 when that is not greater (several
// changes in one second, or a clock that stepped back).
func NextSerial(prev uint32, now time.Time) uint32 {
	clock := uint32(now.Unix())
	if SerialLess(prev, clock) {
		return clock
	}
	return prev + 1
}

// SerialLess reports whether serial a is before b in RFC 1982 arithmetic.
func SerialLess(a, b uint32) bool {
	return a != b && int32(b-a) > 0
}

// SameRoleAnswer reports whether a and b, the same cluster at two moments,
// give the same role answers: the same primary (refusing writes or not:
// primary answers it only when it does not), the same replicas that
// replica names may answer (drained, offline and synchronous ones told
// apart), the same hosts down, each at the same address.
// Lag, replay positions and notes do not count.
func SameRoleAnswer(a, b *Cluster) bool {
	if a == b {
		return true // one cluster shared by two snapshots
	}
	if len(a.Hosts) != len(b.Hosts) {
		return false
	}
	aligned := true
	for i := range a.Hosts {
		if a.Hosts[i].Addr != b.Hosts[i].Addr {
			aligned = false
			break
		}
	}
	if aligned { // the usual case: the same host list, in the same order
		for i := range a.Hosts {
			if a.answerState(&a.Hosts[i]) != b.answerState(&b.Hosts[i]) {
				return false
			}
		}
		return true
	}
	states := make(map[string]answerState, len(a.Hosts))
	for i := range a.Hosts {
		states[a.Hosts[i].Addr] = a.answerState(&a.Hosts[i])
	}
	for i := range b.Hosts {
		st, ok := states[b.Hosts[i].Addr]
		if !ok || st != b.answerState(&b.Hosts[i]) {
			return false
		}
	}
	return true
}

// answerState is what a host contributes to its cluster's role answers.
type answerState struct {
	role    Role
	hidden  bool // a synchronous standby left out of replica answers
	drained bool // a replica that no replica name answers
	offline bool // a replica that only offline answers
	sync    bool // a replica the sync filter passes
	refuses bool // a primary that refuses writes, which primary does not answer
	ip      netip.Addr
}

func (c *Cluster) answerState(h *Host) answerState {
	r := h.Role == RoleReplica
	return answerState{role: h.Role, hidden: r && c.AsyncOnly && h.Sync,
		drained: r && h.Drained, offline: r && h.Offline, sync: r && h.SyncProven,
		refuses: h.Role == RolePrimary && h.ReadOnly, ip: h.IP}
}
