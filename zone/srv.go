package zone

import (
	"cmp"
	"slices"
)

// SRV answers (RFC 2782). _postgresql._tcp.<name> answers the hosts of
// <name> with their ports and host names, in the shape the pgx, pgjdbc,
// npgsql and libpq proposals read: sorted by priority (SRVOrder; the
// weights are all equal). The selection is the A answer's (View.Select
// with Query.SRV), so an SRV record never names a host an address answer
// would not, but for its port; the priority says which hosts a client
// should try first.

// SRV priorities: lower is tried first.
const (
	PriorityFirst uint16 = 10 // the hosts a client should try first
	PriorityRest  uint16 = 20 // the others
)

// SRVWeight is the weight of every SRV record. All equal, and 0: RFC 2782
// gives 0 to records among which there is no server selection to do; the
// order already spreads clients (the replicas rotate from one answer to
// the next), and clients that honour weights keep it (Go's
// net.LookupSRV shuffles only when weights are above 0).
const SRVWeight uint16 = 0

// ClusterService returns the query _postgresql._tcp.<cluster>.<zone>
// answers, q being that name's KindCluster query: the cluster in the
// proposals' shape, its primary and every live replica, which is the any
// name's answer. Other queries are returned as they are.
func (q Query) ClusterService() Query {
	if q.Kind != KindCluster {
		return q
	}
	return Query{Kind: KindHosts, Target: TargetAny, Cluster: q.Cluster, From: q.From, SRV: true}
}

// SRVOrder returns hosts, the selection for q, in the order its SRV
// records are sent: by priority, lowest first, keeping the selection's
// order within a priority (the located replicas first, the rotation).
// RFC 2782 clients sort by priority themselves, but a client or a script
// that takes the first record must get one a client should try first
// (review S3: `any` from a located client sent 20, 10, 20). hosts is not
// changed.
func (q *Query) SRVOrder(hosts []*Host) []*Host {
	out := slices.Clone(hosts)
	slices.SortStableFunc(out, func(a, b *Host) int { return cmp.Compare(q.Priority(a), q.Priority(b)) })
	return out
}

// Priority is the SRV priority of host h in the answer to q:
// PriorityFirst for what a client should try first, PriorityRest for the
// others. For primary, the host (the primary, or one host name's host).
// For any and the cluster's own SRV name, the primary; the replicas
// after it. For replica and prefer-replica, the replicas in the client's
// location (q.From) when it is known; every host when it is not, or when
// prefer-replica falls back to the primary.
func (q *Query) Priority(h *Host) uint16 {
	switch {
	case q.Kind != KindHosts, q.Target == TargetPrimary, h.Role == RolePrimary && q.Target != TargetAny:
		return PriorityFirst
	case q.Target == TargetAny:
		if h.Role == RolePrimary {
			return PriorityFirst
		}
		return PriorityRest
	case q.From == "" || h.Location == q.From:
		return PriorityFirst
	}
	return PriorityRest
}
