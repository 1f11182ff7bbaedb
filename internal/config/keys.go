package config

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/pgdns/pgdns/zone"
)

// Every configuration key is declared once, here: its name, default, one
// line of doc, whether a reload applies it, and how it is read and
// validated. Defaults, the refusal of unknown keys, validation and the
// reload rule are derived from these tables, and docs_test.go checks the
// configuration table (docs/configuration.md) and the example configs against them. A key whose check needs
// another key reads it from the Config being filled: the tables are read
// in order.

// applies says when a changed value takes effect.
type applies bool

const (
	onRestart applies = false // listener settings: the sockets and what they answer with
	onReload  applies = true  // SIGHUP applies it without dropping a query
)

// key declares one key outside clusters.
type key struct {
	name    string
	def     any // nil: no default
	applies applies
	doc     string
	isMap   bool // a map of names to lists: its keys are name.<entry>

	read  func(r *reader, c *Config) // reads the value into c, failing on a bad one
	equal func(a, b *Config) bool
	keep  func(dst, src *Config) // copies the value from src to dst
}

// field declares a key that reads into one field of Config.
func field[T any](name string, def any, when applies, doc string, at func(*Config) *T, read func(r *reader, key string, c *Config) T) key {
	return key{
		name: name, def: def, applies: when, doc: doc,
		read:  func(r *reader, c *Config) { *at(c) = read(r, name, c) },
		equal: func(a, b *Config) bool { return reflect.DeepEqual(*at(a), *at(b)) },
		keep:  func(dst, src *Config) { *at(dst) = *at(src) },
	}
}

// mapField is field for a map of names to lists (dns.locations).
func mapField[T any](name string, when applies, doc string, at func(*Config) *T, read func(r *reader, key string, c *Config) T) key {
	k := field(name, nil, when, doc, at, read)
	k.isMap = true
	return k
}

// DefaultLSNRefreshMinGap is the default dns.lsn_refresh_min_gap: short
// enough that a read-your-writes lookup waiting dns.lsn_wait (20ms) still
// gets a fresh round, long enough to bound what lookups of an LSN no
// replica has can cost (docs/decisions.md, rule 8).
const DefaultLSNRefreshMinGap = 5 * time.Millisecond

// Floors of durations below which a value is a mistake, not a choice:
// probe.interval: 1ns probed each host 150 times a second at 70% of a
// core, while flux already probes every 10ms (probe.flux_interval's
// default); probe.timeout: no server connects and answers within less;
// dns.lsn_refresh_min_gap: a gap under 1ms lets lsn- lookups ask for
// refresh rounds back to back.
const (
	minProbeInterval = 10 * time.Millisecond
	minProbeTimeout  = 10 * time.Millisecond
	minLSNRefreshGap = time.Millisecond
	// probe.admission_interval: each ask may cost the server a whole
	// session (docs/operating.md); more than ten a second is a mistake.
	minAdmissionInterval = 100 * time.Millisecond
)

