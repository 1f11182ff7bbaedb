package probe

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgpassfile"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgdns/pgdns/zone"
)

// The probe DSN is parsed once, by pgx, and each host's connection config
// is that parse with the host's address set on it, field by field. A host
// is never written into a connection string: a host from Patroni's
// /cluster or from the configuration could otherwise carry keywords of its
// own (10.0.0.60' sslmode='disable turned verify-full off, and a server
// there was handed the password in clear text).

// standIn is the host the DSN is parsed with, so that pgx builds the TLS
// configs of a TCP host (a DSN without host would get the Unix socket,
// which has none) and marks with this name the server name it derived
// from the host. It is a name that never resolves (RFC 6761 .invalid),
// and every host's config replaces it.
const standIn = "pgdns-probe-dsn.invalid"

// PostgresCheckers returns a NewCheckerFunc that probes hosts with pgx,
// using dsn (libpq keyword/value or URL, without host) for everything but
// the host and port. It fails at once on a DSN pgx cannot parse, and each
// checker on an address that is not host:port (zone.ParseHostPort).
// Options apply to every checker it makes.
func PostgresCheckers(dsn string, opts ...CheckerOption) (NewCheckerFunc, error) {
	base, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	// pgx read the passfile for the stand-in host: only its lines for
	// host * matched. Each host's own lines are looked up in the default
	// passfile; one the DSN names (passfile=) cannot be known here, and is
	// left to pgx.
	var passfile *pgpassfile.Passfile
	if base.Password == "" && !strings.Contains(dsn, "passfile") {
		passfile = defaultPassfile()
	}
	configs := newHostConfigs(base, passfile)
	return func(addr string) (Checker, error) {
		host, port, err := zone.ParseHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("host %q: %w", addr, err)
		}
		c := &pgChecker{configs: configs, host: host, port: port, admitEvery: DefaultAdmissionInterval}
		for _, o := range opts {
			o(c)
		}
		return c, nil
	}, nil
}

var errNamesHost = errors.New("must not name a host: pgdns connects to each host of the clusters")

// targetSessionAttrsError says where the target_session_attrs pgx found
// came from: dsn, or else pgdns's environment.
func targetSessionAttrsError(dsn string) error {
	where := "must not set target_session_attrs"
	if !strings.Contains(dsn, "target_session_attrs") {
		where = "is given target_session_attrs by PGTARGETSESSIONATTRS in pgdns's environment"
	}
	return fmt.Errorf("%s (only any is allowed): pgdns probes every host whatever its role, and it would refuse the sessions of the hosts of the other role", where)
}

// connConfig is a probe connection's config: pgconn's. (pgx.ConnConfig,
// which it replaced, wrapped it with the statement cache and query mode of
// pgx.Conn, which the probe never used, and took pgx's type system, 2 MB,
// into the binary: issue 28.)
type connConfig struct{ pgconn.Config }

