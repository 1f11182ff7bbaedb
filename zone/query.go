package zone

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// Target is the role a name asks for.
type Target uint8

// The targets of the name grammar. Aliases (master, standby, prefer-standby)
// parse to the same values.
const (
	TargetPrimary       Target = iota + 1 // the current primary
	TargetReplica                         // live replicas that pass the filters
	TargetPreferReplica                   // as TargetReplica; the primary when none passes
	TargetAny                             // the primary and the replicas that pass
	TargetOffline                         // offline replicas that pass; when none does, the other replicas that pass
)

var targetNames = [...]string{
	TargetPrimary:       "primary",
	TargetReplica:       "replica",
	TargetPreferReplica: "prefer-replica",
	TargetAny:           "any",
	TargetOffline:       "offline",
}

// String returns the canonical label of t.
func (t Target) String() string {
	if int(t) < len(targetNames) && targetNames[t] != "" {
		return targetNames[t]
	}
	return "target(" + strconv.Itoa(int(t)) + ")"
}

// ParseTarget maps a lower-case role label, or one of its aliases, to a Target.
func ParseTarget(label string) (Target, bool) {
	switch label {
	case "primary", "master":
		return TargetPrimary, true
	case "replica", "standby":
		return TargetReplica, true
	case "prefer-replica", "prefer-standby":
		return TargetPreferReplica, true
	case "any":
		return TargetAny, true
	case "offline":
		return TargetOffline, true
	}
	return 0, false
}

// Kind says what part of the zone a name addresses.
type Kind uint8

// Kinds of names inside the zone.
const (
	KindHosts      Kind = iota + 1 // a role with filters: answered from the probe
	KindApex                       // the zone apex: SOA and NS
	KindNameServer                 // "ns.<zone>", the name the NS record points at
	KindCluster                    // "<cluster>.<zone>": an empty non-terminal with the cluster's SOA
	KindHostName                   // "<label>.host.<cluster>.<zone>": one host's own name (names.go)
)

// ServicePrefix starts every SRV name: RFC 2782's service and protocol
// labels, as the pgx, pgjdbc, npgsql and libpq proposals and psycopg's
// resolve_srv read them. No other service or protocol is in the grammar.
const ServicePrefix = "_postgresql._tcp."

// serviceProto is ServicePrefix's protocol label: "_tcp.<name>" is the
// empty non-terminal above "_postgresql._tcp.<name>".
const serviceProto = "_tcp."

// NameServerLabel is the label of the name server's own name under the zone.
const NameServerLabel = "ns"

// Query is a parsed name: which role of which cluster, under which filters.
// The zero value of each filter field means "no such filter".
type Query struct {
	Kind    Kind
	Target  Target
	Cluster string // "" is the default cluster; KindCluster: the label asked

	// Host is the host label of a KindHostName name.
	Host string

	// SRV: the name was asked under ServicePrefix, for SRV records: the
	// hosts on every port. Without it, selection answers addresses and
	// leaves out hosts not on the cluster's client port (Cluster.Port).
	SRV bool

	// ENT: the name is an empty non-terminal (RFC 8020: NXDOMAIN there
	// would deny every name below it), which exists when the names below
	// it do (Snapshot.EmptyNonTerminal). Two shapes: "host.<cluster>"
	// above the host names (Kind KindHostName, Host ""), and
	// "_tcp.<name>" above "_postgresql._tcp.<name>" (SRV set, the rest of
	// q being <name>'s). It answers no record.
	ENT bool

	HasLag bool
	MaxLag time.Duration // time lag at most this

	HasBytes bool
	MaxBytes uint64 // WAL byte lag at most this

	HasLSN   bool
	MinLSN   LSN    // has replayed at least this position
	Timeline uint32 // 0: any; else MinLSN was taken on this timeline

	// Sync is the sync filter: only replicas the primary provably
	// reports as synchronous standbys (Host.SyncProven).
	Sync bool

	// DC is the dc-NAME filter: only hosts in that location ("" = none).
	DC string

	// From is the location of the client asking ("" when unknown). It is
	// not part of the name: Parse leaves it empty and String ignores it;
	// the server sets it from the client's address (Snapshot.Locate)
	// before selection, which puts that location's replicas first.
	From string

	// Asked is when the lookup arrived (zero: the view's moment). It is
	// not part of the name either: the server sets it before selecting
	// again after a refresh, so that the primary's reach (View.Reach) is
	// bounded as of the lookup's arrival, not of the later answer.
	Asked time.Time
}

// Errors returned by Parse, each with its Outcome.
var (
	ErrOutsideZone error = &Error{Refused, "name is outside the zone"}
	ErrNoSuchName  error = &Error{NoSuchName, "name is not in the grammar"}
)

