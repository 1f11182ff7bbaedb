package zone

import (
	"errors"
	"strings"
	"testing"
)

func TestParseHostNamesAndServices(t *testing.T) {
	cases := []struct {
		name string
		want Query
		err  error
	}{
		{"pg-1.host.main.db.local.", Query{Kind: KindHostName, Cluster: "main", Host: "pg-1"}, nil},
		{"primary.host.main.db.local.", Query{Kind: KindHostName, Cluster: "main", Host: "primary"}, nil}, // a member may be named so: "host" says what it is
		{"n1.host.host.db.local.", Query{Kind: KindHostName, Cluster: "host", Host: "n1"}, nil},
		{"primary.host.db.local.", Query{Kind: KindHosts, Target: TargetPrimary, Cluster: "host"}, nil}, // a cluster named host
		{"n1.host.db.local.", Query{}, ErrNoSuchName},                                                   // the cluster is always written
		{"host.main.db.local.", Query{Kind: KindHostName, Cluster: "main", ENT: true}, nil},             // the empty non-terminal above the host names
		{"_tcp.replica.db.local.", Query{Kind: KindHosts, Target: TargetReplica, SRV: true, ENT: true}, nil},
		{"_tcp.main.db.local.", Query{Kind: KindCluster, Cluster: "main", SRV: true, ENT: true}, nil},
		{"_tcp.pg-1.host.main.db.local.", Query{Kind: KindHostName, Cluster: "main", Host: "pg-1", SRV: true, ENT: true}, nil},
		{"_tcp.host.main.db.local.", Query{}, ErrNoSuchName}, // nothing below it: _postgresql._tcp.host.main is not a name
		{"_postgresql._tcp.host.main.db.local.", Query{}, ErrNoSuchName},
		{"_tcp._tcp.replica.db.local.", Query{}, ErrNoSuchName},
		{"_tcp.db.local.", Query{Kind: KindCluster, Cluster: "_tcp"}, nil}, // a cluster label: no cluster has it (NXDOMAIN)
		{"_tcp.ns.db.local.", Query{}, ErrNoSuchName},
		{"x._tcp.replica.db.local.", Query{}, ErrNoSuchName},
		{"a.b.host.main.db.local.", Query{}, ErrNoSuchName},
		{"pg_1.host.main.db.local.", Query{}, ErrNoSuchName},
		{"-pg.host.main.db.local.", Query{}, ErrNoSuchName},
		{"n1.host.primary.db.local.", Query{}, ErrNoSuchName}, // no cluster is named primary

		{"_postgresql._tcp.primary.db.local.", Query{Kind: KindHosts, Target: TargetPrimary, SRV: true}, nil},
		{"_postgresql._tcp.dc-east.lag-1000ms.replica.orders.db.local.", Query{Kind: KindHosts, Target: TargetReplica, Cluster: "orders",
			HasLag: true, MaxLag: 1e9, DC: "east", SRV: true}, nil},
		{"_postgresql._tcp.main.db.local.", Query{Kind: KindCluster, Cluster: "main", SRV: true}, nil},
		{"_postgresql._tcp.pg-1.host.main.db.local.", Query{Kind: KindHostName, Cluster: "main", Host: "pg-1", SRV: true}, nil},
		{"_postgresql._udp.primary.db.local.", Query{}, ErrNoSuchName},
		{"_pgsql._tcp.primary.db.local.", Query{}, ErrNoSuchName},
		{"_postgresql.primary.db.local.", Query{}, ErrNoSuchName},
		{"_tcp._postgresql.primary.db.local.", Query{}, ErrNoSuchName},
		{"_postgresql._tcp._postgresql._tcp.primary.db.local.", Query{}, ErrNoSuchName},
		{"_postgresql._tcp.db.local.", Query{}, ErrNoSuchName},
		{"_postgresql._tcp.ns.db.local.", Query{}, ErrNoSuchName},
		{"_postgresql._tcp.nonsense.replica.db.local.", Query{}, ErrNoSuchName},
		{"_postgresql._tcp.primary.example.com.", Query{}, ErrOutsideZone},
	}
	for _, tc := range cases {
		got, err := Parse(tc.name, origin)
		if !errors.Is(err, tc.err) || got != tc.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v, %v", tc.name, got, err, tc.want, tc.err)
			continue
		}
		if err == nil {
			if back := got.String() + "." + origin; back != tc.name {
				t.Errorf("String() of %q = %q", tc.name, back)
			}
		}
	}
}