// topKeys are the keys outside clusters, in the order they are read.
var topKeys = []key{
	field("dns.listen", "127.0.0.1:5353", onRestart, "UDP and TCP address of the DNS server",
		func(c *Config) *string { return &c.DNS.Listen }, hostPort(false)),
	field("dns.zone", "db.local", onRestart, "the zone pgdns is authoritative for",
		func(c *Config) *string { return &c.DNS.Zone }, zoneName),
	field("dns.ttl", 1, onRestart, "TTL of every answer, 0..60; the SOA MINIMUM follows it",
		func(c *Config) *uint32 { return &c.DNS.TTL }, integerIn[uint32](0, 60)),
	field("dns.default_cluster", nil, onReload, "cluster for names without a cluster label; may be omitted with one cluster",
		func(c *Config) *string { return &c.DNS.DefaultCluster }, defaultCluster),
	field("dns.lsn_wait", "20ms", onRestart, "how long an lsn- query no replica satisfies yet may wait",
		func(c *Config) *time.Duration { return &c.DNS.LSNWait }, durationIn(true, 0, 10*time.Second)),
	field("dns.lsn_refresh_min_gap", DefaultLSNRefreshMinGap.String(), onRestart, "least time between refresh rounds lsn- queries ask for, per cluster, 1ms..10s",
		func(c *Config) *time.Duration { return &c.DNS.LSNRefreshMinGap }, durationIn(false, minLSNRefreshGap, 10*time.Second)),
	field("dns.rate_limit", 0, onRestart, "UDP queries per second per source /24 (IPv4) or /56 (IPv6); 0 = no limit",
		func(c *Config) *int { return &c.DNS.RateLimit }, integerIn[int](0, 1_000_000)),
	field("dns.nameservers", nil, onRestart, "the zone's name servers: label=address in the zone, or name. outside it",
		func(c *Config) *[]NameServer { return &c.DNS.NameServers }, nameServers),
	mapField(locationsKey, onReload, "client networks by location name",
		func(c *Config) *[]zone.Network { return &c.DNS.Networks }, networks),
	field(clientSubnetKey, nil, onRestart, "forwarders whose EDNS Client Subnet option is believed",
		func(c *Config) *[]netip.Prefix { return &c.DNS.ClientSubnetFrom }, prefixes),

	field("http.listen", "127.0.0.1:8080", onRestart, `address of the HTTP API; "" turns it off`,
		func(c *Config) *string { return &c.HTTP.Listen }, hostPort(true)),
	field("http.max_conns", 128, onRestart, "most HTTP connections open at once; past it the one idle longest is closed",
		func(c *Config) *int { return &c.HTTP.MaxConns }, integerIn[int](1, 100_000)),
	field("http.allowed_hosts", nil, onRestart, "names besides localhost a request's Host may carry (IP literals always may); others get 421",
		func(c *Config) *[]string { return &c.HTTP.AllowedHosts }, hostNames),
	field("http.admin_token_file", "", onRestart, `file holding the bearer token of the admin endpoints (POST /v1/admin/...); "" turns them off`,
		func(c *Config) *string { return &c.HTTP.AdminTokenFile }, text),
	field("http.sync_max_lag", "1s", onRestart, "pg-status endpoints: time lag threshold when a request gives none",
		func(c *Config) *time.Duration { return &c.HTTP.SyncMaxLag }, durationIn(true, 0, 0)),
	field("http.sync_max_lag_bytes", 1000000, onRestart, "pg-status endpoints: byte lag threshold when a request gives none",
		func(c *Config) *uint64 { return &c.HTTP.SyncMaxLagBytes }, integerIn[uint64](0, 1<<50)),

	field("probe.interval", "250ms", onReload, "how often each host is probed, at least 10ms",
		func(c *Config) *time.Duration { return &c.Probe.Interval }, durationIn(false, minProbeInterval, 0)),
	field("probe.timeout", "1s", onReload, "hard deadline of one probe of one host, at least 10ms",
		func(c *Config) *time.Duration { return &c.Probe.Timeout }, durationIn(false, minProbeTimeout, 0)),
	field("probe.max_fails", 3, onReload, "consecutive ambiguous failures before a host counts as down",
		func(c *Config) *int { return &c.Probe.MaxFails }, integerIn[int](1, 1000)),
	field("probe.dsn", "user=postgres dbname=postgres", onReload, "libpq keyword/value or URL without host",
		func(c *Config) *string { return &c.Probe.DSN }, text),
	field("probe.flux_interval", "10ms", onReload, "while a cluster is in flux, its hosts are probed this often",
		func(c *Config) *time.Duration { return &c.Probe.FluxInterval }, durationIn(false, time.Millisecond, 0)),
	field("probe.flux_duration", "3s", onReload, "a flux episode lasts at most this long, then the normal interval",
		func(c *Config) *time.Duration { return &c.Probe.FluxDuration }, durationIn(false, 0, time.Minute)),
	field("probe.admission_interval", "1s", onReload, "how often each host is asked for a new session, to see a smart shutdown; 0 = never (a smart shutdown is then not seen)",
		func(c *Config) *time.Duration { return &c.Probe.AdmissionInterval }, durationIn(true, minAdmissionInterval, 0)),

	field("state.path", "", onRestart, `file where pgdns keeps what it learned across restarts; "" = memory only`,
		func(c *Config) *string { return &c.State.Path }, text),
}

// clusterKey declares one key of each cluster: clusters.<name>.<name of
// the key>. A reload applies them all.
type clusterKey struct {
	name  string
	doc   string
	isMap bool
	read  func(r *reader, key string, c *Cluster) // key: the full name
}

