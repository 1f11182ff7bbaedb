// Package config loads pgdns's configuration: defaults, then the YAML file,
// then PGDNS_ environment variables, then validation that names every bad
// key and quotes its value.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"

	"github.com/pgdns/pgdns/zone"
)

// EnvPrefix starts every environment variable that overrides a key;
// "__" separates nesting levels: PGDNS_PROBE__INTERVAL=100ms.
const EnvPrefix = "PGDNS_"

// Config is the validated configuration.
type Config struct {
	DNS      DNS
	HTTP     HTTP
	Probe    Probe
	Clusters []Cluster // in name order
}

// DNS configures the DNS server.
type DNS struct {
	Listen         string
	Zone           string // without trailing dot, lower case
	TTL            uint32
	DefaultCluster string
	LSNWait        time.Duration
	RateLimit      int // UDP queries per second per source address; 0 = no limit

	// NameServers are the zone's name servers (dns.nameservers): the NS
	// RRset in this order, the first the SOA MNAME. Empty: ns.<zone>,
	// answered with the listen address.
	NameServers []NameServer

	// LSNRefreshMinGap is the least time between the starts of two
	// refresh rounds of one cluster that lsn- lookups ask for.
	LSNRefreshMinGap time.Duration

	// Networks map client networks to locations (dns.locations): replica
	// answers put the client's location first.
	Networks []zone.Network

	// ClientSubnetFrom are the sources (forwarders) whose EDNS Client
	// Subnet option is taken as the client's address
	// (dns.client_subnet_from); empty: the option is ignored.
	ClientSubnetFrom []netip.Prefix
}

// NameServer is one name server of the zone.
type NameServer struct {
	Name  string       // fully qualified, lower case, with the trailing dot
	Addrs []netip.Addr // answered for Name; only for a name in the zone
}

// HTTP configures the HTTP API; an empty Listen turns it off.
type HTTP struct {
	Listen string

	// SyncMaxLag and SyncMaxLagBytes are the thresholds of the pg-status
	// endpoints when a request gives none (pg_status__sync_max_lag_ms,
	// pg_status__sync_max_lag_bytes).
	SyncMaxLag      time.Duration
	SyncMaxLagBytes uint64
}

// Probe configures the probing of hosts.
type Probe struct {
	Interval time.Duration
	Timeout  time.Duration
	MaxFails int
	DSN      string

	// FluxInterval and FluxDuration: while a cluster is in flux (its
	// primary went down or changed, a host changed role) its hosts are
	// probed every FluxInterval, for at most FluxDuration.
	FluxInterval time.Duration
	FluxDuration time.Duration
}

// Cluster is one PostgreSQL cluster.
type Cluster struct {
	Name      string
	Hosts     []string
	Patroni   []string
	AsyncOnly bool // replicas: async

	// Locations labels hosts with their location (locations: name →
	// hosts): host "host:port" → location name.
	Locations map[string]string

	// SystemID pins the cluster's system identifier (system_identifier:
	// pg_control_system() as PostgreSQL prints it); 0 lets pgdns establish
	// it from the hosts' majority.
	SystemID uint64
}

// DefaultLSNRefreshMinGap is the default dns.lsn_refresh_min_gap: short
// enough that a read-your-writes lookup waiting dns.lsn_wait (20ms) still
// gets a fresh round, long enough to bound what lookups of an LSN no
// replica has can cost (README, "Read your writes").
const DefaultLSNRefreshMinGap = 5 * time.Millisecond

// defaults are the values of every key not set elsewhere.
var defaults = map[string]any{
	"dns.listen":              "127.0.0.1:5353",
	"dns.zone":                "db.local",
	"dns.ttl":                 1,
	"dns.lsn_wait":            "20ms",
	"dns.lsn_refresh_min_gap": DefaultLSNRefreshMinGap.String(),
	"dns.rate_limit":          0,
	"http.listen":             "127.0.0.1:8080",
	"http.sync_max_lag":       "1s",
	"http.sync_max_lag_bytes": 1000000,
	"probe.interval":          "250ms",
	"probe.timeout":           "1s",
	"probe.max_fails":         3,
	"probe.flux_interval":     "10ms",
	"probe.flux_duration":     "3s",
	"probe.dsn":               "user=postgres dbname=postgres",
}

