package zone

import "strconv"

// ChangeReason says what a Change is. Its words are the `reason` of GET
// /v1/events (internal/events): stable, for scripts.
type ChangeReason string

// The changes Changes finds between two published snapshots.
const (
	HostDown           ChangeReason = "host_down"           // a host left the answers: its probes failed (Class says how) or it has had no good probe for too long
	HostUp             ChangeReason = "host_up"             // a host that was down answers its probes again
	PrimaryAppeared    ChangeReason = "primary_appeared"    // a cluster without a primary has one
	PrimaryMoved       ChangeReason = "primary_moved"       // another host is the primary (From, To)
	PrimaryVanished    ChangeReason = "primary_vanished"    // a cluster has no primary any more (Detail says why)
	SplitBrainBegan    ChangeReason = "split_brain_began"   // two writable hosts on the newest timeline: no primary answered
	SplitBrainEnded    ChangeReason = "split_brain_ended"   // the split brain is resolved
	TimelineSuperseded ChangeReason = "timeline_superseded" // the cluster's newest timeline grew (From, To): hosts on the old one are set aside
	IdentitySettled    ChangeReason = "identity_settled"    // the cluster's system identifier is established, or replaced (From, To)
	DrainBegan         ChangeReason = "drain_began"         // a host is drained (To: where from, DrainSource)
	DrainEnded         ChangeReason = "drain_ended"         // a drained host is not any more (From: where it came from)
	OfflineBegan       ChangeReason = "offline_began"       // a host is marked offline (pgdns.offline on): a replica so marked is answered only by the offline role
	OfflineEnded       ChangeReason = "offline_ended"       // an offline host is not any more (its mark is off, or it is drained, which wins)
	SyncBegan          ChangeReason = "sync_began"          // a replica is proven a synchronous standby: the sync filter passes it
	SyncEnded          ChangeReason = "sync_ended"          // a replica the sync filter passed no longer does (Detail: why, when it is still a replica)
	ReadOnlyBegan      ChangeReason = "read_only_began"     // the primary refuses writes (Host.ReadOnly): primary answers no host (Detail: why)
	ReadOnlyEnded      ChangeReason = "read_only_ended"     // a primary that refused writes accepts them, or is the primary no longer
)

// ClassStale is the Class of a HostDown whose host failed no probe but has
// had no successful one for longer than the snapshot's StaleAfter (a hung
// or cut-off server).
const ClassStale = "stale"

// Change is one thing that changed between two published snapshots.
type Change struct {
	Reason  ChangeReason
	Cluster string
	Host    string // "host:port" as configured; "" for a cluster's change
	Class   string // HostDown: the failure's class (Host.FailClass, or ClassStale)
	From    string // the value before, when the change has one
	To      string // the value after
	Detail  string // for people: the host's note or error
}

// Changes returns what changed from prev to next, two snapshots published
// one after the other, cluster by cluster in next's order: identity, hosts
// going down, split brain beginning, the primary (vanished, moved or
// appeared), the newest timeline, split brain ending, drains beginning or
// ending, offline marks beginning or ending, proven synchronous standbys
// beginning or ending, a primary refusing writes or no longer, hosts
// coming back. Each of these changes a role
// answer (and moves the SOA serial, serial.go).
// Clusters are matched by name and hosts by address, so a reload that
// adds, drops or reorders them is compared as it should be; a cluster or
// host that is new has no "before" (a new host that is down is reported).
// A prev that is nil or not ready counts as empty: the first ready
// snapshot reports the primaries that appeared, the hosts that are down or
// drained and the identities settled. A next that is not ready reports nothing.
func Changes(prev, next *Snapshot) []Change {
	if next == nil || !next.Ready {
		return nil
	}
	if prev != nil && !prev.Ready {
		prev = nil
	}
	var out []Change
	one := func(i int) {
		c := next.Clusters[i]
		var was *Cluster
		if prev != nil {
			was = prev.ClusterNear(i, c.Name)
		}
		if was == c {
			return // shared by the two snapshots: nothing changed
		}
		out = append(out, clusterChanges(was, c)...)
	}
	if changed, ok := next.ChangedSince(prev); ok {
		for _, i := range changed {
			one(i) // the rest are prev's
		}
		return out
	}
	for i := range next.Clusters {
		one(i)
	}
	return out
}