// Parse reads a lower-case, fully qualified name (trailing dot) under origin
// (also lower-case and fully qualified) into a Query. It does no I/O and
// does not allocate: the Cluster field is a substring of name.
//
// Whether the cluster exists is not its business: selection answers that.
func Parse(name, origin string) (Query, error) {
	if name == origin {
		return Query{Kind: KindApex}, nil
	}
	if len(name) <= len(origin) || !strings.HasSuffix(name, origin) || name[len(name)-len(origin)-1] != '.' {
		return Query{}, ErrOutsideZone
	}
	rest := name[:len(name)-len(origin)-1]
	srv, ent := false, false
	if after, ok := strings.CutPrefix(rest, ServicePrefix); ok {
		rest, srv = after, true
	} else if after, ok := strings.CutPrefix(rest, serviceProto); ok {
		rest, srv, ent = after, true, true // _tcp.<name>: above _postgresql._tcp.<name>
	}
	q, err := parseRelative(rest)
	q.SRV = srv && err == nil
	if srv && err == nil && (q.ENT || q.Kind != KindHosts && q.Kind != KindCluster && q.Kind != KindHostName) {
		return Query{}, ErrNoSuchName // the name server's name, and host.<cluster>, answer no SRV
	}
	q.ENT = q.ENT || (ent && err == nil)
	return q, err
}

// parseRelative is Parse of a name without its zone and service labels.
func parseRelative(rest string) (Query, error) {
	if rest == "" || rest[0] == '.' || rest[len(rest)-1] == '.' || strings.Contains(rest, "..") {
		return Query{}, ErrNoSuchName // an empty label
	}
	if rest == NameServerLabel {
		return Query{Kind: KindNameServer}, nil
	}
	if strings.IndexByte(rest, '.') < 0 && ValidClusterName(rest) {
		return Query{Kind: KindCluster, Cluster: rest}, nil
	}

	q := Query{Kind: KindHosts}
	label, rest := lastLabel(rest)
	t, ok := ParseTarget(label)
	if !ok {
		if !validClusterLabel(label) {
			return Query{}, ErrNoSuchName
		}
		q.Cluster = label
		label, rest = lastLabel(rest)
		if label == HostLabel {
			// <label>.host.<cluster>: a host's own name; host.<cluster>
			// alone, the empty non-terminal above them.
			if rest == "" {
				return Query{Kind: KindHostName, Cluster: q.Cluster, ENT: true}, nil
			}
			if strings.IndexByte(rest, '.') >= 0 || !ValidHostLabel(rest) {
				return Query{}, ErrNoSuchName
			}
			return Query{Kind: KindHostName, Cluster: q.Cluster, Host: rest}, nil
		}
		if t, ok = ParseTarget(label); !ok {
			return Query{}, ErrNoSuchName
		}
	}
	q.Target = t

	for rest != "" {
		label, rest = lastLabel(rest)
		if !q.parseFilter(label) {
			return Query{}, ErrNoSuchName
		}
	}
	return q, nil
}

// lastLabel splits the rightmost label off s. When s holds one label, rest
// is "". Parse has already rejected empty labels.
func lastLabel(s string) (label, rest string) {
	i := strings.LastIndexByte(s, '.')
	if i < 0 {
		return s, ""
	}
	return s[i+1:], s[:i]
}

