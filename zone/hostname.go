package zone

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// Which hosts a host name answers. A host name is a name for the machine,
// not a routing decision (names.go), but it is also what SRV targets and
// certificates name, so it must never give the address of a server that
// is not one of the cluster's: the trust rule "a host whose system
// identifier is not the cluster's established one is never answered"
// holds for it too (review S2: a foreign initdb in hosts answered A and
// SRV under its host name). "Established" asks for evidence, so a host
// name answers its host's address only once pgdns has probed the host
// successfully and its system identifier is the cluster's established one
// (settleIdentity, or clusters.<name>.system_identifier). From then on it
// answers whatever the host's role or health: a host that goes down, or is
// set aside for its timeline, keeps its name, since it is still the
// cluster's machine; a host later found with another identifier (the
// address given to another server) loses it.

// HostNamedAnswer returns the host q (KindHostName) names, as HostNamed,
// and why its name answers no address (HostNameWhy): "", "" when it
// answers, else a code for TXT and a sentence for people. Before the first ready
// snapshot it is ErrNotReady, as every other name (SERVFAIL), even for a
// cluster the configuration names.
func (s *Snapshot) HostNamedAnswer(q *Query) (h *Host, code, why string, err error) {
	if !s.Ready {
		return nil, "", "", ErrNotReady
	}
	h, err = s.HostNamed(q)
	if err != nil {
		return nil, "", "", err
	}
	code, why = s.clusterNamed(q.Cluster).HostNameWhy(h)
	return h, code, why, nil
}

// The codes HostNameWhy gives, as the TXT of a host name writes them
// (unanswered=<code>).
const (
	HostNameUnprobed  = "unprobed"  // no probe of the host has succeeded yet
	HostNameUnsettled = "unsettled" // the cluster's system identifier is not established yet
	HostNameForeign   = "foreign"   // the host's system identifier is not the cluster's
)

// HostNameWhy says why h's host name answers no address: a code
// (HostNameUnprobed, HostNameUnsettled, HostNameForeign) and a sentence;
// "", "" when it answers.
func (c *Cluster) HostNameWhy(h *Host) (code, why string) {
	switch {
	case !h.Seen:
		return HostNameUnprobed, "no probe of this host has succeeded yet: a host name answers only a server proven to be its cluster's"
	case c.Identity == 0:
		return HostNameUnsettled, "the cluster's system identifier is not established yet: a host name answers only a server proven to be its cluster's"
	case h.SystemID != c.Identity:
		return HostNameForeign, "system identifier " + strconv.FormatUint(h.SystemID, 10) + " is not the cluster's " +
			strconv.FormatUint(c.Identity, 10) + ": a host name never answers another cluster's server"
	}
	return "", ""
}

// MaxNameOctets is the longest domain name DNS carries, in octets on the
// wire (RFC 1035 2.3.4): a longer name is a malformed message.
const MaxNameOctets = 255

// MaxDerivedLabel is the longest label DerivedLabel gives: an IPv6
// address in full (8 groups of up to 4 hex digits and 7 '-') and '-' and a
// port of 5 digits.
const MaxDerivedLabel = 8*4 + 7 + 1 + 5

// HostNameOctets is the wire length of the host name of label in cluster
// under zoneName (without its trailing dot): each label's length octet
// and bytes, and the root's zero octet.
func HostNameOctets(label, cluster, zoneName string) int {
	name := HostName(label, cluster)
	if z := strings.TrimSuffix(zoneName, "."); z != "" {
		name += "." + z
	}
	return len(name) + 2
}

// LabelRoom is how long a host label of cluster under zoneName may be for
// its host name to fit MaxNameOctets (at most 63, a label's limit; below 1
// when even a one-octet label does not fit).
func LabelRoom(cluster, zoneName string) int {
	return min(63, MaxNameOctets-HostNameOctets("", cluster, zoneName))
}

// FitHostLabel returns label, shortened when the host name it gives in
// cluster under zoneName would be longer than DNS allows (review S9: every
// SRV answer naming such a host was a malformed packet): cut and ended by
// '-' and 8 hex digits of a hash of label, as SanitizeLabel does past 63
// octets, so that two long names stay apart. The configuration refuses
// names it can (config); this is for a Patroni member's. "" when the
// cluster and zone leave no room for a hashed label.
func FitHostLabel(label, cluster, zoneName string) string {
	room := LabelRoom(cluster, zoneName)
	if len(label) <= room {
		return label
	}
	if room < 10 {
		return ""
	}
	h := fnv.New32a()
	h.Write([]byte(label))
	return strings.TrimRight(label[:room-9], "-") + "-" + fmt.Sprintf("%08x", h.Sum32())
}