func TestSanitizeLabel(t *testing.T) {
	for in, want := range map[string]string{
		"pg1":           "pg1",
		"PG_Node.1":     "pg-node-1",
		"--a--b--":      "a-b",
		"postgresql0":   "postgresql0",
		"member name ✓": "member-name",
		"___":           "",
	} {
		got := SanitizeLabel(in)
		if got != want {
			t.Errorf("SanitizeLabel(%q) = %q, want %q", in, got, want)
		}
		if got != "" && !ValidHostLabel(got) {
			t.Errorf("SanitizeLabel(%q) = %q is no valid label", in, got)
		}
	}
	if got := SanitizeLabel(strings.Repeat("ab", 40)); len(got) != 63 || !strings.HasPrefix(got, strings.Repeat("ab", 27)+"-") || !ValidHostLabel(got) {
		t.Errorf("SanitizeLabel(80 bytes) = %q", got)
	}
	a, b := SanitizeLabel(strings.Repeat("x", 70)+"1"), SanitizeLabel(strings.Repeat("x", 70)+"2")
	if a == b {
		t.Errorf("two long names share the label %q", a)
	}
}

func TestDerivedLabel(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.11:5432":       "127-0-0-11-5432",
		"[::1]:5432":            "0-0-0-0-0-0-0-1-5432",
		"[2001:db8::a:1]:6432":  "2001-db8-0-0-0-0-a-1-6432",
		"pg1.example.com:5433":  "pg1-example-com-5433",
		"Docker_Service_1:5432": "docker-service-1-5432",
	} {
		if got := DerivedLabel(in); got != want || !ValidHostLabel(got) {
			t.Errorf("DerivedLabel(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAssignLabels(t *testing.T) {
	addrs := []string{"10.0.0.1:5432", "10.0.0.2:5432", "10.0.0.3:5432", "10.0.0.4:5432"}
	labels, renamed := AssignLabels(addrs, map[string]string{
		"10.0.0.1:5432": "pg1", "10.0.0.2:5432": "pg1", // Patroni reported two members of one name
		"10.0.0.3:5432": "Not_Valid",
	})
	want := []string{"pg1", "10-0-0-2-5432", "10-0-0-3-5432", "10-0-0-4-5432"}
	if strings.Join(labels, ",") != strings.Join(want, ",") {
		t.Errorf("labels %v, want %v", labels, want)
	}
	if len(renamed) != 1 || renamed[0] != "10.0.0.2:5432" {
		t.Errorf("renamed %v", renamed)
	}
	// A given name equal to another host's derived one, or shaped as a
	// derived label of another address (that host not listed yet), is not
	// used: a host's derived name always answers that host, and no name
	// moves when the other host joins (review 4).
	for _, addrs := range [][]string{{"10.0.0.1:5432", "10.0.0.2:5432"}, {"10.0.0.1:5432"}} {
		labels, renamed = AssignLabels(addrs, map[string]string{"10.0.0.1:5432": "10-0-0-2-5432"})
		if labels[0] != "10-0-0-1-5432" || (len(addrs) == 2 && labels[1] != "10-0-0-2-5432") || len(renamed) != 1 {
			t.Errorf("%v: labels %v, renamed %v", addrs, labels, renamed)
		}
	}
	labels, renamed = AssignLabels([]string{"[::1]:5432", "10.0.0.3:5432", "10.0.0.4:5432"}, map[string]string{
		"10.0.0.3:5432": "0-0-0-0-0-0-0-1-5432", // [::1]:5432's
		"10.0.0.4:5432": "10-0-0-4-5432",        // its own: kept
	})
	if strings.Join(labels, ",") != "0-0-0-0-0-0-0-1-5432,10-0-0-3-5432,10-0-0-4-5432" || len(renamed) != 1 {
		t.Errorf("labels %v, renamed %v", labels, renamed)
	}
	for label, shaped := range map[string]bool{"10-0-0-2-5432": true, "0-0-0-0-0-0-0-1-5432": true, "pg-1": false, "1-2-3-4": false, "10-0-0-2-0": false, "pg1-example-com-5432": false} {
		if addressShaped(label) != shaped {
			t.Errorf("addressShaped(%q) = %v", label, !shaped)
		}
	}
}

func TestClientPort(t *testing.T) {
	for _, tc := range []struct {
		ports      []uint16
		configured uint16
		want       uint16
	}{
		{[]uint16{5432, 5432, 5433}, 0, 5432},
		{[]uint16{5433, 5432, 5433}, 0, 5433},
		{[]uint16{5433, 5432}, 0, 5432}, // a tie: the lowest
		{[]uint16{5433, 5432}, 6432, 6432},
		{nil, 0, 0},
	} {
		if got := ClientPort(tc.ports, tc.configured); got != tc.want {
			t.Errorf("ClientPort(%v, %d) = %d, want %d", tc.ports, tc.configured, got, tc.want)
		}
	}
}
