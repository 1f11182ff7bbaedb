package config

import (
	"net/netip"
	"strings"

	"github.com/pgdns/pgdns/zone"
)

// ListenIP is the one rule for "does this listen address name one IP?"
// (dns.listen, http.listen): its host when that is an IP address other
// than a wildcard (0.0.0.0, ::). ok is false for a wildcard, an empty host
// (every address), a name, or an address that does not parse. It decides
// whether dns.nameservers may be left out (ns.<zone> is then answered with
// this IP) and, through ListenLoopback, whether profiles are served.
func ListenIP(listen string) (ip netip.Addr, ok bool) {
	host, _, err := zone.ParseListenAddr(listen)
	if err != nil {
		return netip.Addr{}, false
	}
	ip, err = netip.ParseAddr(host)
	if err != nil || ip.IsUnspecified() {
		return netip.Addr{}, false
	}
	return ip, true
}

// ListenLoopback reports whether listen is reachable from this machine
// only: one loopback IP (ListenIP), or the name localhost.
func ListenLoopback(listen string) bool {
	if ip, ok := ListenIP(listen); ok {
		return ip.IsLoopback()
	}
	host, _, err := zone.ParseListenAddr(listen)
	return err == nil && strings.EqualFold(host, "localhost")
}