// topKeys are the keys outside "clusters"; clusterKeys the keys of each
// cluster.
var (
	topKeys = []string{"dns.listen", "dns.zone", "dns.ttl", "dns.default_cluster", "dns.lsn_wait", "dns.lsn_refresh_min_gap", "dns.rate_limit",
		"dns.nameservers", clientSubnetKey, "http.listen", "http.sync_max_lag", "http.sync_max_lag_bytes", "probe.interval", "probe.timeout", "probe.max_fails", "probe.dsn",
		"probe.flux_interval", "probe.flux_duration"}
	clusterKeys = []string{"hosts", "patroni", "replicas", "system_identifier"}
)

// Load reads the file at path (which must exist), applies environ (as from
// os.Environ) on top and validates the result. The error, when not nil,
// joins one error per problem, each on its own line.
func Load(path string, environ []string) (*Config, error) {
	k := koanf.New(".")
	if err := k.Load(confmap.Provider(defaults, "."), nil); err != nil {
		return nil, err
	}
	if err := k.Load(file.Provider(path), yaml.Parser()); err != nil {
		return nil, fmt.Errorf("file %q: %w", path, unwrapPathError(err))
	}
	envProvider := env.Provider(".", env.Opt{
		Prefix:      EnvPrefix,
		EnvironFunc: func() []string { return environ },
		TransformFunc: func(key, value string) (string, any) {
			key = strings.ToLower(strings.TrimPrefix(key, EnvPrefix))
			return strings.ReplaceAll(key, "__", "."), value
		},
	})
	if err := k.Load(envProvider, nil); err != nil {
		return nil, err
	}
	return fromKoanf(k)
}

func unwrapPathError(err error) error {
	var msg = err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 && strings.Contains(msg, "no such file") {
		return errors.New(msg[i+2:])
	}
	return err
}

// reader converts koanf values and collects one error per bad key.
type reader struct {
	k    *koanf.Koanf
	errs []error
}

func (r *reader) fail(key string, format string, args ...any) {
	msg := fmt.Sprintf("%s "+format, append([]any{key}, args...)...)
	r.errs = append(r.errs, errors.New(Redact(msg)))
}

var (
	passwordKV  = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s"]+)`)
	urlUserinfo = regexp.MustCompile(`(://[^:/@\s"]*:)[^@\s"]*@`)
)

// Redact hides passwords in text that quotes configuration values: a
// password=... keyword and the password of a URL's userinfo.
func Redact(text string) string {
	text = passwordKV.ReplaceAllString(text, "${1}REDACTED")
	return urlUserinfo.ReplaceAllString(text, "${1}REDACTED@")
}

