package zone

import (
	"cmp"
	"net/netip"
	"slices"
)

// Network maps one client network to the location its clients are in.
type Network struct {
	Prefix   netip.Prefix
	Location string
}

// Networks finds a client's location from its address: dns.locations. The
// most specific network that contains the address wins, so a /24 carved out
// of a /16 belongs to its own location. It is immutable once built.
type Networks struct {
	nets  []Network // longest prefix first, so that the first match is the most specific
	names []string  // every location named, sorted, without repeats
}

// NewNetworks returns the table of nets. Prefixes are masked and IPv4 ones
// kept as IPv4 (an IPv4-mapped IPv6 prefix is not unmapped: write IPv4
// networks as IPv4). The caller rejects a prefix given twice; here the
// first one listed would win.
func NewNetworks(nets []Network) *Networks {
	n := &Networks{}
	for _, nw := range nets {
		n.nets = append(n.nets, Network{Prefix: nw.Prefix.Masked(), Location: nw.Location})
		n.names = append(n.names, nw.Location)
	}
	slices.SortStableFunc(n.nets, func(a, b Network) int { return cmp.Compare(b.Prefix.Bits(), a.Prefix.Bits()) })
	slices.Sort(n.names)
	n.names = slices.Compact(n.names)
	return n
}

// Locate returns the location of a client at ip, "" when no network
// contains it. An IPv4-mapped IPv6 address is taken as the IPv4 address it
// carries (a dual-stack socket reports IPv4 clients that way).
func (n *Networks) Locate(ip netip.Addr) string {
	if n == nil || !ip.IsValid() {
		return ""
	}
	ip = ip.Unmap().WithZone("")
	for _, nw := range n.nets {
		if nw.Prefix.Contains(ip) {
			return nw.Location
		}
	}
	return ""
}

// LocateSubnet returns the location of the clients of subnet p, as an
// EDNS Client Subnet option names them, and the prefix length the answer
// holds for (the option's scope). The location is that of the most
// specific network holding all of p ("" when none does): p's first
// address alone could fall in a network carved out of it. The scope is
// p's length, or longer when a network inside p would locate some of its
// clients elsewhere (RFC 7871 7.2.1: the subnet was not specific enough),
// so that a cache does not hand the answer to those clients.
func (n *Networks) LocateSubnet(p netip.Prefix) (location string, scope int) {
	if !p.IsValid() {
		return "", 0
	}
	p = p.Masked()
	scope = p.Bits()
	if n == nil {
		return "", scope
	}
	found := false
	for _, nw := range n.nets { // longest first
		switch {
		case nw.Prefix.Bits() > p.Bits():
			if p.Contains(nw.Prefix.Addr()) {
				scope = max(scope, nw.Prefix.Bits())
			}
		case !found && nw.Prefix.Contains(p.Addr()):
			location, found = nw.Location, true
		}
	}
	return location, scope
}

// Names returns the locations the networks name, sorted. The caller must
// not modify the slice.
func (n *Networks) Names() []string {
	if n == nil {
		return nil
	}
	return n.names
}

// Locate returns the location of a client at ip by the snapshot's
// networks, "" when unknown.
func (s *Snapshot) Locate(ip netip.Addr) string { return s.Networks.Locate(ip) }

// KnownLocation reports whether name is a location pgdns knows: one that
// dns.locations names, or the location of a host of any cluster (from the
// configuration or Patroni's tags). A dc- filter naming any other is as
// unknown as a cluster no one configured.
func (s *Snapshot) KnownLocation(name string) bool {
	if _, ok := slices.BinarySearch(s.Networks.Names(), name); ok {
		return true
	}
	for _, c := range s.Clusters {
		for i := range c.Hosts {
			if c.Hosts[i].Location == name {
				return true
			}
		}
	}
	return false
}

// Locality says where an answer sent a client that asked a replica name:
// to a host in its own location or not. It is what the metrics count.
type Locality uint8

// Localities of an answer.
const (
	Unlocated Locality = iota // the client's location is not known (no network contains it)
	Local                     // the first host answered is in the client's location
	Remote                    // the first host answered is elsewhere
)

// String returns the name the metrics use.
func (l Locality) String() string {
	switch l {
	case Local:
		return "local"
	case Remote:
		return "remote"
	}
	return "unlocated"
}

// LocalityOf says where hosts, an answer in order, send a client in
// location from: libpq connects to the first address that accepts.
func LocalityOf(from string, hosts []*Host) Locality {
	switch {
	case from == "":
		return Unlocated
	case len(hosts) > 0 && hosts[0].Location == from:
		return Local
	}
	return Remote
}