// clusterKeys are the keys of a cluster, in the order they are read.
var clusterKeys = []clusterKey{
	{name: "hosts", doc: "host:port of every server, primary and replicas alike", read: readHosts},
	{name: "patroni", doc: "optional Patroni REST URLs: members read from /cluster", read: readPatroni},
	{name: "replicas", doc: "all, or async: leave synchronous standbys out of replica answers", read: readReplicas},
	{name: "system_identifier", doc: "optional: pin the cluster's identity (pg_control_system())",
		read: func(r *reader, key string, c *Cluster) { c.SystemID = r.systemID(key) }},
	{name: "min_timeline", doc: "optional, with system_identifier: a writable host on a lower timeline is never the primary", read: readMinTimeline},
	{name: clusterLocationsField, doc: "hosts by location name", isMap: true,
		read: func(r *reader, key string, c *Cluster) { c.Locations = r.hostLocations(key, c) }},
	{name: namesField, doc: "optional host labels: label → host:port; the host answers as <label>.host.<cluster>.<zone>", isMap: true,
		read: func(r *reader, key string, c *Cluster) { c.Names = r.hostLabels(key, c) }},
	{name: "port", doc: "optional: the port of the cluster's A and AAAA answers; default the port most hosts share", read: readPort},
}

// hostNames reads a list of host names: no port, no scheme.
func hostNames(r *reader, key string, _ *Config) []string {
	var out []string
	for i, v := range r.list(key) {
		name := strings.ToLower(strings.TrimSuffix(v, "."))
		if !validDomain(name) {
			r.fail(fmt.Sprintf("%s[%d]", key, i), "must be a host name such as pgdns.monitoring.svc (no port, no scheme), got %q", v)
			continue
		}
		out = append(out, name)
	}
	return out
}

// text reads a string.
func text(r *reader, key string, _ *Config) string { return r.str(key) }

// hostPort reads host:port with a numeric port; emptyOK: or "".
func hostPort(emptyOK bool) func(*reader, string, *Config) string {
	return func(r *reader, key string, _ *Config) string { return r.address(key, emptyOK) }
}

// integerIn reads an integer from lo to hi.
func integerIn[T ~int | ~uint32 | ~uint64](lo, hi int) func(*reader, string, *Config) T {
	return func(r *reader, key string, _ *Config) T { return T(r.integer(key, lo, hi)) }
}

// durationIn reads a duration > 0 (or 0 when zeroOK), at least least
// unless 0 and at most most (0: no bound).
func durationIn(zeroOK bool, least, most time.Duration) func(*reader, string, *Config) time.Duration {
	return func(r *reader, key string, _ *Config) time.Duration {
		d := r.duration(key, zeroOK)
		switch {
		case least > 0 && d > 0 && d < least:
			r.fail(key, "must be at least %s, got %q", shortDuration(least), r.k.String(key))
		case most > 0 && d > most:
			r.fail(key, "must be at most %s, got %q", shortDuration(most), r.k.String(key))
		}
		return d
	}
}

// shortDuration writes d as a person would: 1m, not 1m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// defaults are the values of every key not set elsewhere.
func defaults() map[string]any {
	out := map[string]any{}
	for _, k := range topKeys {
		if k.def != nil {
			out[k.name] = k.def
		}
	}
	return out
}

// unknownKeys fails on every key no declaration matches.
func (r *reader) unknownKeys() {
	for _, k := range r.k.Keys() {
		if !r.known(k) {
			if near := nearestKey(k); near != "" {
				r.fail(k, "is not a known key (value %q); did you mean %s?", r.k.Get(k), near)
			} else {
				r.fail(k, "is not a known key (value %q)", r.k.Get(k))
			}
		}
	}
}

func (r *reader) known(k string) bool {
	rest, inClusters := strings.CutPrefix(k, "clusters.")
	if !inClusters {
		return slices.ContainsFunc(topKeys, func(d key) bool { return declares(d.name, d.isMap, k) })
	}
	name, field, _ := strings.Cut(rest, ".")
	if field == "" {
		return true // reported as a cluster without hosts
	}
	return slices.Contains(r.clusters, name) &&
		slices.ContainsFunc(clusterKeys, func(d clusterKey) bool { return declares(d.name, d.isMap, field) })
}

// declares reports whether k is the key declared as name: name itself
// (for a map, given something else: its reader says so), or for a map one
// entry, name.<entry>.
func declares(name string, isMap bool, k string) bool {
	if !isMap {
		return k == name
	}
	if k == name {
		return true // not a map: its reader reports the value, once
	}
	entry, ok := strings.CutPrefix(k, name+".")
	return ok && entry != "" && !strings.Contains(entry, ".")
}

// Reload returns the configuration a reload to next puts in force while
// running is: next, but with running's value of every key declared
// onRestart, and the names of those keys whose value next would change.
func Reload(running, next *Config) (*Config, []string) {
	out := *next
	var restart []string
	for _, k := range topKeys {
		if k.applies == onReload {
			continue
		}
		if !k.equal(running, next) {
			restart = append(restart, k.name)
		}
		k.keep(&out, running)
	}
	return &out, restart
}
