package zone

import (
	"strings"
	"testing"
)

func TestParseHostPort(t *testing.T) {
	good := map[string]struct {
		host string
		port uint16
	}{
		"10.0.0.1:5432":           {"10.0.0.1", 5432},
		"db1:1":                   {"db1", 1},
		"db-1.example.com:65535":  {"db-1.example.com", 65535},
		"db1.example.com.:5432":   {"db1.example.com.", 5432},
		"pg_primary:5432":         {"pg_primary", 5432},
		"[::1]:5432":              {"::1", 5432},
		"[fe80::1%eth0]:5432":     {"fe80::1%eth0", 5432},
		"[2001:db8::7]:6432":      {"2001:db8::7", 6432},
		"DB1.Example.COM:5432":    {"DB1.Example.COM", 5432},
		"127.0.0.1:05432":         {"127.0.0.1", 5432},
		"xn--bcher-kva.test:5432": {"xn--bcher-kva.test", 5432},
	}
	for addr, want := range good {
		host, port, err := ParseHostPort(addr)
		if err != nil || host != want.host || port != want.port {
			t.Errorf("ParseHostPort(%q) = %q, %d, %v; want %q, %d", addr, host, port, err, want.host, want.port)
		}
		if back := JoinHostPort(host, port); err == nil && addr != "127.0.0.1:05432" && back != addr {
			t.Errorf("JoinHostPort(%q, %d) = %q, want %q", host, port, back, addr)
		}
	}
	bad := map[string]string{
		"db1":                                   "port is missing",
		"db1:":                                  "port must be",
		"db1:99999":                             "port must be",
		"db2:0":                                 "port must be",
		"db1:-1":                                "port must be",
		"db1:+5432":                             "port must be",
		"db1:5432 sslmode=disable":              "port must be",
		":5432":                                 "host is empty",
		"::1:5432":                              "in brackets",
		"[db1]:5432":                            "brackets must hold",
		"[10.0.0.1]:5432":                       "brackets must hold",
		"10.0.0.60' sslmode='disable:5432":      "IP address or a DNS name",
		"db 1:5432":                             "IP address or a DNS name",
		"db=1:5432":                             "IP address or a DNS name",
		`db\1:5432`:                             "IP address or a DNS name",
		`"db1":5432`:                            "IP address or a DNS name",
		"db1..example:5432":                     "IP address or a DNS name",
		"-db1:5432":                             "IP address or a DNS name",
		"10.0.0.300:5432":                       "IP address or a DNS name",
		"[fe80::1%eth0' sslmode='disable]:5432": "IP address or a DNS name",
		strings.Repeat("a", 64) + ":5432":       "IP address or a DNS name",
		"db1\n:5432":                            "IP address or a DNS name",
	}
	for addr, want := range bad {
		if host, port, err := ParseHostPort(addr); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseHostPort(%q) = %q, %d, %v; want an error saying %q", addr, host, port, err, want)
		}
	}
}

func TestParseListenAddr(t *testing.T) {
	for addr, want := range map[string]uint16{"127.0.0.1:0": 0, ":5353": 5353, "[::]:53": 53, "pgdns.internal:5353": 5353} {
		if _, port, err := ParseListenAddr(addr); err != nil || port != want {
			t.Errorf("ParseListenAddr(%q) = %d, %v; want %d", addr, port, err, want)
		}
	}
	for _, addr := range []string{"localhost", "127.0.0.1:65536", "a b:53", "127.0.0.1:x"} {
		if _, _, err := ParseListenAddr(addr); err == nil {
			t.Errorf("ParseListenAddr(%q) accepted", addr)
		}
	}
}

func FuzzParseHostPort(f *testing.F) {
	for _, s := range []string{"10.0.0.1:5432", "[::1]:5432", "db1:99999", "a' b:1", "[fe80::1%x]:2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, addr string) {
		host, port, err := ParseHostPort(addr)
		if err != nil {
			return
		}
		if port == 0 || strings.ContainsAny(host, "' \"=\\\t\n[]") {
			t.Fatalf("ParseHostPort(%q) = %q, %d", addr, host, port)
		}
		h2, p2, err := ParseHostPort(JoinHostPort(host, port))
		if err != nil || h2 != host || p2 != port {
			t.Fatalf("round trip of %q: %q, %d, %v", addr, h2, p2, err)
		}
	})
}
