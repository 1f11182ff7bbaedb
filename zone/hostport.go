package zone

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"
)

// Host addresses reach pgdns from the configuration (clusters.<name>.hosts),
// from Patroni's /cluster, and from the probe's caller; each is parsed here,
// by one rule, before it names anything: a probe connection, a location, an
// SRV target. A host that is neither an IP address nor a DNS name is refused
// wherever it comes from, so that no quote, space or '=' ever reaches a
// connection string or a log as if it were an address.

// ParseHostPort splits a server's address, "host:port" (IPv6 in brackets:
// "[::1]:5432"). The port is required, 1 to 65535; the host must be an IP
// address (ValidIP) or a DNS name (ValidHostName). The error says which
// part is wrong without quoting addr, so that callers quote it once.
func ParseHostPort(addr string) (host string, port uint16, err error) {
	host, portText, err := splitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	n, err := strconv.ParseUint(portText, 10, 16)
	if err != nil || n == 0 || !allDigits(portText) {
		return "", 0, errors.New("the port must be a number from 1 to 65535")
	}
	if err := CheckHost(host); err != nil {
		return "", 0, err
	}
	return host, uint16(n), nil
}

// ParseListenAddr splits an address to listen on: as ParseHostPort, but
// the host may be empty (every address) and the port 0 (any free port).
func ParseListenAddr(addr string) (host string, port uint16, err error) {
	host, portText, err := splitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	n, err := strconv.ParseUint(portText, 10, 16)
	if err != nil || !allDigits(portText) {
		return "", 0, errors.New("the port must be a number from 0 to 65535")
	}
	if host == "" {
		return "", uint16(n), nil
	}
	if err := CheckHost(host); err != nil {
		return "", 0, err
	}
	return host, uint16(n), nil
}

// JoinHostPort writes host and port as ParseHostPort reads them.
func JoinHostPort(host string, port uint16) string {
	p := strconv.FormatUint(uint64(port), 10)
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + p
	}
	return host + ":" + p
}

// splitHostPort cuts addr at its last ':'; a host holding ':' must be an
// IPv6 address in brackets, and brackets hold nothing else.
func splitHostPort(addr string) (host, port string, err error) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return "", "", errors.New("the port is missing (host:port)")
	}
	host, port = addr[:i], addr[i+1:]
	if strings.HasPrefix(host, "[") {
		inner, ok := strings.CutSuffix(host[1:], "]")
		if !ok || !strings.Contains(inner, ":") {
			return "", "", errors.New("brackets must hold an IPv6 address ([::1]:5432)")
		}
		if _, err := netip.ParseAddr(inner); err != nil {
			return "", "", errors.New("brackets must hold an IPv6 address ([::1]:5432)")
		}
		return inner, port, nil
	}
	if strings.ContainsAny(host, "[]:") {
		return "", "", errors.New("an IPv6 address must be in brackets ([::1]:5432)")
	}
	return host, port, nil
}

// CheckHost says why host is not a server's host as ParseHostPort reads
// it (an IP address or a DNS name, without brackets); nil when it is.
func CheckHost(host string) error {
	if host == "" {
		return errors.New("the host is empty")
	}
	if !ValidIP(host) && !ValidHostName(host) {
		return errors.New("the host must be an IP address or a DNS name (letters, digits, '-', '_', dots)")
	}
	return nil
}

// ValidIP reports whether host is an IPv4 or IPv6 address; an IPv6 zone
// (fe80::1%eth0) may hold only letters, digits, '-', '_' and '.'.
func ValidIP(host string) bool {
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	for _, c := range []byte(ip.Zone()) {
		if !hostNameByte(c) && c != '.' {
			return false
		}
	}
	return true
}

// ValidHostName reports whether host is a DNS name as RFC 1123 writes host
// names: dot-separated labels of 1 to 63 letters, digits and '-', neither
// starting nor ending with '-', at most 253 bytes, with an optional
// trailing dot. '_' is allowed too: Docker Compose service names carry it
// and Go's resolver looks such names up. The last label must not be all
// digits, so that a mistyped address (10.0.0.300) is not taken for a name.
func ValidHostName(host string) bool {
	host = strings.TrimSuffix(host, ".")
	if host == "" || len(host) > 253 {
		return false
	}
	labels := strings.Split(host, ".")
	for _, label := range labels {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			if !hostNameByte(label[i]) {
				return false
			}
		}
	}
	return !allDigits(labels[len(labels)-1])
}

func hostNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
