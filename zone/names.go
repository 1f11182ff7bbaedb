package zone

import (
	"fmt"
	"hash/fnv"
	"net/netip"
	"strconv"
	"strings"
)

// Host names. Every host of a cluster has a name of its own in the zone,
//
//	<label>.host.<cluster>.<zone>      e.g. pg-1.host.main.db.local
//
// answering that host's address whatever its role or health: a name for
// the machine, not a routing decision, so that SRV targets resolve and a
// server certificate can carry it (sslmode=verify-full). The fixed label
// "host" sits where a role word sits in the grammar, and no role, alias or
// filter is "host", so no role name is ever read as a host name nor the
// other way round; the cluster is always written, so that the name of a
// host does not change when dns.default_cluster does.

// HostLabel is the fixed label between a host's label and its cluster.
const HostLabel = "host"

// HostName returns the name of the host labelled label in cluster, relative
// to the zone: "<label>.host.<cluster>".
func HostName(label, cluster string) string {
	return label + "." + HostLabel + "." + cluster
}

// ValidHostLabel reports whether label can label a host: 1 to 63
// lower-case letters, digits and '-', neither first nor last a '-' (an
// RFC 1123 host name label, which certificates and every resolver take).
func ValidHostLabel(label string) bool {
	if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
		return false
	}
	for i := 0; i < len(label); i++ {
		c := label[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// SanitizeLabel makes a host label out of s (a Patroni member name, an
// address): lower-cased, every run of other bytes than letters and digits
// one '-', no '-' first or last; longer than 63 bytes, cut to 54 and
// ended by '-' and 8 hex digits of a hash of s, so that two long names
// stay apart. "" when s has no letter or digit at all.
func SanitizeLabel(s string) string {
	b := make([]byte, 0, len(s))
	dash := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		default:
			dash = len(b) > 0
			continue
		}
		if dash {
			b = append(b, '-')
			dash = false
		}
		b = append(b, c)
	}
	if len(b) > 63 {
		h := fnv.New32a()
		h.Write([]byte(s))
		return strings.TrimRight(string(b[:54]), "-") + "-" + fmt.Sprintf("%08x", h.Sum32())
	}
	return string(b)
}

// DerivedLabel is the label of a host given none: its address and port,
// "127.0.0.11:5432" → "127-0-0-11-5432", "[::1]:5432" →
// "0-0-0-0-0-0-0-1-5432" (IPv6 written in full, so that "::" leaves no
// gap), "pg1.example.com:5432" → "pg1-example-com-5432". addr must be
// read by ParseHostPort.
func DerivedLabel(addr string) string {
	host, port, err := ParseHostPort(addr)
	if err != nil {
		return SanitizeLabel(addr)
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Is6() && !ip.Is4In6() {
		parts := strings.Split(ip.WithZone("").StringExpanded(), ":")
		for i, p := range parts {
			parts[i] = strings.TrimLeft(p, "0")
			if parts[i] == "" {
				parts[i] = "0"
			}
		}
		host = strings.Join(parts, "-")
	}
	return SanitizeLabel(host + "-" + strconv.Itoa(int(port)))
}

// AssignLabels gives each address of one cluster its label: given[addr]
// when set (the configuration's names, or the Patroni member name, already
// valid), else DerivedLabel. The configuration refuses two hosts with one
// label; a list only Patroni makes may still have them (two members of
// one name): a later host then gets its derived label, and failing that
// its derived label with "-2", "-3"... so that every host has a name and
// no name two hosts. renamed lists the addresses that did not get
// given[addr], for the log.
func AssignLabels(addrs []string, given map[string]string) (labels []string, renamed []string) {
	taken := make(map[string]bool, len(addrs))
	derived := make(map[string]int, len(addrs))
	for _, a := range addrs {
		derived[DerivedLabel(a)]++
	}
	labels = make([]string, len(addrs))
	for i, a := range addrs {
		want := given[a]
		own := DerivedLabel(a)
		if want == "" || !ValidHostLabel(want) {
			want = own
		} else if taken[want] || (want != own && (derived[want] > 0 || addressShaped(want))) {
			// A given name that is, or reads as, another host's derived
			// label would make that host's name answer this host: and
			// move back when the other host joins (review 4: a Patroni
			// member named 127-254-44-12-5432 at .13).
			renamed = append(renamed, a)
			want = own
		}
		label := want
		for n := 2; taken[label]; n++ {
			suffix := "-" + strconv.Itoa(n)
			label = strings.TrimRight(want[:min(len(want), 63-len(suffix))], "-") + suffix
		}
		taken[label] = true
		labels[i] = label
	}
	return labels, renamed
}

// addressShaped reports whether label reads as the derived label of an
// IP address and port (DerivedLabel): four IPv4 octets or eight IPv6
// groups, then a port, joined by "-".
func addressShaped(label string) bool {
	parts := strings.Split(label, "-")
	if len(parts) != 5 && len(parts) != 9 {
		return false
	}
	if port, err := strconv.Atoi(parts[len(parts)-1]); err != nil || port < 1 || port > 65535 {
		return false
	}
	sep := "."
	if len(parts) == 9 {
		sep = ":"
	}
	_, err := netip.ParseAddr(strings.Join(parts[:len(parts)-1], sep))
	return err == nil
}

// ClientPort is the port clients of a cluster use with its A and AAAA
// names: configured when set, else the port most of ports share (ties:
// the lowest). An address answer holds only hosts on it, since an A
// record carries no port: a client connecting to a host's address on
// another port than the host's would reach another server, or none.
func ClientPort(ports []uint16, configured uint16) uint16 {
	if configured != 0 {
		return configured
	}
	count := map[uint16]int{}
	var best uint16
	for _, p := range ports {
		count[p]++
		if n := count[p]; best == 0 || n > count[best] || (n == count[best] && p < best) {
			best = p
		}
	}
	return best
}

// Address is the address h's own name answers: the one pgdns last
// connected to, else, before any connection, the address h is configured
// with when that is an IP; invalid when neither is known (a DNS name never
// resolved: the host name answers no address yet). A configured
// IPv4-mapped IPv6 address (::ffff:10.0.0.11) is its IPv4 address, as the
// probe stores the address it connected to (unmapped): whether the host
// shares an address with another (Host.SharesIP) must not change with its
// first connection, that is with who is up.
func (h *Host) Address() netip.Addr {
	if h.IP.IsValid() {
		return h.IP
	}
	host, _, err := ParseHostPort(h.Addr)
	if err != nil {
		return netip.Addr{}
	}
	ip, _ := netip.ParseAddr(host)
	return ip.WithZone("").Unmap()
}
