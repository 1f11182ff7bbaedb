package test

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/pgdns/pgdns/internal/app"
	"github.com/pgdns/pgdns/internal/config"
	"github.com/pgdns/pgdns/internal/testkit"
)

// composeFile is the part of `docker-compose config` output the test reads.
type composeFile struct {
	Services map[string]struct {
		Build struct {
			Args map[string]string `yaml:"args"`
		} `yaml:"build"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []any             `yaml:"volumes"`
		DNS         []string          `yaml:"dns"`
		Networks    map[string]struct {
			IPv4Address string `yaml:"ipv4_address"`
		} `yaml:"networks"`
	} `yaml:"services"`
}

// No Docker engine runs here, so docker-compose.yml is validated by
// docker-compose itself, and its pgdns settings by pgdns's own loader, and
// checked against the settings the tests run with.
func TestDockerCompose(t *testing.T) {
	t.Parallel()
	bin := testkit.RequireTool(t, "docker-compose")
	cmd := exec.Command(bin, "-f", "../docker-compose.yml", "config")
	cmd.Env = append(os.Environ(), "VERSION=v1.2.3-test")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("docker-compose config: %v\n%s", err, out)
	}
	var cf composeFile
	if err := yaml.Unmarshal(out, &cf); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"pg-primary", "pg-replica1", "pg-replica2", "pgdns", "coredns", "client"} {
		if _, ok := cf.Services[name]; !ok {
			t.Errorf("service %s missing", name)
		}
	}

	// pgdns: the image's config file with the compose environment on top
	// must load, and match what the tests use.
	var environ []string
	for k, v := range cf.Services["pgdns"].Environment {
		environ = append(environ, k+"="+v)
	}
	cfg, err := config.Load("../configs/pgdns.yaml", environ)
	if err != nil {
		t.Fatalf("pgdns settings in docker-compose.yml: %v", err)
	}
	if err := app.Check(cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.DNS.Zone != "db.local" || cfg.DNS.TTL != 1 || cfg.DNS.LSNWait != 20*time.Millisecond ||
		cfg.Probe.Interval != 250*time.Millisecond || cfg.Probe.MaxFails != 3 || cfg.Probe.Timeout != time.Second {
		t.Errorf("pgdns settings differ from the tests': %+v %+v", cfg.DNS, cfg.Probe)
	}
	// The image is stamped with the version compose is given, which the
	// Dockerfile passes to the linker.
	if got := cf.Services["pgdns"].Build.Args["VERSION"]; got != "v1.2.3-test" {
		t.Errorf("pgdns's build arg VERSION = %q, want the environment's v1.2.3-test", got)
	}
	if b, err := os.ReadFile("../Dockerfile"); err != nil || !strings.Contains(string(b), "-X main.version=${VERSION}") {
		t.Errorf("the Dockerfile does not stamp VERSION (%v)", err)
	}
	// The probe role, created on the primary by replication.sh.
	if !strings.Contains(cfg.Probe.DSN, "user=pgdns ") {
		t.Errorf("probe.dsn %q does not probe as pgdns", cfg.Probe.DSN)
	}
	if b, err := os.ReadFile("../configs/docker/replication.sh"); err != nil || !strings.Contains(string(b), "CREATE ROLE pgdns LOGIN") || !strings.Contains(string(b), "GRANT pg_monitor TO pgdns") {
		t.Errorf("replication.sh does not create the probe role (%v)", err)
	}
	if want := []string{"pg-primary:5432", "pg-replica1:5432", "pg-replica2:5432"}; !slices.Equal(cfg.Clusters[0].Hosts, want) {
		t.Errorf("hosts %v, want %v", cfg.Clusters[0].Hosts, want)
	}

	// CoreDNS forwards to pgdns's address and port, with the Corefile the
	// CoreDNS test runs; the client resolves through CoreDNS.
	pgdnsIP := cf.Services["pgdns"].Networks["db"].IPv4Address
	// The NS target has the address pgdns is reached at.
	if ns := cfg.DNS.NameServers; len(ns) != 1 || len(ns[0].Addrs) != 1 || ns[0].Addrs[0].String() != pgdnsIP {
		t.Errorf("dns.nameservers %+v, want one with pgdns's address %s", ns, pgdnsIP)
	}
	coredns := cf.Services["coredns"]
	_, port, _ := strings.Cut(cfg.DNS.Listen, ":")
	if got := coredns.Environment["PGDNS_ADDR"]; got != pgdnsIP+":"+port {
		t.Errorf("CoreDNS forwards to %q, pgdns listens on %s:%s", got, pgdnsIP, port)
	}
	if !strings.Contains(string(out), "configs/Corefile:/etc/coredns/Corefile") {
		t.Error("CoreDNS does not use configs/Corefile")
	}
	if dns := cf.Services["client"].DNS; len(dns) != 1 || dns[0] != coredns.Networks["db"].IPv4Address {
		t.Errorf("client resolves through %v, CoreDNS is at %s", dns, coredns.Networks["db"].IPv4Address)
	}
	for _, f := range []string{"../Dockerfile", "../configs/docker/replica.sh", "../configs/docker/replication.sh"} {
		if _, err := os.Stat(f); err != nil {
			t.Error(err)
		}
	}
}
