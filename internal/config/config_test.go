package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func write(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pgdns.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const minimal = `
clusters:
  main:
    hosts: [127.0.0.11:5432, 127.0.0.12:5432]
`

func TestDefaults(t *testing.T) {
	cfg, err := Load(write(t, minimal), nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DNS.Listen != "127.0.0.1:5353" || cfg.DNS.Zone != "db.local" || cfg.DNS.TTL != 1 ||
		cfg.DNS.DefaultCluster != "main" || cfg.DNS.LSNWait != 20*time.Millisecond ||
		cfg.HTTP.Listen != "127.0.0.1:8080" || cfg.Probe.Interval != 250*time.Millisecond ||
		cfg.Probe.Timeout != time.Second || cfg.Probe.MaxFails != 3 || cfg.Probe.DSN != "user=postgres dbname=postgres" {
		t.Fatalf("defaults: %+v", cfg)
	}
	if len(cfg.Clusters) != 1 || len(cfg.Clusters[0].Hosts) != 2 || cfg.Clusters[0].AsyncOnly {
		t.Fatalf("clusters: %+v", cfg.Clusters)
	}
}

func TestExampleConfigIsValid(t *testing.T) {
	cfg, err := Load("../../configs/pgdns.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Clusters) == 0 {
		t.Fatal("the example has no cluster")
	}
}

func TestEnvironmentOverrides(t *testing.T) {
	cfg, err := Load(write(t, minimal), []string{
		"PGDNS_PROBE__INTERVAL=100ms",
		"PGDNS_DNS__TTL=0",
		"PGDNS_HTTP__LISTEN=",
		"PGDNS_CLUSTERS__MAIN__HOSTS=127.0.0.21:5432, 127.0.0.22:5432",
		"PGDNS_CLUSTERS__MAIN__REPLICAS=async",
		"OTHER_THING=1",
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Probe.Interval != 100*time.Millisecond || cfg.DNS.TTL != 0 || cfg.HTTP.Listen != "" {
		t.Fatalf("overrides not applied: %+v", cfg)
	}
	if h := cfg.Clusters[0].Hosts; len(h) != 2 || h[1] != "127.0.0.22:5432" || !cfg.Clusters[0].AsyncOnly {
		t.Fatalf("cluster override: %+v", cfg.Clusters[0])
	}
}

func TestErrorsNameTheKeyAndQuoteTheValue(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown key", minimal + "dns:\n  listn: x\n", []string{`dns.listn is not a known key (value "x")`}},
		{"unknown cluster key", "clusters:\n  main:\n    hosts: [a:1]\n    hots: [b:1]\n", []string{`clusters.main.hots is not a known key`}},
		{"bad duration", minimal + "probe:\n  interval: fast\n", []string{`probe.interval must be a duration such as 250ms or 2s, got "fast"`}},
		{"zero interval", minimal + "probe:\n  interval: 0s\n", []string{`probe.interval must be > 0, got "0s"`}},
		{"nonsense durations", minimal + "probe:\n  interval: 1ns\n  timeout: 9ms\ndns:\n  lsn_refresh_min_gap: 1ns\n", []string{
			`probe.interval must be at least 10ms, got "1ns"`,
			`probe.timeout must be at least 10ms, got "9ms"`,
			`dns.lsn_refresh_min_gap must be at least 1ms, got "1ns"`}},
		{"number without unit", minimal + "probe:\n  timeout: 5\n", []string{`probe.timeout must be a duration with a unit, such as 250ms, got "5"`}},
		{"ttl out of range", minimal + "dns:\n  ttl: 90\n", []string{`dns.ttl must be an integer from 0 to 60, got "90"`}},
		{"ttl not a number", minimal + "dns:\n  ttl: one\n", []string{`dns.ttl must be an integer from 0 to 60, got "one"`}},
		{"bad zone", minimal + "dns:\n  zone: 'db..local'\n", []string{`dns.zone must be a domain name such as db.local, got "db..local"`}},
		{"bad listen", minimal + "dns:\n  listen: localhost\n", []string{`dns.listen must be host:port, got "localhost"`}},
		{"max fails", minimal + "probe:\n  max_fails: 0\n", []string{`probe.max_fails must be an integer from 1 to 1000, got "0"`}},
		{"duplicate host", "clusters:\n  a:\n    hosts: [h:1]\n  b:\n    hosts: [h:1]\ndns:\n  default_cluster: a\n", []string{`clusters.b.hosts[0] repeats host "h:1", already in clusters.a`}},
		{"host without port", "clusters:\n  main:\n    hosts: [db1]\n", []string{`clusters.main.hosts[0] must be host:port, got "db1": the port is missing (host:port)`}},
		{"ports out of range", "clusters:\n  main:\n    hosts: [\"db1:99999\", \"db2:0\"]\n", []string{
			`clusters.main.hosts[0] must be host:port, got "db1:99999": the port must be a number from 1 to 65535`,
			`clusters.main.hosts[1] must be host:port, got "db2:0": the port must be a number from 1 to 65535`}},
		{"hosts carrying keywords", "clusters:\n  main:\n    hosts: [\"10.0.0.60' sslmode='disable:5432\", \"db 1:5432\", \"db=1:5432\", 'db\\1:5432', \"db1:5432 sslmode=disable\"]\n", []string{
			`clusters.main.hosts[0] must be host:port, got "10.0.0.60' sslmode='disable:5432": the host must be an IP address or a DNS name`,
			`clusters.main.hosts[1] must be host:port, got "db 1:5432": the host must be an IP address or a DNS name`,
			`clusters.main.hosts[2] must be host:port, got "db=1:5432": the host must be an IP address or a DNS name`,
			`clusters.main.hosts[3] must be host:port, got "db\\1:5432": the host must be an IP address or a DNS name`,
			`clusters.main.hosts[4] must be host:port, got "db1:5432 sslmode=disable": the port must be a number from 1 to 65535`}},
		{"listen port out of range", minimal + "http:\n  listen: 127.0.0.1:65536\n", []string{`http.listen must be host:port, got "127.0.0.1:65536": the port must be a number from 0 to 65535`}},
		{"cluster named like a role", "clusters:\n  primary:\n    hosts: [h:1]\n", []string{`clusters.primary is not a valid cluster name`}},
		{"cluster named like a filter", "clusters:\n  lag-5ms:\n    hosts: [h:1]\n", []string{`clusters.lag-5ms is not a valid cluster name`}},
		{"no clusters", "dns:\n  ttl: 1\n", []string{`clusters must define at least one cluster`}},
		{"empty cluster", "clusters:\n  main:\n    replicas: all\n", []string{`clusters.main.hosts must list at least one host:port`}},
		{"bad replicas", "clusters:\n  main:\n    hosts: [h:1]\n    replicas: some\n", []string{`clusters.main.replicas must be all or async, got "some"`}},
		{"bad system identifier", "clusters:\n  main:\n    hosts: [h:1]\n    system_identifier: 12ab\n", []string{`clusters.main.system_identifier must be a system identifier (digits, as pg_control_system() prints it), got "12ab"`}},
		{"bad patroni", "clusters:\n  main:\n    patroni: [ftp://x]\n", []string{`clusters.main.patroni[0] must be an http or https URL, got "ftp://x"`}},
		{"no default", "clusters:\n  a:\n    hosts: [h:1]\n  b:\n    hosts: [i:1]\n", []string{`dns.default_cluster must be set when there is more than one cluster`}},
		{"unknown default", minimal + "dns:\n  default_cluster: other\n", []string{`dns.default_cluster must name a cluster in clusters, got "other"`}},
		{"every error at once", minimal + "dns:\n  ttl: 99\nprobe:\n  interval: x\n  timeout: y\n", []string{"dns.ttl", "probe.interval", "probe.timeout"}},
		{"allowed host with a port", minimal + "http:\n  allowed_hosts: [pgdns.svc:8080]\n", []string{`http.allowed_hosts[0] must be a host name such as pgdns.monitoring.svc (no port, no scheme), got "pgdns.svc:8080"`}},
		{"allowed host as a URL", minimal + "http:\n  allowed_hosts: [ok.svc, 'http://x']\n", []string{`http.allowed_hosts[1] must be a host name`}},
		{"max conns", minimal + "http:\n  max_conns: 0\n", []string{`http.max_conns must be an integer from 1 to 100000, got "0"`}},
		{"yaml syntax", "dns: [", []string{`file "`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(write(t, tc.yaml), nil)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if line == "" {
					t.Errorf("empty line in %q", err)
				}
			}
		})
	}
}

func TestMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"), nil)
	if err == nil || !strings.Contains(err.Error(), "nope.yaml") || strings.Count(err.Error(), "\n") > 0 {
		t.Fatalf("err = %v", err)
	}
}

// The canary password never reaches an error, whatever shape carries it
// (issue 29, item 7): a key named password, a DSN written as a map, a
// password holding a double quote or a backslash, the URL form with and
// without a host, values from the environment. Each error still names the
// key and shows where the secret was.
func TestErrorsNeverQuotePasswords(t *testing.T) {
	const canary = "canary-0xC0FFEE"
	cases := []struct {
		name, yaml string
		env        []string
		want       []string
	}{
		{"keyword/value", "probe:\n  dsm: \"user=app password=" + canary + "\"\n", nil,
			[]string{`probe.dsm is not a known key (value "user=app password=REDACTED")`}},
		{"URL in another key", "probe:\n  interval: \"postgres://app:" + canary + "@db/x\"\n", nil,
			[]string{`probe.interval must be a duration such as 250ms or 2s, got "postgres://app:REDACTED@db/x"`}},
		{"URL without host", "probe:\n  timeout: \"postgres://u:" + canary + "@/db\"\n", nil,
			[]string{`probe.timeout must be a duration such as 250ms or 2s, got "postgres://u:REDACTED@/db"`}},
		{"URL query", "probe:\n  timeout: \"postgres://u@/db?password=" + canary + "\"\n", nil,
			[]string{`got "postgres://u@/db?password=REDACTED"`}},
		{"a key named password", "probe:\n  password: " + canary + "\n", nil,
			[]string{`probe.password is not a known key (value "REDACTED")`}},
		{"a DSN written as a map", "probe:\n  dsn: {password: " + canary + ", user: probe}\n", nil,
			[]string{`probe.dsn must be a string, got "map[password:REDACTED user:probe]"`, `probe.dsn.password is not a known key (value "REDACTED")`}},
		{"a double quote in the password", "probe:\n  dsm: 'user=app password=ab\"" + canary + " dbname=x'\n", nil,
			[]string{`probe.dsm is not a known key (value "user=app password=REDACTED dbname=x")`}},
		{"a quoted password with quotes", "probe:\n  dsm: \"user=app password='a\\\\'\\\"" + canary + "' dbname=x\"\n", nil,
			[]string{`probe.dsm is not a known key (value "user=app password=REDACTED dbname=x")`}},
		{"a password in a list", "probe:\n  interval: [\"user=a password=" + canary + "\"]\n", nil,
			[]string{`probe.interval must be a duration such as 250ms, got "[user=a password=REDACTED]"`}},
		{"an unterminated quote", "probe:\n  dsm: \"user=app password='" + canary + "\"\n", nil,
			[]string{`probe.dsm is not a known key (value "user=app password=REDACTED (the rest cannot be read as a DSN)")`}},
		{"from the environment", "", []string{"PGDNS_PROBE__PASSWORD=" + canary, "PGDNS_PROBE__INTERVAL=postgres://u:" + canary + "@h/db"},
			[]string{`probe.password is not a known key (value "REDACTED")`, `probe.interval must be a duration such as 250ms or 2s, got "postgres://u:REDACTED@h/db"`}},
	}
	for _, tc := range cases {
		_, err := Load(write(t, minimal+tc.yaml), tc.env)
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		if strings.Contains(err.Error(), canary) || strings.Contains(err.Error(), "C0FFEE") {
			t.Errorf("%s: the password reached the error: %v", tc.name, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", tc.name, err, w)
			}
		}
	}
}

// dns.lsn_refresh_min_gap bounds the probes lsn- lookups can cause: a gap
// of 0 would let them probe back to back, so it is refused like any bad
// value, naming the key and quoting the value.
func TestLSNRefreshMinGap(t *testing.T) {
	cfg, err := Load(write(t, minimal), nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DNS.LSNRefreshMinGap != DefaultLSNRefreshMinGap || DefaultLSNRefreshMinGap <= 0 {
		t.Fatalf("default dns.lsn_refresh_min_gap %v, want %v", cfg.DNS.LSNRefreshMinGap, DefaultLSNRefreshMinGap)
	}
	cfg, err = Load(write(t, minimal+"dns:\n  lsn_refresh_min_gap: 50ms\n"), []string{"PGDNS_DNS__LSN_REFRESH_MIN_GAP=20ms"})
	if err != nil || cfg.DNS.LSNRefreshMinGap != 20*time.Millisecond {
		t.Fatalf("from the environment: %v, %v", cfg, err)
	}
	for value, want := range map[string]string{
		"0s":    `dns.lsn_refresh_min_gap must be > 0, got "0s"`,
		"fast":  `dns.lsn_refresh_min_gap must be a duration such as 250ms or 2s, got "fast"`,
		"-1ms":  `dns.lsn_refresh_min_gap must be > 0, got "-1ms"`,
		"11s":   `dns.lsn_refresh_min_gap must be at most 10s, got "11s"`,
		"1ns":   `dns.lsn_refresh_min_gap must be at least 1ms, got "1ns"`,
		"999us": `dns.lsn_refresh_min_gap must be at least 1ms, got "999us"`,
	} {
		_, err := Load(write(t, minimal+"dns:\n  lsn_refresh_min_gap: "+value+"\n"), nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("lsn_refresh_min_gap %s: error %v, want %q", value, err, want)
		}
	}
}

func TestSystemIdentifierPin(t *testing.T) {
	for name, yaml := range map[string]string{
		"YAML number": minimal + "    system_identifier: 7000000000000000001\n",
		"string":      minimal + "    system_identifier: \"7000000000000000001\"\n",
	} {
		cfg, err := Load(write(t, yaml), nil)
		if err != nil || cfg.Clusters[0].SystemID != 7000000000000000001 {
			t.Errorf("%s: %v, %v", name, cfg, err)
		}
	}
	cfg, err := Load(write(t, minimal), []string{"PGDNS_CLUSTERS__MAIN__SYSTEM_IDENTIFIER=7000000000000000002"})
	if err != nil || cfg.Clusters[0].SystemID != 7000000000000000002 {
		t.Fatalf("from the environment: %v, %v", cfg, err)
	}
	if cfg, err := Load(write(t, minimal), nil); err != nil || cfg.Clusters[0].SystemID != 0 {
		t.Fatalf("unpinned: %v, %v", cfg, err)
	}
}

// min_timeline is a timeline of the pinned cluster: without
// system_identifier it means nothing and is refused.
func TestMinTimeline(t *testing.T) {
	pinned := minimal + "    system_identifier: 7000000000000000001\n"
	cfg, err := Load(write(t, pinned+"    min_timeline: 3\n"), nil)
	if err != nil || cfg.Clusters[0].MinTimeline != 3 {
		t.Fatalf("pinned with min_timeline 3: %v, %v", cfg, err)
	}
	if cfg, err := Load(write(t, minimal+"    min_timeline: 0\n"), nil); err != nil || cfg.Clusters[0].MinTimeline != 0 {
		t.Errorf("min_timeline 0 (none) without a pin: %v, %v", cfg, err)
	}
	for yaml, want := range map[string]string{
		minimal + "    min_timeline: 2\n": `clusters.main.min_timeline needs clusters.main.system_identifier: a timeline belongs to one cluster, got "2"`,
		pinned + "    min_timeline: -1\n": `clusters.main.min_timeline must be an integer from 0 to 4294967295, got "-1"`,
		pinned + "    min_timeline: x\n":  `clusters.main.min_timeline must be an integer from 0 to 4294967295, got "x"`,
	} {
		if _, err := Load(write(t, yaml), nil); err == nil || err.Error() != want {
			t.Errorf("error %v, want %q", err, want)
		}
	}
}

// The floors of probe.interval, probe.timeout and dns.lsn_refresh_min_gap
// are values that load.
func TestDurationFloorsLoad(t *testing.T) {
	cfg, err := Load(write(t, minimal+"probe:\n  interval: 10ms\n  timeout: 10ms\ndns:\n  lsn_refresh_min_gap: 1ms\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Probe.Interval != minProbeInterval || cfg.Probe.Timeout != minProbeTimeout || cfg.DNS.LSNRefreshMinGap != minLSNRefreshGap {
		t.Fatalf("%v %v %v", cfg.Probe.Interval, cfg.Probe.Timeout, cfg.DNS.LSNRefreshMinGap)
	}
}