func fromKoanf(k *koanf.Koanf) (*Config, error) {
	r := &reader{k: k}
	cfg := &Config{}

	clusterNames := k.MapKeys("clusters")
	if k.Exists("clusters") && len(clusterNames) == 0 {
		r.fail("clusters", "must map cluster names to their hosts, got %q", fmt.Sprint(k.Get("clusters")))
	}
	for _, key := range k.Keys() {
		if slices.Contains(topKeys, key) || locationKey(key) {
			continue
		}
		if rest, ok := strings.CutPrefix(key, "clusters."); ok {
			name, field, _ := strings.Cut(rest, ".")
			if slices.Contains(clusterNames, name) && (slices.Contains(clusterKeys, field) || clusterLocationField(field)) {
				continue
			}
			if field == "" {
				continue // reported below as a cluster without hosts
			}
		}
		r.fail(key, "is not a known key (value %q)", fmt.Sprint(k.Get(key)))
	}

	cfg.DNS.Listen = r.address("dns.listen", false)
	cfg.DNS.Zone = r.zoneName("dns.zone")
	cfg.DNS.TTL = uint32(r.integer("dns.ttl", 0, 60))
	cfg.DNS.DefaultCluster = r.str("dns.default_cluster")
	cfg.DNS.LSNWait = r.duration("dns.lsn_wait", true)
	cfg.DNS.LSNRefreshMinGap = r.duration("dns.lsn_refresh_min_gap", false)
	cfg.DNS.RateLimit = r.integer("dns.rate_limit", 0, 1_000_000)
	cfg.DNS.NameServers = r.nameServers("dns.nameservers", cfg.DNS.Zone, cfg.DNS.Listen, clusterNames)
	cfg.DNS.Networks = r.networks()
	cfg.DNS.ClientSubnetFrom = r.clientSubnetFrom()
	cfg.HTTP.Listen = r.address("http.listen", true)
	cfg.HTTP.SyncMaxLag = r.duration("http.sync_max_lag", true)
	cfg.HTTP.SyncMaxLagBytes = uint64(r.integer("http.sync_max_lag_bytes", 0, 1<<50))
	cfg.Probe.Interval = r.duration("probe.interval", false)
	cfg.Probe.Timeout = r.duration("probe.timeout", false)
	cfg.Probe.MaxFails = r.integer("probe.max_fails", 1, 1000)
	cfg.Probe.DSN = r.str("probe.dsn")
	cfg.Probe.FluxInterval = r.duration("probe.flux_interval", false)
	cfg.Probe.FluxDuration = r.duration("probe.flux_duration", false)
	if cfg.Probe.FluxInterval < time.Millisecond && cfg.Probe.FluxInterval > 0 {
		r.fail("probe.flux_interval", "must be at least 1ms, got %q", k.String("probe.flux_interval"))
	}
	if cfg.Probe.FluxDuration > time.Minute {
		r.fail("probe.flux_duration", "must be at most 1m, got %q", k.String("probe.flux_duration"))
	}
	if cfg.DNS.LSNWait > 10*time.Second {
		r.fail("dns.lsn_wait", "must be at most 10s, got %q", k.String("dns.lsn_wait"))
	}
	if cfg.DNS.LSNRefreshMinGap > 10*time.Second {
		r.fail("dns.lsn_refresh_min_gap", "must be at most 10s, got %q", k.String("dns.lsn_refresh_min_gap"))
	}

	slices.Sort(clusterNames)
	seen := map[string]string{}
	for _, name := range clusterNames {
		prefix := "clusters." + name
		if !zone.ValidClusterName(name) {
			r.fail(prefix, "is not a valid cluster name (lower-case letters, digits, '-', '_'; not a role, filter or %q): %q", zone.NameServerLabel, name)
		}
		c := Cluster{Name: name}
		c.Hosts = r.list(prefix + ".hosts")
		c.Patroni = r.list(prefix + ".patroni")
		for i, h := range c.Hosts {
			key := fmt.Sprintf("%s.hosts[%d]", prefix, i)
			if _, _, err := net.SplitHostPort(h); err != nil {
				r.fail(key, "must be host:port, got %q", h)
				continue
			}
			if other, dup := seen[h]; dup {
				r.fail(key, "repeats host %q, already in %s", h, other)
			}
			seen[h] = prefix
		}
		for i, u := range c.Patroni {
			if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
				r.fail(fmt.Sprintf("%s.patroni[%d]", prefix, i), "must be an http or https URL, got %q", u)
			}
		}
		if len(c.Hosts) == 0 && len(c.Patroni) == 0 {
			r.fail(prefix+".hosts", "must list at least one host:port (or give patroni URLs)")
		}
		switch v := r.str(prefix + ".replicas"); v {
		case "", "all":
		case "async":
			c.AsyncOnly = true
		default:
			r.fail(prefix+".replicas", "must be all or async, got %q", v)
		}
		c.SystemID = r.systemID(prefix + ".system_identifier")
		c.Locations = r.hostLocations(prefix, &c)
		cfg.Clusters = append(cfg.Clusters, c)
	}

	switch {
	case len(cfg.Clusters) == 0 && len(clusterNames) == 0:
		r.fail("clusters", "must define at least one cluster")
	case cfg.DNS.DefaultCluster == "" && len(cfg.Clusters) == 1:
		cfg.DNS.DefaultCluster = cfg.Clusters[0].Name
	case cfg.DNS.DefaultCluster == "":
		r.fail("dns.default_cluster", "must be set when there is more than one cluster")
	case !slices.Contains(clusterNames, cfg.DNS.DefaultCluster):
		r.fail("dns.default_cluster", "must name a cluster in clusters, got %q", cfg.DNS.DefaultCluster)
	}
	if len(r.errs) > 0 {
		return nil, errors.Join(r.errs...)
	}
	return cfg, nil
}