// validClusterLabel reports whether label may name a cluster: letters,
// digits, '-' and '_', not empty. It keeps escaped wire bytes (\DDD, \.)
// from ever reaching a cluster lookup.
func validClusterLabel(label string) bool {
	if label == "" || len(label) > 63 {
		return false
	}
	for i := 0; i < len(label); i++ {
		c := label[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// ValidClusterName reports whether name can be used as a cluster label:
// lower-case letters, digits, '-' and '_', and not a word of the grammar.
func ValidClusterName(name string) bool {
	if !validClusterLabel(name) || name == NameServerLabel {
		return false
	}
	if _, ok := ParseTarget(name); ok {
		return false
	}
	var q Query
	return !q.parseFilter(name)
}

// SyncLabel is the sync filter's label: sync.replica.
const SyncLabel = "sync"

// DCPrefix starts the location filter label: dc-east.replica.
const DCPrefix = "dc-"

// ValidLocationName reports whether name can name a location: 1 to 60
// lower-case letters, digits, '-' and '_', so that "dc-" + name is one
// label of at most 63 bytes.
func ValidLocationName(name string) bool {
	return len(name) <= 63-len(DCPrefix) && validClusterLabel(name)
}

// parseFilter applies one filter label to q. It fails on a malformed label
// and on a second filter of the same kind.
func (q *Query) parseFilter(label string) bool {
	switch {
	case label == SyncLabel:
		if q.Sync {
			return false
		}
		q.Sync = true
		return true
	case strings.HasPrefix(label, DCPrefix):
		name := label[len(DCPrefix):]
		if q.DC != "" || !ValidLocationName(name) {
			return false
		}
		q.DC = name
		return true
	case strings.HasPrefix(label, "lag-"):
		if q.HasLag {
			return false
		}
		d, ok := parseLag(label[len("lag-"):])
		q.HasLag, q.MaxLag = ok, d
		return ok
	case strings.HasPrefix(label, "bytes-"):
		if q.HasBytes {
			return false
		}
		n, ok := parseBytes(label[len("bytes-"):])
		q.HasBytes, q.MaxBytes = ok, n
		return ok
	case strings.HasPrefix(label, "lsn-"):
		if q.HasLSN {
			return false
		}
		lsn, tli, ok := parseLSNToken(label[len("lsn-"):])
		q.HasLSN, q.MinLSN, q.Timeline = ok, lsn, tli
		return ok
	}
	return false
}

// parseLag reads N followed by "ms" or "s".
func parseLag(s string) (time.Duration, bool) {
	var unit time.Duration
	switch {
	case strings.HasSuffix(s, "ms"):
		s, unit = s[:len(s)-2], time.Millisecond
	case strings.HasSuffix(s, "s"):
		s, unit = s[:len(s)-1], time.Second
	default:
		return 0, false
	}
	n, ok := parseDecimal(s)
	if !ok || n > uint64(math.MaxInt64/int64(unit)) {
		return 0, false
	}
	return time.Duration(n) * unit, true
}

// parseBytes reads N followed by b, kb, mb or gb (powers of 1024).
func parseBytes(s string) (uint64, bool) {
	var shift uint
	switch {
	case strings.HasSuffix(s, "kb"):
		s, shift = s[:len(s)-2], 10
	case strings.HasSuffix(s, "mb"):
		s, shift = s[:len(s)-2], 20
	case strings.HasSuffix(s, "gb"):
		s, shift = s[:len(s)-2], 30
	case strings.HasSuffix(s, "b"):
		s = s[:len(s)-1]
	default:
		return 0, false
	}
	n, ok := parseDecimal(s)
	if !ok || n > math.MaxUint64>>shift {
		return 0, false
	}
	return n << shift, true
}

// parseLSNToken reads HI "-" LO ["-t" TLI].
func parseLSNToken(s string) (LSN, uint32, bool) {
	hi, s, ok := strings.Cut(s, "-")
	if !ok {
		return 0, 0, false
	}
	lo, tl, hasTL := strings.Cut(s, "-")
	h, ok1 := parseHex32(hi)
	l, ok2 := parseHex32(lo)
	if !ok1 || !ok2 || !isLowerHex(hi) || !isLowerHex(lo) {
		return 0, 0, false
	}
	lsn := LSN(uint64(h)<<32 | uint64(l))
	if !hasTL {
		return lsn, 0, true
	}
	if !strings.HasPrefix(tl, "t") {
		return 0, 0, false
	}
	n, ok := parseDecimal(tl[1:])
	if !ok || n == 0 || n > math.MaxUint32 {
		return 0, 0, false
	}
	return lsn, uint32(n), true
}

// isLowerHex rejects upper-case hex so that the canonical, lower-cased form
// is the only spelling; Parse is handed lower-cased names anyway.
func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'F' {
			return false
		}
	}
	return true
}

// parseDecimal reads 1 to 20 decimal digits that fit in a uint64. (The
// fuzzer found that a 19-digit cap rejected the canonical form of large
// byte bounds, which String prints in bytes.)
func parseDecimal(s string) (uint64, bool) {
	if len(s) == 0 || len(s) > 20 {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// String returns the canonical relative name of q (without the zone), such
// that Parse(q.String()+"."+origin, origin) returns q again (From aside,
// which no name carries): filters in the order dc, sync, lag, bytes, lsn; lag in
// ms; bytes in b; the canonical role word.
func (q Query) String() string {
	if q.ENT {
		r := q
		r.ENT, r.SRV = false, false
		if q.SRV {
			return serviceProto + r.String()
		}
		return HostLabel + "." + q.Cluster
	}
	if q.SRV {
		r := q
		r.SRV = false
		return ServicePrefix + r.String()
	}
	switch q.Kind {
	case KindApex:
		return ""
	case KindNameServer:
		return NameServerLabel
	case KindCluster:
		return q.Cluster
	case KindHostName:
		return HostName(q.Host, q.Cluster)
	}
	b := make([]byte, 0, 64)
	if q.DC != "" {
		b = append(b, DCPrefix...)
		b = append(b, q.DC...)
		b = append(b, '.')
	}
	if q.Sync {
		b = append(b, SyncLabel+"."...)
	}
	if q.HasLag {
		b = append(b, "lag-"...)
		b = strconv.AppendInt(b, q.MaxLag.Milliseconds(), 10)
		b = append(b, "ms."...)
	}
	if q.HasBytes {
		b = append(b, "bytes-"...)
		b = strconv.AppendUint(b, q.MaxBytes, 10)
		b = append(b, "b."...)
	}
	if q.HasLSN {
		b = append(b, "lsn-"...)
		b = q.MinLSN.AppendLabel(b)
		if q.Timeline != 0 {
			b = append(b, "-t"...)
			b = strconv.AppendUint(b, uint64(q.Timeline), 10)
		}
		b = append(b, '.')
	}
	b = append(b, q.Target.String()...)
	if q.Cluster != "" {
		b = append(b, '.')
		b = append(b, q.Cluster...)
	}
	return string(b)
}
