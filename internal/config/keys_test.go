package config

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

// every sets each key outside clusters to a value other than its zero
// value and its default.
const every = `
dns:
  listen: 127.0.0.2:53
  zone: example.internal
  ttl: 2
  default_cluster: b
  lsn_wait: 30ms
  lsn_refresh_min_gap: 6ms
  rate_limit: 10
  nameservers: [ns1=192.0.2.1]
  locations: {east: [10.1.0.0/16]}
  client_subnet_from: [10.0.0.2/32]
http:
  listen: 127.0.0.2:80
  sync_max_lag: 2s
  sync_max_lag_bytes: 5
  max_conns: 7
  allowed_hosts: [pgdns.example.internal]
  admin_token_file: /etc/pgdns/admin-token
probe:
  interval: 100ms
  timeout: 2s
  max_fails: 4
  dsn: user=x
  flux_interval: 20ms
  flux_duration: 4s
state:
  path: /var/lib/pgdns/state.json
clusters:
  a:
    hosts: [127.0.0.11:5432]
  b:
    hosts: [127.0.0.12:5432]
`

// Each field of DNS, HTTP, Probe and State belongs to exactly one declared key,
// so that none escapes the reload rule or the unknown-key check.
func TestEveryFieldIsDeclared(t *testing.T) {
	full, err := Load(write(t, every), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, section := range []reflect.Value{reflect.ValueOf(full.DNS), reflect.ValueOf(full.HTTP), reflect.ValueOf(full.Probe), reflect.ValueOf(full.State)} {
		for i := range section.NumField() {
			if section.Field(i).IsZero() {
				t.Errorf("%s.%s is not set by the test's config: set it", section.Type().Name(), section.Type().Field(i).Name)
			}
		}
	}
	var got Config
	for _, k := range topKeys {
		before := got
		k.keep(&got, full)
		if reflect.DeepEqual(before, got) {
			t.Errorf("%s sets no field", k.name)
		}
		if k.equal(&before, &got) {
			t.Errorf("%s: equal does not see its own field", k.name)
		}
	}
	if !reflect.DeepEqual(got.DNS, full.DNS) || !reflect.DeepEqual(got.HTTP, full.HTTP) || !reflect.DeepEqual(got.Probe, full.Probe) ||
		!reflect.DeepEqual(got.State, full.State) {
		t.Fatalf("the declared keys cover\n%+v\nnot all of\n%+v", got, full)
	}
}

// A reload applies the keys declared onReload and the clusters, keeps the
// running value of the others, and names those it was asked to change.
func TestReload(t *testing.T) {
	running, err := Load(write(t, minimal), nil)
	if err != nil {
		t.Fatal(err)
	}
	asked, err := Load(write(t, every), nil)
	if err != nil {
		t.Fatal(err)
	}
	next, restart := Reload(running, asked)
	want := []string{"dns.listen", "dns.zone", "dns.ttl", "dns.lsn_wait", "dns.lsn_refresh_min_gap", "dns.rate_limit",
		"dns.nameservers", "dns.client_subnet_from", "http.listen", "http.max_conns", "http.allowed_hosts", "http.admin_token_file", "http.sync_max_lag", "http.sync_max_lag_bytes", "state.path"}
	if !slices.Equal(restart, want) {
		t.Errorf("keys left for a restart: %v, want %v", restart, want)
	}
	if next.DNS.Listen != running.DNS.Listen || next.DNS.TTL != running.DNS.TTL || next.DNS.ClientSubnetFrom != nil ||
		!reflect.DeepEqual(next.HTTP, running.HTTP) {
		t.Errorf("a listener setting changed on reload: %+v", next)
	}
	if next.DNS.DefaultCluster != "b" || len(next.DNS.Networks) != 1 || next.Probe != asked.Probe ||
		!reflect.DeepEqual(next.Clusters, asked.Clusters) {
		t.Errorf("a reloadable setting was not applied: %+v", next)
	}
	if next.Probe.Interval != 100*time.Millisecond || running.Probe.Interval != 250*time.Millisecond {
		t.Errorf("Reload changed its arguments: running %+v", running)
	}
	if _, restart := Reload(running, running); restart != nil {
		t.Errorf("no change, yet %v left for a restart", restart)
	}
}
