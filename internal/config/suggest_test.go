package config

import (
	"strings"
	"testing"
)

// A mistyped key gets the declared key it most likely meant; a key far
// from every declared one gets none.
func TestUnknownKeySuggestsTheNearest(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"probe:\n  intervall: 1s\n", `probe.intervall is not a known key (value "1s"); did you mean probe.interval?`},
		{"dns:\n  interval: 1s\n", `dns.interval is not a known key (value "1s"); did you mean probe.interval?`},
		{"dns:\n  tll: 5\n", `dns.tll is not a known key (value "5"); did you mean dns.ttl?`},
		{"clusters:\n  main:\n    hots: [a:1]\n    hosts: [a:1]\n", `clusters.main.hots is not a known key (value "[a:1]"); did you mean clusters.main.hosts?`},
		{"cluster:\n  orders:\n    hosts: [b:1]\n", `cluster.orders.hosts is not a known key (value "[b:1]"); did you mean clusters.orders.hosts?`},
		{"probe:\n  wholly_other: x\n", `probe.wholly_other is not a known key (value "x")` + "\n"},
	} {
		_, err := Load(write(t, tc.yaml+"clusters:\n  main:\n    hosts: [a:1]\n"), nil)
		if strings.HasPrefix(tc.yaml, "clusters:") {
			_, err = Load(write(t, tc.yaml), nil)
		}
		if err == nil || !strings.Contains(err.Error()+"\n", tc.want) {
			t.Errorf("%q: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

// A bad value from the environment says which variable set it, since the
// file does not hold it; a bad value from the file says nothing of the
// environment.
func TestBadValueFromTheEnvironmentNamesTheVariable(t *testing.T) {
	path := write(t, "probe:\n  timeout: soon\nclusters:\n  main:\n    hosts: [a:1]\n")
	_, err := Load(path, []string{"PGDNS_PROBE__INTERVAL=often", "PGDNS_CLUSTERS__MAIN__HOSTS=a:1,b", "PGDNS_PROBE__INTERVALL=1s"})
	if err == nil {
		t.Fatal("bad values loaded")
	}
	for _, want := range []string{
		"probe.interval must be a duration", "(set by the environment: PGDNS_PROBE__INTERVAL)",
		"clusters.main.hosts[1]", "(set by the environment: PGDNS_CLUSTERS__MAIN__HOSTS)",
		"did you mean probe.interval? (set by the environment: PGDNS_PROBE__INTERVALL)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		if strings.HasPrefix(line, "probe.timeout") && strings.Contains(line, "environment") {
			t.Errorf("a value from the file is said to come from the environment: %s", line)
		}
	}
}
