package zone

import (
	"net/netip"
	"strconv"
)

// senderIndex finds a replica's own WAL sender among a primary's
// pg_stat_replication rows, strictly: the join markSyncStandbys makes for
// "replicas: async" (which leans to yes), made to prove. It is built
// lazily, once per question asked of a cluster in Decide, so that a
// cluster of a thousand hosts costs maps of its keys rather than n²
// comparisons.
type senderIndex struct {
	c     *Cluster
	p     *Host // the primary; nil when there is none
	built bool
	// By key kind (senderKeys): the Seen hosts of the cluster and the
	// rows of p holding each non-empty value.
	hosts [numSenderKeys]map[string][]int
	rows  [numSenderKeys]map[string][]int
}

// The keys that tie a replica to a WAL sender, most exact first.
const (
	keySlot    = iota // the replication slot it streams from
	keyAppName        // its WAL receiver's application name
	keyAddr           // its address, the row's client_addr
	numSenderKeys
)

var senderKeyNames = [numSenderKeys]string{keySlot: "slot", keyAppName: "application name", keyAddr: "address"}

func (c *Cluster) senderIndex(p *Host) *senderIndex { return &senderIndex{c: c, p: p} }

func addrKey(a netip.Addr) string {
	if a.IsValid() {
		return a.String()
	}
	return ""
}

func hostKey(h *Host, k int) string {
	switch k {
	case keySlot:
		return h.SlotName
	case keyAppName:
		return h.AppName
	}
	return addrKey(h.IP)
}

func rowKey(r *Standby, k int) string {
	switch k {
	case keySlot:
		return r.Slot
	case keyAppName:
		return r.AppName
	}
	return addrKey(r.Addr)
}

func (x *senderIndex) build() {
	x.built = true
	for k := range numSenderKeys {
		x.hosts[k], x.rows[k] = map[string][]int{}, map[string][]int{}
		for i := range x.c.Hosts {
			if h := &x.c.Hosts[i]; h.Seen {
				if v := hostKey(h, k); v != "" {
					x.hosts[k][v] = append(x.hosts[k][v], i)
				}
			}
		}
		for i := range x.p.Standbys {
			if v := rowKey(&x.p.Standbys[i], k); v != "" {
				x.rows[k][v] = append(x.rows[k][v], i)
			}
		}
	}
}

// why says why replica h cannot be proven to stream from the primary, or
// returns "" when exactly one of its WAL senders is h's (own).
func (x *senderIndex) why(h *Host) string {
	_, why := x.own(h)
	return why
}

// own returns the index in the primary's Standbys of replica h's own WAL
// sender, or -1 and why none is proven: the row on its slot when it has
// one (its receiver streams from no other), else the one with its
// application name when known, else the one from its address (the row's
// client_addr); each only when no other host of the cluster has the same
// name or address (two replicas sharing one cannot be told apart, and one
// may be the orphan of a failover) and exactly one row has it (a key that
// picks several rows proves nothing).
func (x *senderIndex) own(h *Host) (int, string) {
	if x.p == nil {
		return -1, "no primary"
	}
	if !x.built {
		x.build()
	}
	first := ""
	for k := range numSenderKeys {
		if k == keyAddr && x.p.StatsHidden {
			break // every row's client_addr reads NULL
		}
		name := hostKey(h, k)
		if name == "" {
			continue
		}
		shared := ""
		same := x.hosts[k][name]
		for j := len(same) - 1; j >= 0; j-- {
			if o := &x.c.Hosts[same[j]]; o != h {
				shared = o.Addr
				break
			}
		}
		rows := x.rows[k][name]
		what := senderKeyNames[k]
		why := ""
		switch {
		case shared != "":
			why = "its " + what + " " + strconv.Quote(name) + " is also " + shared + "'s, so the primary's WAL sender on it may be either's"
		case len(rows) == 0:
			why = "the primary has no WAL sender with its " + what + " " + strconv.Quote(name)
		case len(rows) > 1:
			why = "the primary has " + strconv.Itoa(len(rows)) + " WAL senders with its " + what + " " + strconv.Quote(name)
		default:
			return rows[0], ""
		}
		if k == keySlot {
			return -1, why // its receiver streams from this slot and no other
		}
		if first == "" {
			first = why
		}
	}
	if first != "" {
		return -1, first
	}
	if h.StatsHidden {
		return -1, "it streams from no replication slot (primary_slot_name is empty) and its application name is hidden"
	}
	return -1, "it streams from no replication slot and has no application name or address"
}
