package dnsserver

import "github.com/pgdns/pgdns/zone"

// Asked is what a query asked, as answers are counted (Config.OnAnswer):
// a role, a name of the zone's own, or why the query was not looked up.
type Asked uint8

// What a query can ask. String gives each its metric label.
const (
	AskedMalformed  Asked = iota // not one well-formed standard query
	AskedOutside                 // a name outside the zone, or a class other than IN and ANY
	AskedTransfer                // AXFR or IXFR
	AskedInvalid                 // a name of the zone outside the grammar, or <label>.<zone> of no cluster
	AskedApex                    // the zone apex
	AskedNameServer              // a name server's own name
	AskedCluster                 // <cluster>.<zone>
	// Role names, one per zone.Target, in its order.
	AskedPrimary
	AskedReplica
	AskedPreferReplica
	AskedAny
	AskedOffline
	AskedHost // a host's own name, <label>.host.<cluster>.<zone>

	NumAsked = int(AskedHost) + 1 // how many values Asked has, for tables indexed by it
)

var askedNames = [NumAsked]string{
	AskedMalformed:     "malformed",
	AskedOutside:       "outside",
	AskedTransfer:      "transfer",
	AskedInvalid:       "invalid",
	AskedApex:          "apex",
	AskedNameServer:    "ns",
	AskedCluster:       "cluster",
	AskedPrimary:       zone.TargetPrimary.String(),
	AskedReplica:       zone.TargetReplica.String(),
	AskedPreferReplica: zone.TargetPreferReplica.String(),
	AskedAny:           zone.TargetAny.String(),
	AskedOffline:       zone.TargetOffline.String(),
	AskedHost:          zone.HostLabel,
}

// String returns the label answers to a's queries are counted under.
func (a Asked) String() string {
	if int(a) < NumAsked {
		return askedNames[a]
	}
	return "unknown"
}

// askedRole is what a role name of target t asks.
func askedRole(t zone.Target) Asked {
	return AskedPrimary + Asked(t-zone.TargetPrimary)
}
