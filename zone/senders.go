package zone

import (
	"net/netip"
	"strconv"
	"strings"
)

// senderIndex finds a replica's own WAL sender among a primary's
// pg_stat_replication rows, strictly: both the sync filter and
// "replicas: async" (markSyncStandbys) and the branch rules rest on it,
// and whatever it cannot prove is unknown to each of them. It is built
// lazily, once per question asked of a cluster in Decide, so that a
// cluster of a thousand hosts costs maps of its keys rather than n²
// comparisons.
type senderIndex struct {
	c     *Cluster
	p     *Host // the primary; nil when there is none
	built bool
	// By key kind (keySlot, keyAppName): the Seen hosts of the cluster and
	// the rows of p holding each non-empty value.
	hosts [numSenderKeys]map[string][]int
	rows  [numSenderKeys]map[string][]int
}

// The keys that tie a replica to a WAL sender, most exact first. Not its
// address: a row's client_addr is where the connection comes from, which
// NAT, a Kubernetes Service, a replication network or a second interface
// make another address than the replica's, and any other client of the
// replication protocol on its machine (pg_receivewal, a backup tool) is a
// row from the same address.
const (
	keySlot    = iota // the replication slot it streams from
	keyAppName        // its WAL receiver's application name
	numSenderKeys
)

var senderKeyNames = [numSenderKeys]string{keySlot: "slot", keyAppName: "application name"}

func (c *Cluster) senderIndex(p *Host) *senderIndex { return &senderIndex{c: c, p: p} }

func hostKey(h *Host, k int) string {
	if k == keySlot {
		return h.SlotName
	}
	return h.AppName
}

func rowKey(r *Standby, k int) string {
	if k == keySlot {
		return r.Slot
	}
	return r.AppName
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
			if r := &x.p.Standbys[i]; !walClientOnly(r) {
				if v := rowKey(r, k); v != "" {
					x.rows[k][v] = append(x.rows[k][v], i)
				}
			}
		}
	}
}

// walClientOnly reports whether row r bears the application name that
// PostgreSQL's own WAL clients that are no standby give themselves
// (pg_receivewal, pg_basebackup -X stream): no standby's own row. Where
// the probe role may read the senders' statistics such a client reports
// no apply position and its row has no names already (the probe's
// standbysSQL); without pg_read_all_stats nothing else tells it from a
// standby, and pg_receivewal -S or pg_basebackup -S on a standby's slot
// name on a new primary was the row that proved the orphan of a failover
// its follower (review 13a). Renamed (application_name in its connection
// string, PGAPPNAME) such a client is not told apart; so, with the
// primary's statistics hidden, no row proves a replica whose timeline is
// hidden at all (setAsideUnproven, decisions.md rule 1), and only the
// branch rule (setAsideUnprovenBranch) still reads such rows by slot.
func walClientOnly(r *Standby) bool {
	return r.AppName == "pg_receivewal" || r.AppName == "pg_basebackup"
}

// why says why replica h cannot be proven to stream from the primary, or
// returns "" when exactly one of its WAL senders is h's (own).
func (x *senderIndex) why(h *Host) string {
	_, why := x.own(h)
	return why
}

// own returns the index in the primary's Standbys of replica h's own WAL
// sender, or -1 and why none is proven. First, where its replication
// statistics are readable, its WAL receiver must be streaming, from the
// primary: sender_host and sender_port of pg_stat_wal_receiver are the
// primary's configured host (or its address) and port. A replica with no
// receiver, or one that cascades from another standby, has no row of its
// own on the primary, whatever row happens to share its name. Then
// exactly one row must be its own: the row on its slot when it has one
// (its receiver streams from no other), else the one with its
// application name; each only when no other host of the cluster has the
// same slot or name (two replicas sharing one cannot be told apart, and
// one may be the orphan of a failover) and exactly one row has it (a key
// that picks several rows proves nothing). Without pg_read_all_stats the
// receiver and its conninfo are hidden: the slot alone may prove it, and
// only while the primary's rows are readable (the rules of hidden.go).
// With the primary's rows hidden none proves anything, whatever the
// replica shows: every column but the pid reads NULL, so the row on its
// slot may be pg_receivewal's or pg_basebackup's, whose NULL apply
// position is what tells them from a standby, and a receiver shown
// streaming from the primary's host and port may reach another server
// there (a replication network, NAT, hostaddr). Before, the branch rule
// took such a row as proof, and a replica streaming from another branch
// of the primary's timeline under the primary's host name, with
// pg_receivewal on its slot of the primary, was answered without the
// primary's writes (test/hiddenprimary_branchslot_e2e_test.go).
func (x *senderIndex) own(h *Host) (int, string) {
	if x.p == nil {
		return -1, "no primary"
	}
	if !h.StatsHidden {
		if why := streamsFrom(h, x.p); why != "" {
			return -1, why
		}
	}
	return x.ownRow(h)
}