func (r *reader) str(key string) string {
	v := r.k.Get(key)
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	}
	r.fail(key, "must be a string, got %q", fmt.Sprint(v))
	return ""
}

// systemID reads a PostgreSQL system identifier: a positive decimal
// number, written as a YAML number or, safer from float rounding in other
// tools, a string. Absent is 0.
func (r *reader) systemID(key string) uint64 {
	v := r.k.Get(key)
	var text string
	switch v := v.(type) {
	case nil:
		return 0
	case string:
		if v == "" {
			return 0
		}
		text = v
	case int, int64, uint64:
		text = fmt.Sprint(v)
	default:
		r.fail(key, "must be a system identifier (digits, as pg_control_system() prints it), got %q", fmt.Sprint(v))
		return 0
	}
	n, err := strconv.ParseUint(text, 10, 64)
	if err != nil || n == 0 {
		r.fail(key, "must be a system identifier (digits, as pg_control_system() prints it), got %q", text)
		return 0
	}
	return n
}

func (r *reader) duration(key string, zeroOK bool) time.Duration {
	var d time.Duration
	switch v := r.k.Get(key).(type) {
	case string:
		var err error
		if d, err = time.ParseDuration(strings.TrimSpace(v)); err != nil {
			r.fail(key, "must be a duration such as 250ms or 2s, got %q", v)
			return 0
		}
	case int, int64, float64:
		if fmt.Sprint(v) != "0" {
			r.fail(key, "must be a duration with a unit, such as 250ms, got %q", fmt.Sprint(v))
			return 0
		}
	default:
		r.fail(key, "must be a duration such as 250ms, got %q", fmt.Sprint(v))
		return 0
	}
	if d < 0 || (d == 0 && !zeroOK) {
		r.fail(key, "must be > 0, got %q", d.String())
		return 0
	}
	return d
}

func (r *reader) integer(key string, lo, hi int) int {
	raw := r.k.Get(key)
	var n int
	switch v := raw.(type) {
	case int:
		n = v
	case int64:
		n = int(v)
	case float64:
		if v != float64(int(v)) {
			r.fail(key, "must be an integer from %d to %d, got %q", lo, hi, fmt.Sprint(v))
			return lo
		}
		n = int(v)
	case string:
		var err error
		if n, err = strconv.Atoi(strings.TrimSpace(v)); err != nil {
			r.fail(key, "must be an integer from %d to %d, got %q", lo, hi, v)
			return lo
		}
	default:
		r.fail(key, "must be an integer from %d to %d, got %q", lo, hi, fmt.Sprint(raw))
		return lo
	}
	if n < lo || n > hi {
		r.fail(key, "must be an integer from %d to %d, got %q", lo, hi, strconv.Itoa(n))
		return lo
	}
	return n
}

// list reads a YAML list of strings, or a comma-separated string (as
// environment variables give it).
func (r *reader) list(key string) []string {
	var out []string
	switch v := r.k.Get(key).(type) {
	case nil:
	case string:
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	case []any:
		for i, e := range v {
			s, ok := e.(string)
			if !ok || strings.TrimSpace(s) == "" {
				r.fail(fmt.Sprintf("%s[%d]", key, i), "must be a non-empty string, got %q", fmt.Sprint(e))
				continue
			}
			out = append(out, strings.TrimSpace(s))
		}
	default:
		r.fail(key, "must be a list, got %q", fmt.Sprint(v))
	}
	return out
}

