package config

import (
	"strings"
	"testing"
)

func TestHostNames(t *testing.T) {
	cfg, err := Load(write(t, `
clusters:
  main:
    hosts: [127.0.0.11:5432, 127.0.0.12:5432, "[::1]:5433"]
    names:
      pg-1: 127.0.0.11:5432
`), []string{"PGDNS_CLUSTERS__MAIN__NAMES__PG2=127.0.0.12:5432"})
	if err != nil {
		t.Fatal(err)
	}
	names := cfg.Clusters[0].Names
	if len(names) != 2 || names["127.0.0.11:5432"] != "pg-1" || names["127.0.0.12:5432"] != "pg2" {
		t.Fatalf("names %v", names)
	}
	// Backward compatible: a plain host list takes no names.
	cfg, err = Load(write(t, minimal), nil)
	if err != nil || cfg.Clusters[0].Names != nil {
		t.Fatalf("%v, %v", cfg.Clusters[0].Names, err)
	}
}

func TestHostNamesBadInput(t *testing.T) {
	for _, tc := range []struct{ names, want string }{
		{"pg_1: 127.0.0.11:5432", `clusters.main.names.pg_1 is not a valid host label`},
		{"-pg: 127.0.0.11:5432", `clusters.main.names.-pg is not a valid host label`},
		{"pg1: 127.0.0.99:5432", `clusters.main.names.pg1 names host "127.0.0.99:5432", which is not in clusters.main.hosts`},
		{"pg1: 127.0.0.11:5432\n      pg2: 127.0.0.11:5432", `clusters.main.names.pg2 gives host "127.0.0.11:5432" a second name; it is already "pg1"`},
		{"127-0-0-12-5432: 127.0.0.11:5432", `clusters.main.names.127-0-0-12-5432 would give hosts "127.0.0.11:5432" and "127.0.0.12:5432" one name, 127-0-0-12-5432.host.main: give one of them another in clusters.main.names`},
		{"pg1: [127.0.0.11:5432]", `clusters.main.names.pg1 must be a string`},
	} {
		_, err := Load(write(t, "clusters:\n  main:\n    hosts: [127.0.0.11:5432, 127.0.0.12:5432]\n    names:\n      "+tc.names+"\n"), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("names %q: %v; want %q", tc.names, err, tc.want)
		}
	}
	// Two hosts whose addresses derive one label: the key is hosts.
	_, err := Load(write(t, "clusters:\n  main:\n    hosts: [pg_1:5432, pg-1:5432]\n"), nil)
	if want := `clusters.main.hosts would give hosts "pg_1:5432" and "pg-1:5432" one name, pg-1-5432.host.main: give one of them another in clusters.main.names`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("two derived labels alike: %v", err)
	}
	_, err = Load(write(t, "clusters:\n  main:\n    hosts: [127.0.0.11:5432]\n    names: pg1\n"), nil)
	if err == nil || !strings.Contains(err.Error(), `clusters.main.names must map host labels to host:port, got "pg1"`) {
		t.Errorf("names not a map: %v", err)
	}
}

func TestPortWarning(t *testing.T) {
	cfg, err := Load(write(t, `
clusters:
  main:
    hosts: [127.0.0.11:5432, 127.0.0.11:5433, 127.0.0.12:5432, 127.0.0.13:5433, 127.0.0.14:5432]
  other:
    hosts: [127.0.0.21:5432, 127.0.0.22:5433]
    port: 5433
  fine:
    hosts: [127.0.0.31:6432, 127.0.0.32:6432]
dns:
  default_cluster: main
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(cfg.Warnings(), "\n")
	want := "clusters.fine" // sorted: fine, main, other; fine has none
	if strings.Contains(got, want) {
		t.Errorf("warned of a cluster on one port: %s", got)
	}
	for _, w := range []string{
		"clusters.main: 127.0.0.11:5432, 127.0.0.11:5433 share an address on different ports: answered by SRV only (_postgresql._tcp.<name>), never by A or AAAA, whatever the client port (give each its own address); " +
			"hosts are not all on port 5432 (the port of its A and AAAA answers, the one most hosts share, which adding or removing a host can change; set clusters.main.port to keep it): 127.0.0.13:5433 answered by SRV only (_postgresql._tcp.<name>)",
		"clusters.other: hosts are not all on port 5433 (the port of its A and AAAA answers, clusters.other.port): 127.0.0.21:5432 answered by SRV only (_postgresql._tcp.<name>)",
	} {
		if !strings.Contains(got, w) {
			t.Errorf("warnings:\n%s\nwant the line\n%s", got, w)
		}
	}
	if len(cfg.Warnings()) != 2 {
		t.Errorf("%d warnings, want one line per cluster", len(cfg.Warnings()))
	}
	for _, bad := range []string{"0", "65536", "x"} {
		_, err := Load(write(t, "clusters:\n  main:\n    hosts: [127.0.0.11:5432]\n    port: "+bad+"\n"), nil)
		if err == nil || !strings.Contains(err.Error(), "clusters.main.port must be an integer from 1 to 65535") {
			t.Errorf("port %s: %v", bad, err)
		}
	}
}

// A host name longer than DNS allows is refused at load, naming the key
// and the length (review S9: -check said OK, and every SRV answer naming
// the host was a malformed packet); a Patroni cluster must leave room for
// any label an address gives.
func TestHostNameTooLong(t *testing.T) {
	z := strings.Repeat("a", 50) + "." + strings.Repeat("a", 50) + "." + strings.Repeat("a", 50) + ".local"
	c, h := strings.Repeat("c", 60), strings.Repeat("h", 63)
	_, err := Load(write(t, "dns:\n  zone: "+z+"\nclusters:\n  "+c+":\n    hosts: [127.0.0.23:5432, 127.0.0.24:5432]\n    names:\n      "+h+": 127.0.0.24:5432\n"), nil)
	want := "clusters." + c + ".names." + h + ` gives host "127.0.0.24:5432" the host name ` + h + ".host." + c + "." + z + ", which is 290 octets; DNS allows 255"
	if err == nil || !strings.Contains(err.Error(), want) || strings.Count(err.Error(), "\n") != 0 {
		t.Errorf("a long given label: %v\nwant one line %q", err, want)
	}
	// The derived labels fit (127-0-0-23-5432: 244 octets).
	_, err = Load(write(t, "dns:\n  zone: "+z+"\nclusters:\n  "+c+":\n    hosts: [127.0.0.23:5432, 127.0.0.24:5432]\n"), nil)
	if err != nil {
		t.Errorf("host names of 244 octets: %v", err)
	}
	// A derived label that does not fit: the key is hosts.
	c2 := strings.Repeat("c", 63)
	_, err = Load(write(t, "dns:\n  zone: "+z+"\nclusters:\n  "+c2+":\n    hosts: [\"[2001:db8:aaaa:bbbb:cccc:dddd:eeee:ffff]:5432\"]\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "clusters."+c2+`.hosts gives host "[2001:db8:aaaa:bbbb:cccc:dddd:eeee:ffff]:5432" the host name 2001-db8-aaaa-bbbb-cccc-dddd-eeee-ffff-5432.host.`) {
		t.Errorf("a long derived label: %v", err)
	}
	_, err = Load(write(t, "dns:\n  zone: "+z+"\nclusters:\n  "+c+":\n    patroni: [\"http://127.0.0.1:8008\"]\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "clusters."+c+".patroni needs room for host labels of 45 octets") {
		t.Errorf("a Patroni cluster with no room for a derived label: %v", err)
	}
}