// parseDSN parses dsn for the stand-in host, refusing a DSN that names a
// host of its own: pgdns connects to each configured host, and a host in
// the DSN would decide where the TLS configs point.
func parseDSN(dsn string) (*connConfig, error) {
	var full string
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil { // its error would quote a password
			return nil, fmt.Errorf("cannot parse %q as a URL", zone.Redact("probe.dsn", dsn))
		}
		if u.Hostname() != "" {
			return nil, errNamesHost
		}
		u.Host = standIn
		q := u.Query()
		q.Del("port") // every host's port replaces it
		u.RawQuery = q.Encode()
		full = u.String()
	} else {
		// The stand-in goes first, so that no trailing backslash or
		// quote of dsn can take it into a value; a host= of dsn's own
		// comes after it and wins, and is refused below.
		full = "host=" + standIn + " " + dsn
	}
	pc, err := pgconn.ParseConfig(full)
	if err != nil {
		return nil, parseError(dsn, err)
	}
	// pgx's own settings, which pgx.ParseConfig took out of the startup
	// parameters: the probe never had a use for them (one round trip per
	// probe, no statement cache), and the server would refuse them.
	for _, k := range []string{"statement_cache_capacity", "description_cache_capacity", "default_query_exec_mode"} {
		delete(pc.RuntimeParams, k)
	}
	cfg := &connConfig{Config: *pc}
	if cfg.Host != standIn {
		return nil, errNamesHost
	}
	for _, f := range cfg.Fallbacks {
		if f.Host != standIn {
			return nil, errNamesHost
		}
	}
	// pgx turns target_session_attrs into a check of every new session,
	// which refuses the servers of the other role: with read-write every
	// replica was down ("read only connection") and, a majority of the
	// hosts down, nothing was answered at all.
	if cfg.ValidateConnect != nil {
		return nil, targetSessionAttrsError(dsn)
	}
	// replication=database (or true) makes the server start a WAL sender,
	// which refuses the probe's prepared statement (08P01: "extended
	// query protocol not supported in a replication connection"): every
	// host was down, and each session took a max_wal_senders slot.
	if _, ok := cfg.RuntimeParams["replication"]; ok {
		return nil, errors.New("must not set replication: the probe's statements need an ordinary session, which a replication connection is not")
	}
	if _, ok := cfg.RuntimeParams["application_name"]; !ok {
		cfg.RuntimeParams["application_name"] = "pgdns"
	}
	// The probe's statements name pg_catalog's objects with their schema
	// (probeSQL); the search_path is pg_catalog as well, so that nothing
	// pgdns sends resolves a name in a schema that a role or database
	// setting put first (ALTER ROLE pgdns SET search_path = ...). A
	// startup parameter outranks both; the DSN cannot change it.
	cfg.RuntimeParams["search_path"] = "pg_catalog"
	// The same for the settings that would stop the probe's statements or
	// end its session (review 5, F9): with ALTER ROLE pgdns SET
	// statement_timeout = '1ms' every host was down (57014 at prepare),
	// with idle_session_timeout = '50ms' the server ended the session
	// between two probes and the host flapped. The probe keeps its own
	// deadline (probe.timeout). default_transaction_read_only is not
	// pinned: it is the server's to set, not the probe's. Nor is
	// default_transaction_isolation, which a hot standby at serializable
	// refuses every query at: the session sets it to read committed with
	// a SET before its first statement (isolationSetSQL), so that the
	// value a new client session gets stays readable (shadow.go), which a
	// startup parameter would hide (review 8, R8-8). A DSN's own
	// default_transaction_isolation would hide it too: dropped.
	for k, v := range pinnedSettings {
		cfg.RuntimeParams[k] = v
	}
	delete(cfg.RuntimeParams, isolationSetting)
	// Know why a connection broke, when pgx's error does not say (socket.go).
	recordFailures(&cfg.Config)
	return cfg, nil
}

// pinnedSettings are the startup parameters every probe session starts
// with, whatever the role, the database or probe.dsn say (a startup
// parameter outranks role and database settings; these replace the DSN's
// own). idle_session_timeout came with PostgreSQL 14: an older server
// refuses a session that names a setting it does not know, so pgdns probes
// PostgreSQL 14 or later (docs/operating.md, the probe role).
var pinnedSettings = map[string]string{
	"statement_timeout":                   "0",
	"lock_timeout":                        "0",
	"idle_in_transaction_session_timeout": "0",
	"idle_session_timeout":                "0",
}

// hostConfigs makes each host's connection config from base, the DSN
// parsed for the stand-in host. A thousand hosts share what is the same
// for all of them: the config pgx.ConnConfig.Copy would clone per host
// (the runtime parameters' map, a TLS config per fallback) cost about a
// KiB a host, and pgconn and the admission check only read it.
type hostConfigs struct {
	base     *connConfig
	passfile *pgpassfile.Passfile
	tls      hostTLS   // base.TLSConfig's
	fallback []hostTLS // base.Fallbacks' TLS configs', in order
}

func newHostConfigs(base *connConfig, passfile *pgpassfile.Passfile) *hostConfigs {
	hc := &hostConfigs{base: base, passfile: passfile, tls: newHostTLS(base.TLSConfig)}
	for _, f := range base.Fallbacks {
		hc.fallback = append(hc.fallback, newHostTLS(f.TLSConfig))
	}
	return hc
}

