package httpapi

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// hostGuard answers 421 Misdirected Request to a request whose Host is
// neither an IP literal, nor localhost, nor one of the names allowed.
// That stops DNS rebinding: a web page open in a browser on pgdns's
// machine (or in its network) can make an attacker's name resolve to
// pgdns's address, but the browser still sends the attacker's name as
// Host, never an address. The kubelet's probes and Prometheus's scrapes
// by pod IP send an address.
type hostGuard struct {
	next    http.Handler
	allowed map[string]bool // lower case, without a trailing dot
}

func newHostGuard(next http.Handler, names []string) *hostGuard {
	g := &hostGuard{next: next, allowed: map[string]bool{}}
	for _, n := range names {
		g.allowed[canonicalHost(n)] = true
	}
	return g
}

// ServeHTTP implements http.Handler.
func (g *hostGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !g.allows(r.Host) {
		writeJSON(w, http.StatusMisdirectedRequest, errorBody{
			Error: "host " + truncate(r.Host, 100) + " is neither an address of this server nor localhost nor a name in http.allowed_hosts"})
		return
	}
	g.next.ServeHTTP(w, r)
}

// allows reports whether a Host header (name or address, with or without
// a port) may reach the API. An empty one (HTTP/1.0) is no name at all,
// so nothing a rebinding page can send.
func (g *hostGuard) allows(host string) bool {
	if host == "" {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	name := canonicalHost(host)
	return name == "localhost" || g.allowed[name]
}

// canonicalHost is a host name as compared: lower case, no trailing dot.
func canonicalHost(name string) string {
	return strings.TrimSuffix(strings.ToLower(name), ".")
}