// address reads host:port with a numeric port.
func (r *reader) address(key string, emptyOK bool) string {
	v := r.str(key)
	if v == "" && emptyOK {
		return ""
	}
	_, port, err := net.SplitHostPort(v)
	if err == nil {
		if n, perr := strconv.Atoi(port); perr != nil || n < 0 || n > 65535 {
			err = errors.New("bad port")
		}
	}
	if err != nil {
		r.fail(key, "must be host:port, got %q", v)
	}
	return v
}

// nameServers reads dns.nameservers: "label=address" for a name server in
// the zone (repeat the label for a second address), or a fully qualified
// "name." outside it, whose addresses are not pgdns's to answer. With none
// the NS target is ns.<zone>, answered with the listen address, so a
// listen address that is not one specific IP needs them.
func (r *reader) nameServers(key, zoneName, listen string, clusters []string) []NameServer {
	origin := zoneName + "."
	var out []NameServer
	for i, entry := range r.list(key) {
		ekey := fmt.Sprintf("%s[%d]", key, i)
		name, addr, hasAddr := strings.Cut(strings.ToLower(entry), "=")
		name, addr = strings.TrimSpace(name), strings.TrimSpace(addr)
		label, inZone := strings.CutSuffix(name, "."+origin)
		if !strings.HasSuffix(name, ".") {
			label, inZone = name, true
		}
		var ip netip.Addr
		switch {
		case name == origin:
			r.fail(ekey, "is the zone itself, not a name server: %q", entry)
			continue
		case !inZone && hasAddr:
			r.fail(ekey, "gives an address for a name outside the zone %s (only names in the zone are answered): %q", zoneName, entry)
			continue
		case !inZone:
			if !validDomain(strings.TrimSuffix(name, ".")) {
				r.fail(ekey, "must be label=address or a fully qualified name.: %q", entry)
				continue
			}
		case label != zone.NameServerLabel && !zone.ValidClusterName(label):
			r.fail(ekey, "must be label=address with one label of letters, digits, '-', '_' that is not a role or filter: %q", entry)
			continue
		case slices.Contains(clusters, label):
			r.fail(ekey, "names the cluster %q; a name server needs a label of its own: %q", label, entry)
			continue
		case !hasAddr:
			r.fail(ekey, "must give the address of a name server in the zone, as %s=192.0.2.53: %q", label, entry)
			continue
		default:
			var err error
			if ip, err = netip.ParseAddr(addr); err != nil || ip.IsUnspecified() || ip.Zone() != "" {
				r.fail(ekey, "must be label=address with a specific IP address: %q", entry)
				continue
			}
			name = label + "." + origin
		}
		j := slices.IndexFunc(out, func(ns NameServer) bool { return ns.Name == name })
		if j < 0 {
			out, j = append(out, NameServer{Name: name}), len(out)
		}
		if ip.IsValid() {
			out[j].Addrs = append(out[j].Addrs, ip.Unmap())
		}
	}
	if len(out) == 0 && !specificIP(listen) {
		r.fail(key, "must list the zone's name servers (e.g. [ns1=192.0.2.53]) when dns.listen is not one specific IP address, got dns.listen %q: the NS record would point at a name with no address", listen)
	}
	return out
}

// specificIP reports whether the host of listen is an IP address other
// than a wildcard (0.0.0.0, ::).
func specificIP(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return true // reported as a bad dns.listen
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && !ip.IsUnspecified()
}

// validDomain reports whether name (without the trailing dot) is
// dot-separated labels of letters, digits, '-' and '_'.
func validDomain(name string) bool {
	if name == "" || len(name) > 253 {
		return false
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// zoneName reads a domain name: dot-separated labels of letters, digits and
// '-', stored lower-case without the trailing dot.
func (r *reader) zoneName(key string) string {
	v := r.str(key)
	z := strings.ToLower(strings.TrimSuffix(v, "."))
	ok := z != "" && len(z) <= 200
	for _, label := range strings.Split(z, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			ok = false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				ok = false
			}
		}
	}
	if !ok {
		r.fail(key, "must be a domain name such as db.local, got %q", v)
	}
	return z
}
