package dnsserver

import (
	"net"
	"net/netip"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/zone"
)

// This file finds where the client of a query is: its source address, or
// the address in the query's EDNS Client Subnet option (RFC 7871) when the
// source is a forwarder the configuration trusts to tell (a forwarder
// otherwise hides every client behind its own address).

// sourceAddr returns the IP of a query's source; the zero Addr when the
// transport has none.
func sourceAddr(a net.Addr) netip.Addr {
	switch a := a.(type) {
	case *net.UDPAddr:
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip.Unmap()
	case *net.TCPAddr:
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip.Unmap()
	}
	return netip.Addr{}
}

// clientLocation returns the location of the client of req, which came
// from src, by snap's networks, and the ECS option to put in the reply when
// the answer was made for the subnet the option named (nil otherwise).
func (h *Handler) clientLocation(req *dns.Msg, src netip.Addr, snap *zone.Snapshot) (string, *dns.EDNS0_SUBNET) {
	if ecs := h.trustedSubnet(req, src); ecs != nil {
		reply := *ecs
		reply.SourceScope = 0
		if ecs.SourceNetmask == 0 {
			// The client asked that its address not be used (RFC 7871
			// 7.1.2): locate the forwarder, as without the option.
			return snap.Locate(src), &reply
		}
		// Only the first SourceNetmask bits are the client's (RFC 7871
		// 6): a sender may leave others set. miekg/dns holds an IPv4
		// address in 16 bytes; an IPv6 option may carry an IPv4-mapped
		// one, which the networks (IPv4) see unmapped.
		ip, _ := netip.AddrFromSlice(ecs.Address)
		bits, mapped := int(ecs.SourceNetmask), 0
		switch {
		case ecs.Family == 1:
			ip = ip.Unmap()
		case ip.Is4In6() && bits >= 96:
			ip, bits, mapped = ip.Unmap(), bits-96, 96
		}
		// The answer holds for the subnet the forwarder named, or a
		// narrower one when a network inside it has another location: a
		// cache may reuse it for that scope only.
		loc, scope := snap.Networks.LocateSubnet(netip.PrefixFrom(ip, bits))
		reply.SourceScope = uint8(max(scope+mapped, int(ecs.SourceNetmask)))
		return loc, &reply
	}
	return snap.Locate(src), nil
}

// trustedSubnet returns req's EDNS Client Subnet option when src is a
// source dns.client_subnet_from names and the option is well formed.
func (h *Handler) trustedSubnet(req *dns.Msg, src netip.Addr) *dns.EDNS0_SUBNET {
	if len(h.subnetFrom) == 0 || !src.IsValid() {
		return nil
	}
	trusted := false
	for _, p := range h.subnetFrom {
		trusted = trusted || p.Contains(src)
	}
	opt := req.IsEdns0()
	if !trusted || opt == nil {
		return nil
	}
	for _, o := range opt.Option {
		ecs, ok := o.(*dns.EDNS0_SUBNET)
		if !ok {
			continue
		}
		// miekg/dns has checked the family and the netmask's range when
		// it unpacked the option; family 0 (no address) is an opt-out.
		if (ecs.Family == 1 && ecs.SourceNetmask <= 32) || (ecs.Family == 2 && ecs.SourceNetmask <= 128) {
			return ecs
		}
	}
	return nil
}
