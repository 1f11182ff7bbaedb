package dnsserver

// Path is which of the handler's two ways built an answer (Config.OnLatency).
type Path uint8

// The paths. String gives each its metric label.
const (
	// PathFast is the UDP fast path: A or AAAA for a role name in a plain
	// query, answered from the datagram with no allocation (answerFast).
	PathFast Path = iota
	// PathSlow is every other answer, through miekg/dns: TCP, other types
	// and names, EDNS options, lsn- lookups that wait for a re-probe.
	PathSlow

	NumPaths = int(PathSlow) + 1 // how many values Path has, for tables indexed by it
)

// String returns the label of p.
func (p Path) String() string {
	switch p {
	case PathFast:
		return "fast"
	case PathSlow:
		return "slow"
	}
	return "unknown"
}
