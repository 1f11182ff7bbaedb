package zone

import (
	"errors"
	"strings"
	"testing"
)

// A host name answers only a host probed with the cluster's established
// system identifier (review S2), and keeps answering it when it goes down.
func TestHostNameWhy(t *testing.T) {
	named := func(n int, inRecovery bool) Host {
		h := changeHost(n, inRecovery, 1)
		h.Name = DerivedLabel(h.Addr)
		return h
	}
	p, r := named(1, false), named(2, true)
	foreign := named(3, false)
	foreign.SystemID = 8
	unprobed := named(4, true)
	unprobed.Seen, unprobed.Fails = false, 1
	down := downHost(named(5, true), 3, "not_serving")
	s := changeSnap(nil, p, r, foreign, unprobed, down)
	for _, tc := range []struct{ label, want string }{
		{"10-0-0-1-5432", ""},
		{"10-0-0-2-5432", ""},
		{"10-0-0-3-5432", HostNameForeign},
		{"10-0-0-4-5432", HostNameUnprobed},
		{"10-0-0-5-5432", ""}, // down, last seen as the cluster's: still its machine
	} {
		q := Query{Kind: KindHostName, Cluster: "main", Host: tc.label}
		h, code, why, err := s.HostNamedAnswer(&q)
		if err != nil || h == nil || code != tc.want || (code == "") != (why == "") {
			t.Errorf("%s: %v %q %q %v, want code %q", tc.label, h != nil, code, why, err, tc.want)
		}
	}
	// No identity established (a tie): no host name answers.
	tie := changeSnap(nil, p, foreign)
	q := Query{Kind: KindHostName, Cluster: "main", Host: "10-0-0-1-5432"}
	if _, code, _, _ := tie.HostNamedAnswer(&q); code != HostNameUnsettled {
		t.Errorf("a tie: %q, want %q", code, HostNameUnsettled)
	}
	// Before the first probe round: not ready, whatever the cluster.
	s.Ready = false
	if _, _, _, err := s.HostNamedAnswer(&q); !errors.Is(err, ErrNotReady) {
		t.Errorf("not ready: %v, want ErrNotReady", err)
	}
}

// A host name fits DNS's 255 octets (review S9): its wire length is
// counted right, and a label too long for a long cluster and zone is cut
// and hashed to fit, two long labels staying apart.
func TestFitHostLabel(t *testing.T) {
	if n := HostNameOctets("pg-1", "main", "db.local"); n != len("pg-1.host.main.db.local")+2 {
		t.Errorf("HostNameOctets = %d", n)
	}
	if n := HostNameOctets("pg-1", "main", "db.local."); n != len("pg-1.host.main.db.local")+2 {
		t.Errorf("HostNameOctets with the root's dot = %d", n)
	}
	z := strings.Repeat("a", 50) + "." + strings.Repeat("a", 50) + "." + strings.Repeat("a", 50) + ".local" // 158 octets
	c := strings.Repeat("c", 60)
	label := strings.Repeat("h", 63)
	if HostNameOctets(label, c, z) <= MaxNameOctets {
		t.Fatalf("the review's host name is %d octets: not too long", HostNameOctets(label, c, z))
	}
	fit := FitHostLabel(label, c, z)
	other := FitHostLabel(strings.Repeat("h", 62)+"i", c, z)
	if !ValidHostLabel(fit) || HostNameOctets(fit, c, z) > MaxNameOctets || fit == other || len(fit) != LabelRoom(c, z) {
		t.Errorf("FitHostLabel = %q (%d octets), %q", fit, HostNameOctets(fit, c, z), other)
	}
	if got := FitHostLabel("pg-1", "main", "db.local"); got != "pg-1" {
		t.Errorf("a label that fits: %q", got)
	}
	if got := FitHostLabel(label, strings.Repeat("c", 63), strings.Repeat("z.", 90)+"local"); got != "" {
		t.Errorf("no room: %q, want \"\"", got)
	}
	if MaxDerivedLabel != len(DerivedLabel("[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535")) {
		t.Errorf("MaxDerivedLabel %d, the longest derived label %q", MaxDerivedLabel, DerivedLabel("[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535"))
	}
}