// clusterChanges compares one cluster; was is nil when it is new.
func clusterChanges(was, c *Cluster) []Change {
	var out []Change
	add := func(ch Change) {
		ch.Cluster = c.Name
		out = append(out, ch)
	}
	var wasIdentity uint64
	var wasSplit bool
	var wasPrimary string
	if was != nil {
		wasIdentity, wasSplit = was.Identity, was.SplitBrain
		if p := was.PrimaryHost(); p != nil {
			wasPrimary = p.Addr
		}
	}
	if c.Identity != 0 && c.Identity != wasIdentity {
		ch := Change{Reason: IdentitySettled, To: strconv.FormatUint(c.Identity, 10)}
		if wasIdentity != 0 {
			ch.From = strconv.FormatUint(wasIdentity, 10)
			ch.Detail = "the cluster's identity was replaced"
		}
		add(ch)
	}
	for i := range c.Hosts {
		h := &c.Hosts[i]
		old := was.HostNear(i, h.Addr)
		if h.Role == RoleDown && (old == nil || old.Role != RoleDown) {
			add(Change{Reason: HostDown, Host: h.Addr, Class: downClass(h), Detail: downDetail(h)})
		}
	}
	if c.SplitBrain && !wasSplit {
		add(Change{Reason: SplitBrainBegan, Detail: splitHosts(c)})
	}
	primary := ""
	if p := c.PrimaryHost(); p != nil {
		primary = p.Addr
	}
	switch {
	case primary == wasPrimary:
	case primary == "":
		add(Change{Reason: PrimaryVanished, Host: wasPrimary, From: wasPrimary, Detail: vanishedDetail(c, wasPrimary)})
	}
	if was != nil && was.NewestTimeline != 0 && c.NewestTimeline > was.NewestTimeline {
		add(Change{Reason: TimelineSuperseded, Host: primary,
			From: strconv.FormatUint(uint64(was.NewestTimeline), 10), To: strconv.FormatUint(uint64(c.NewestTimeline), 10)})
	}
	switch {
	case primary == wasPrimary || primary == "":
	case wasPrimary == "":
		add(Change{Reason: PrimaryAppeared, Host: primary, To: primary})
	default:
		add(Change{Reason: PrimaryMoved, Host: primary, From: wasPrimary, To: primary})
	}
	if !c.SplitBrain && wasSplit {
		add(Change{Reason: SplitBrainEnded})
	}
	for i := range c.Hosts {
		h := &c.Hosts[i]
		old := was.HostNear(i, h.Addr)
		switch {
		case h.Drained && (old == nil || !old.Drained):
			add(Change{Reason: DrainBegan, Host: h.Addr, To: h.DrainedBy.String()})
		case !h.Drained && old != nil && old.Drained:
			add(Change{Reason: DrainEnded, Host: h.Addr, From: old.DrainedBy.String()})
		}
	}
	for i := range c.Hosts {
		// Offline, as Drained, is the mark the host last showed: a down
		// host keeps it, so going down or coming back is no offline change.
		h := &c.Hosts[i]
		old := was.HostNear(i, h.Addr)
		switch {
		case h.Offline && (old == nil || !old.Offline):
			add(Change{Reason: OfflineBegan, Host: h.Addr})
		case !h.Offline && old != nil && old.Offline:
			add(Change{Reason: OfflineEnded, Host: h.Addr})
		}
	}
	for i := range c.Hosts {
		// Sync is evidence, not a mark: what the sync filter passes
		// (answerState's sync), so a proven standby that goes down or
		// loses its primary ends it too.
		h := &c.Hosts[i]
		old := was.HostNear(i, h.Addr)
		now, before := provenReplica(h), old != nil && provenReplica(old)
		switch {
		case now && !before:
			add(Change{Reason: SyncBegan, Host: h.Addr})
		case !now && before:
			ch := Change{Reason: SyncEnded, Host: h.Addr}
			if h.Role == RoleReplica {
				ch.Detail = h.SyncWhy
			}
			add(ch)
		}
	}
	for i := range c.Hosts {
		h := &c.Hosts[i]
		old := was.HostNear(i, h.Addr)
		now, before := refusesWrites(h), old != nil && refusesWrites(old)
		switch {
		case now && !before:
			add(Change{Reason: ReadOnlyBegan, Host: h.Addr, Detail: h.Note})
		case !now && before:
			add(Change{Reason: ReadOnlyEnded, Host: h.Addr})
		}
	}
	for i := range c.Hosts {
		h := &c.Hosts[i]
		if old := was.HostNear(i, h.Addr); old != nil && old.Role == RoleDown && h.Role != RoleDown {
			add(Change{Reason: HostUp, Host: h.Addr, To: h.Role.String(), Detail: h.Note})
		}
	}
	return out
}

// refusesWrites: h is the primary, and refuses writes.
func refusesWrites(h *Host) bool { return h.Role == RolePrimary && h.ReadOnly }

// provenReplica: h is a replica the sync filter passes.
func provenReplica(h *Host) bool { return h.Role == RoleReplica && h.SyncProven }

// downClass is the class of what took h down.
func downClass(h *Host) string {
	if h.Fails == 0 || h.FailClass == "" {
		return ClassStale
	}
	return h.FailClass
}

func downDetail(h *Host) string {
	if h.LastError != "" {
		return h.LastError
	}
	return h.Note
}

// vanishedDetail says why c has no primary since the one at addr.
func vanishedDetail(c *Cluster, addr string) string {
	if c.SplitBrain {
		return "split brain: " + splitHosts(c)
	}
	h := c.Host(addr)
	switch {
	case h == nil:
		return "no longer configured"
	case h.Role == RoleDown:
		return "the primary is down"
	case h.Note != "":
		return h.Note
	case h.Role == RoleReplica:
		return "the primary is in recovery"
	}
	return "no host is the primary"
}

// splitHosts lists the writable hosts set aside by a split brain (not
// the replicas set aside with them).
func splitHosts(c *Cluster) string {
	s := ""
	for i := range c.Hosts {
		if h := &c.Hosts[i]; h.Aside == AsideSplitBrain && !h.InRecovery {
			if s != "" {
				s += ","
			}
			s += c.Hosts[i].Addr
		}
	}
	return s
}
