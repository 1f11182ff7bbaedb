package config

import "testing"

// TestListenIP: the one "single IP" rule, as dns.listen and http.listen
// are read.
func TestListenIP(t *testing.T) {
	for _, tc := range []struct {
		listen   string
		ip       string // "" when no single IP
		loopback bool
	}{
		{"127.0.0.1:53", "127.0.0.1", true},
		{"[::1]:8080", "::1", true},
		{"192.0.2.1:53", "192.0.2.1", false},
		{"localhost:8080", "", true},
		{"LOCALHOST:8080", "", true},
		{"db.example:53", "", false},
		{"0.0.0.0:53", "", false},
		{"[::]:53", "", false},
		{":53", "", false},
		{"127.0.0.1", "", false},
		{"", "", false},
	} {
		ip, ok := ListenIP(tc.listen)
		if got := map[bool]string{true: ip.String()}[ok]; got != tc.ip {
			t.Errorf("ListenIP(%q) = %q, want %q", tc.listen, got, tc.ip)
		}
		if got := ListenLoopback(tc.listen); got != tc.loopback {
			t.Errorf("ListenLoopback(%q) = %v, want %v", tc.listen, got, tc.loopback)
		}
	}
}
