// Package config loads pgdns's configuration: defaults, then the YAML file,
// then PGDNS_ environment variables, then validation that names every bad
// key and quotes its value.
package config

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
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
	State    State
}

// DNS configures the DNS server.
type DNS struct {
	Listen         string
	Zone           string // without trailing dot, lower case
	TTL            uint32
	DefaultCluster string
	LSNWait        time.Duration
	RateLimit      int // UDP queries per second per source /24 (IPv4) or /56 (IPv6); 0 = no limit

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

	// MaxConns caps open connections; AllowedHosts are the names besides
	// localhost a request's Host may carry (httpapi.ServerConfig).
	MaxConns     int
	AllowedHosts []string

	// AdminTokenFile holds the bearer token the admin endpoints demand
	// (POST /v1/admin/forget-timeline, /v1/admin/forget-fork); "" turns them off.
	AdminTokenFile string
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

	// AdmissionInterval: each host is asked at most this often (and
	// every fourth probe at most) whether it admits a new session, which
	// is how a smart shutdown is seen; 0 never asks.
	AdmissionInterval time.Duration
}

// State configures what pgdns keeps on disk (internal/state).
type State struct {
	// Path is the state file; "" keeps what pgdns learns in memory only.
	// It is read at start-up only: a reload keeps the running value.
	Path string
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

	// Names labels hosts (names: label → host): host "host:port" →
	// label; a host not in it is labelled by its address and port.
	Names map[string]string

	// Port is the port of the cluster's A and AAAA answers (port); 0:
	// the port most hosts share (zone.ClientPort).
	Port uint16

	// MinTimeline (min_timeline, only with SystemID) is a floor of the
	// cluster's newest timeline: a writable host on a lower one is never
	// the primary, as if pgdns had seen the promotion itself. 0: none.
	MinTimeline uint32
}

// Load reads the file at path (which must exist), applies environ (as from
// os.Environ) on top and validates the result. The error, when not nil,
// joins one error per problem, each on its own line.
func Load(path string, environ []string) (*Config, error) {
	k := koanf.New(".")
	if err := k.Load(confmap.Provider(defaults(), "."), nil); err != nil {
		return nil, err
	}
	if err := k.Load(file.Provider(path), yaml.Parser()); err != nil {
		return nil, fmt.Errorf("file %q: %w", path, unwrapPathError(err))
	}
	fromEnv := map[string]string{} // key → the variable that set it
	envProvider := env.Provider(".", env.Opt{
		Prefix:      EnvPrefix,
		EnvironFunc: func() []string { return environ },
		TransformFunc: func(name, value string) (string, any) {
			key := strings.ToLower(strings.TrimPrefix(name, EnvPrefix))
			key = strings.ReplaceAll(key, "__", ".")
			fromEnv[key] = name
			return key, value
		},
	})
	if err := k.Load(envProvider, nil); err != nil {
		return nil, err
	}
	return fromKoanf(k, fromEnv)
}

// fromKoanf reads every declared key (keys.go), section by section, and
// refuses any other; the error joins one line per problem. fromEnv names
// the environment variable that set a key, for its errors.
func fromKoanf(k *koanf.Koanf, fromEnv map[string]string) (*Config, error) {
	r := &reader{k: k, clusters: k.MapKeys("clusters"), seen: map[string]string{}, fromEnv: fromEnv}
	slices.Sort(r.clusters)
	r.unknownKeys()
	cfg := &Config{}
	for _, key := range topKeys {
		key.read(r, cfg)
	}
	cfg.Clusters = r.readClusters()
	r.hostNameLengths(cfg)
	if len(r.errs) > 0 {
		return nil, errors.Join(r.errs...)
	}
	return cfg, nil
}

func unwrapPathError(err error) error {
	var msg = err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 && strings.Contains(msg, "no such file") {
		return errors.New(msg[i+2:])
	}
	return err
}