// ownRow is own without its first half, the receiver's: the index of the
// one row of the primary's that is replica h's by its slot or application
// name, or -1 and why none is. setAsideUnprovenWithoutPrimary asks it of
// a down writer's last sample, whose replicas' receivers have lost it.
func (x *senderIndex) ownRow(h *Host) (int, string) {
	if x.p == nil {
		return -1, "no primary"
	}
	if x.p.StatsHidden {
		return -1, hiddenRowsWhy
	}
	if !x.built {
		x.build()
	}
	first := ""
	for k := range numSenderKeys {
		name := hostKey(h, k)
		if name == "" {
			if k == keyAppName && h.AppNameWhy != "" && first == "" {
				first = h.AppNameWhy
			}
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
	return -1, "it streams from no replication slot and has no application name"
}

// streamsFrom says why replica h's WAL receiver is not shown streaming
// from primary p, or returns "" when it is: status streaming, connected to
// p's configured host name or address (compared without case: a host
// name) or to p's IP, on p's port. A receiver connected through a proxy
// or under another name of the primary is not proven to stream from it.
func streamsFrom(h, p *Host) string {
	switch {
	case h.Receiver == "":
		return "it has no WAL receiver"
	case h.Receiver != "streaming":
		return "its WAL receiver is " + strconv.Quote(h.Receiver) + ", not streaming"
	}
	if !receivesFrom(h, p) {
		return "its WAL receiver streams from " + senderAddr(h) + ", not from the primary " + p.Addr
	}
	return ""
}

// ReceivesFrom reports whether replica h's WAL receiver is connected to
// host o, as receivesFrom: whether o is the upstream h would receive WAL
// from (the probe takes a cascade's branch from it).
func (h *Host) ReceivesFrom(o *Host) bool { return receivesFrom(h, o) }

// receivesFrom reports whether replica h's WAL receiver is connected to
// host o: to o's configured host name or address (compared without case:
// a host name) or to o's IP, on o's port.
func receivesFrom(h, o *Host) bool {
	host, port, err := ParseHostPort(o.Addr)
	if err != nil {
		host, port = "", o.Port
	}
	sameHost := host != "" && strings.EqualFold(h.SenderHost, host)
	if ip, perr := netip.ParseAddr(h.SenderHost); perr == nil && o.IP.IsValid() && ip.Unmap() == o.IP.Unmap() {
		sameHost = true
	}
	return sameHost && h.SenderPort == int(port)
}

// senderAddr is where replica h's WAL receiver is connected, host:port.
func senderAddr(h *Host) string {
	if strings.Contains(h.SenderHost, ":") {
		return "[" + h.SenderHost + "]:" + strconv.Itoa(h.SenderPort)
	}
	return h.SenderHost + ":" + strconv.Itoa(h.SenderPort)
}

// cascadesFrom returns the host of c, other than replica h, that h's WAL
// receiver streams from when that host is a standby: seen in recovery by
// its last probe and not down (review 5, F8). nil when h's receiver is not
// shown streaming (StatsHidden, no receiver) or streams from no such
// host. PostgreSQL makes only the primary's own WAL senders synchronous
// (SyncRepWaitForLSN waits on the primary alone; a standby's walsenders
// never are), so such a replica is provably not a synchronous standby,
// whatever synchronous_standby_names says.
func (c *Cluster) cascadesFrom(h *Host) *Host {
	if h.StatsHidden || h.Receiver != "streaming" {
		return nil
	}
	for i := range c.Hosts {
		o := &c.Hosts[i]
		if o != h && o.Seen && o.InRecovery && o.Role != RoleDown && receivesFrom(h, o) {
			return o
		}
	}
	return nil
}