// forHost is the base made the config of host and port: the address, and
// the TLS server name pgx derived from the host, in the main config and in
// every fallback (sslmode=prefer and allow make two: with TLS and
// without). A password the DSN and the environment left out is looked up
// for this host in passfile, as pgx would have. The runtime parameters'
// map is base's, shared: nothing writes it after parseDSN.
func (hc *hostConfigs) forHost(host string, port uint16) *connConfig {
	cfg := new(connConfig)
	*cfg = *hc.base
	cfg.Host, cfg.Port = host, port
	cfg.TLSConfig = hc.tls.forHost(host)
	if len(hc.base.Fallbacks) > 0 {
		fs := make([]pgconn.FallbackConfig, len(hc.base.Fallbacks))
		cfg.Fallbacks = make([]*pgconn.FallbackConfig, len(fs))
		for i := range fs {
			fs[i] = pgconn.FallbackConfig{Host: host, Port: port, TLSConfig: hc.fallback[i].forHost(host)}
			cfg.Fallbacks[i] = &fs[i]
		}
	}
	if cfg.Password == "" && hc.passfile != nil {
		cfg.Password = hc.passfile.FindPassword(host, strconv.Itoa(int(port)), cfg.Database, cfg.User)
	}
	return cfg
}

// hostTLS is a TLS config pgx built for the stand-in host, and the one
// every IP address host shares.
type hostTLS struct{ base, ip *tls.Config }

func newHostTLS(tc *tls.Config) hostTLS {
	h := hostTLS{base: tc, ip: tc}
	if tc != nil && tc.ServerName == standIn && tc.InsecureSkipVerify {
		h.ip = tc.Clone()
		h.ip.ServerName = ""
	}
	return h
}

// forHost points the TLS config at host. pgx sets ServerName to the host
// for sslmode=verify-full (the name the certificate must carry, an IP
// address included) and, unless sslsni=0, for SNI when the host is a name
// (RFC 6066: never an IP address). A config that names no host is shared
// (crypto/tls only reads a client's config), and so is the one of every IP
// address host without verify-full; a host name gets a clone of its own.
func (h hostTLS) forHost(host string) *tls.Config {
	tc := h.base
	if tc == nil || tc.ServerName != standIn {
		return tc // no TLS, or neither verify-full nor SNI
	}
	if tc.InsecureSkipVerify && zone.ValidIP(host) {
		return h.ip
	}
	c := tc.Clone()
	c.ServerName = host // verify-full: Go checks the name itself
	return c
}

// config is c's host's connection config, made anew (forHost).
func (c *pgChecker) config() *connConfig { return c.configs.forHost(c.host, c.port) }

// defaultPassfile is the passfile pgx reads when the DSN names none:
// PGPASSFILE, else ~/.pgpass; nil when it cannot be read.
func defaultPassfile() *pgpassfile.Passfile {
	path := os.Getenv("PGPASSFILE")
	if path == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil
		}
		path = filepath.Join(home, ".pgpass")
	}
	pf, err := pgpassfile.ReadPassfile(path)
	if err != nil {
		return nil
	}
	return pf
}

// parseError says why pgx could not parse dsn. pgx's message quotes the
// string it was given (with the stand-in host) as its own redaction saw
// fit; this one quotes dsn through zone.Redact, then pgx's reason. The
// details of a syntax error (pgx's wrapped error) are left out when dsn
// holds a secret: they may quote a piece of it ("missing = after ..." for
// an unquoted password with a space).
func parseError(dsn string, err error) error {
	shown := zone.Redact("probe.dsn", dsn)
	reason := "not libpq keyword/value or a URL"
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		msg := pe.Error()
		if i := strings.LastIndex(msg, "`: "); i >= 0 {
			reason = msg[i+3:]
		}
		if shown != dsn && strings.HasPrefix(reason, "failed to parse as") {
			if i := strings.Index(reason, " ("); i >= 0 {
				reason = reason[:i]
			}
		}
	}
	return fmt.Errorf("cannot parse %q: %s", shown, zone.Redact("", reason))
}
