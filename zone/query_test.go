package zone

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const origin = "db.local."

func TestParse(t *testing.T) {
	cases := []struct {
		name string
		want Query
		err  error
	}{
		{"db.local.", Query{Kind: KindApex}, nil},
		{"ns.db.local.", Query{Kind: KindNameServer}, nil},
		{"primary.db.local.", Query{Kind: KindHosts, Target: TargetPrimary}, nil},
		{"master.db.local.", Query{Kind: KindHosts, Target: TargetPrimary}, nil},
		{"replica.db.local.", Query{Kind: KindHosts, Target: TargetReplica}, nil},
		{"standby.db.local.", Query{Kind: KindHosts, Target: TargetReplica}, nil},
		{"prefer-replica.db.local.", Query{Kind: KindHosts, Target: TargetPreferReplica}, nil},
		{"prefer-standby.db.local.", Query{Kind: KindHosts, Target: TargetPreferReplica}, nil},
		{"any.db.local.", Query{Kind: KindHosts, Target: TargetAny}, nil},
		{"primary.orders.db.local.", Query{Kind: KindHosts, Target: TargetPrimary, Cluster: "orders"}, nil},
		{"lag-50ms.replica.db.local.", Query{Kind: KindHosts, Target: TargetReplica, HasLag: true, MaxLag: 50 * time.Millisecond}, nil},
		{"lag-2s.replica.db.local.", Query{Kind: KindHosts, Target: TargetReplica, HasLag: true, MaxLag: 2 * time.Second}, nil},
		{"lag-0ms.any.db.local.", Query{Kind: KindHosts, Target: TargetAny, HasLag: true}, nil},
		{"bytes-1mb.replica.db.local.", Query{Kind: KindHosts, Target: TargetReplica, HasBytes: true, MaxBytes: 1 << 20}, nil},
		{"bytes-3kb.replica.db.local.", Query{Kind: KindHosts, Target: TargetReplica, HasBytes: true, MaxBytes: 3 << 10}, nil},
		{"bytes-2gb.replica.db.local.", Query{Kind: KindHosts, Target: TargetReplica, HasBytes: true, MaxBytes: 2 << 30}, nil},
		{"bytes-100b.replica.db.local.", Query{Kind: KindHosts, Target: TargetReplica, HasBytes: true, MaxBytes: 100}, nil},
		{"lsn-0-3000060.replica.db.local.", Query{Kind: KindHosts, Target: TargetReplica, HasLSN: true, MinLSN: 0x3000060}, nil},
		{"lsn-16-b374d848.replica.db.local.", Query{Kind: KindHosts, Target: TargetReplica, HasLSN: true, MinLSN: 0x16_B374D848}, nil},
		{"lsn-0-3000060-t2.prefer-replica.db.local.", Query{Kind: KindHosts, Target: TargetPreferReplica, HasLSN: true, MinLSN: 0x3000060, Timeline: 2}, nil},
		{"lsn-0-1.lag-1s.bytes-1kb.replica.orders.db.local.", Query{Kind: KindHosts, Target: TargetReplica, Cluster: "orders",
			HasLag: true, MaxLag: time.Second, HasBytes: true, MaxBytes: 1024, HasLSN: true, MinLSN: 1}, nil},

		{"dc-east.replica.db.local.", Query{Kind: KindHosts, Target: TargetReplica, DC: "east"}, nil},
		{"dc-east.lag-50ms.replica.db.local.", Query{Kind: KindHosts, Target: TargetReplica, DC: "east", HasLag: true, MaxLag: 50 * time.Millisecond}, nil},
		{"lsn-0-1.dc-us-east-1.prefer-replica.orders.db.local.", Query{Kind: KindHosts, Target: TargetPreferReplica, Cluster: "orders",
			DC: "us-east-1", HasLSN: true, MinLSN: 1}, nil},
		{"dc-lag-5ms.primary.db.local.", Query{Kind: KindHosts, Target: TargetPrimary, DC: "lag-5ms"}, nil}, // a location may look like a filter
		{"dc-" + strings.Repeat("a", 60) + ".any.db.local.", Query{Kind: KindHosts, Target: TargetAny, DC: strings.Repeat("a", 60)}, nil},
		{"dc-.replica.db.local.", Query{}, ErrNoSuchName},
		{"dc-" + strings.Repeat("a", 61) + ".any.db.local.", Query{}, ErrNoSuchName}, // a 64-byte label
		{"dc-east.dc-west.replica.db.local.", Query{}, ErrNoSuchName},                // at most one
		{"dc-east.dc-east.replica.db.local.", Query{}, ErrNoSuchName},
		{"dc-ea\\st.replica.db.local.", Query{}, ErrNoSuchName},
		{"dc-east.db.local.", Query{}, ErrNoSuchName}, // a filter alone, and no cluster name

		{"offline.db.local.", Query{Kind: KindHosts, Target: TargetOffline}, nil},
		{"lag-1s.dc-east.offline.orders.db.local.", Query{Kind: KindHosts, Target: TargetOffline, Cluster: "orders", DC: "east", HasLag: true, MaxLag: time.Second}, nil},
		{"sync.replica.db.local.", Query{Kind: KindHosts, Target: TargetReplica, Sync: true}, nil},
		{"lsn-0-1.sync.lag-50ms.prefer-replica.db.local.", Query{Kind: KindHosts, Target: TargetPreferReplica, Sync: true,
			HasLag: true, MaxLag: 50 * time.Millisecond, HasLSN: true, MinLSN: 1}, nil},
		{"sync.offline.db.local.", Query{Kind: KindHosts, Target: TargetOffline, Sync: true}, nil},
		{"sync.sync.replica.db.local.", Query{}, ErrNoSuchName}, // at most one
		{"sync.db.local.", Query{}, ErrNoSuchName},              // a filter alone is no cluster
		{"offline.primary.db.local.", Query{}, ErrNoSuchName},
		{"syncs.replica.db.local.", Query{}, ErrNoSuchName},

		{"example.com.", Query{}, ErrOutsideZone},
		{"xdb.local.", Query{}, ErrOutsideZone},
		{"local.", Query{}, ErrOutsideZone},
		{"primary.db.local.example.", Query{}, ErrOutsideZone},

		{"foo.db.local.", Query{Kind: KindCluster, Cluster: "foo"}, nil}, // a cluster label alone: whether it exists is selection's business
		{"orders.db.local.", Query{Kind: KindCluster, Cluster: "orders"}, nil},
		{"lsn-0-1.db.local.", Query{}, ErrNoSuchName}, // a filter alone is no cluster
		{"ns.orders.db.local.", Query{}, ErrNoSuchName},
		{"primary.a.b.db.local.", Query{}, ErrNoSuchName}, // two clusters
		{"replica.primary.db.local.", Query{}, ErrNoSuchName},
		{"lag-50ms.db.local.", Query{}, ErrNoSuchName},
		{"lag-50.replica.db.local.", Query{}, ErrNoSuchName},
		{"lag-ms.replica.db.local.", Query{}, ErrNoSuchName},
		{"lag--5ms.replica.db.local.", Query{}, ErrNoSuchName},
		{"lag-99999999999999999999ms.replica.db.local.", Query{}, ErrNoSuchName},
		{"lag-9999999999999s.replica.db.local.", Query{}, ErrNoSuchName}, // overflows time.Duration
		{"lag-1ms.lag-2ms.replica.db.local.", Query{}, ErrNoSuchName},
		{"bytes-1tb.replica.db.local.", Query{}, ErrNoSuchName},
		{"bytes-18446744073709551615gb.replica.db.local.", Query{}, ErrNoSuchName},
		{"bytes-18446744073709551615b.replica.db.local.", Query{Kind: KindHosts, Target: TargetReplica, HasBytes: true, MaxBytes: 18446744073709551615}, nil},
		{"bytes-18446744073709551616b.replica.db.local.", Query{}, ErrNoSuchName},
		{"bytes-10000000000gb.any.db.local.", Query{Kind: KindHosts, Target: TargetAny, HasBytes: true, MaxBytes: 10000000000 << 30}, nil},
		{"lsn-0.replica.db.local.", Query{}, ErrNoSuchName},
		{"lsn-0-123456789.replica.db.local.", Query{}, ErrNoSuchName}, // 9 hex digits
		{"lsn-g-0.replica.db.local.", Query{}, ErrNoSuchName},
		{"lsn-0-1-t0.replica.db.local.", Query{}, ErrNoSuchName},
		{"lsn-0-1-2.replica.db.local.", Query{}, ErrNoSuchName},
		{"lsn-0-1-t4294967296.replica.db.local.", Query{}, ErrNoSuchName},
		{"..replica.db.local.", Query{}, ErrNoSuchName},
		{".replica.db.local.", Query{}, ErrNoSuchName},
		{"lag-1s..replica.db.local.", Query{}, ErrNoSuchName},
		{"replica\\.x.db.local.", Query{}, ErrNoSuchName},
		{"primary.ord\\046ers.db.local.", Query{}, ErrNoSuchName},
		{"weird.replica.db.local.", Query{}, ErrNoSuchName},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.name, origin)
			if !errors.Is(err, tc.err) {
				t.Fatalf("Parse(%q) error = %v, want %v", tc.name, err, tc.err)
			}
			if got != tc.want {
				t.Fatalf("Parse(%q) = %+v, want %+v", tc.name, got, tc.want)
			}
		})
	}
}

func TestQueryStringIsCanonical(t *testing.T) {
	q, err := Parse("lsn-0-3000060-t3.bytes-1kb.lag-2s.standby.orders.db.local.", origin)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := q.String(), "lag-2000ms.bytes-1024b.lsn-0-3000060-t3.replica.orders"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	q, err = Parse("lag-1s.dc-east.standby.db.local.", origin)
	if err != nil {
		t.Fatal(err)
	}
	q.From = "west" // the client's location is not part of the name
	if got, want := q.String(), "dc-east.lag-1000ms.replica"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	q, err = Parse("lag-1s.sync.dc-east.offline.db.local.", origin)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := q.String(), "dc-east.sync.lag-1000ms.offline"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}

func TestParseDoesNotAllocate(t *testing.T) {
	for _, name := range []string{"lsn-0-3000060.lag-50ms.bytes-1mb.dc-east.sync.replica.orders.db.local.", "sync.offline.db.local.", "orders.db.local.",
		"_postgresql._tcp.replica.db.local.", "pg-1.host.main.db.local."} {
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := Parse(name, origin); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Fatalf("Parse(%q) allocates %v times per call", name, allocs)
		}
	}
}

func TestValidClusterName(t *testing.T) {
	for name, want := range map[string]bool{
		"main": true, "orders-eu_1": true,
		"": false, "primary": false, "standby": false, "any": false, "ns": false,
		"lag-5ms": false, "bytes-1kb": false, "offline": false, "sync": false, "lsn-0-1": false, "Main": false, "a.b": false, "dc-east": false,
	} {
		if got := ValidClusterName(name); got != want {
			t.Errorf("ValidClusterName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestParseLSN(t *testing.T) {
	l, err := ParseLSN("16/B374D848")
	if err != nil || l != 0x16_B374D848 {
		t.Fatalf("ParseLSN = %v, %v", l, err)
	}
	if l.String() != "16/B374D848" {
		t.Fatalf("String = %q", l.String())
	}
	if l.Label() != "16-b374d848" {
		t.Fatalf("Label = %q", l.Label())
	}
	for _, bad := range []string{"", "1", "1/", "/1", "1/2/3", "123456789/0", "x/1"} {
		if _, err := ParseLSN(bad); err == nil {
			t.Errorf("ParseLSN(%q) succeeded", bad)
		}
	}
}

// FuzzParse checks that Parse never panics, that everything it accepts is a
// well-formed query, and that the canonical form of a query parses back to
// the same query (round-trip oracle).
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"primary.db.local.", "replica.db.local.", "lag-50ms.replica.db.local.",
		"bytes-1mb.replica.db.local.", "lsn-0-3000060.replica.db.local.",
		"lsn-0-3000060-t2.prefer-replica.orders.db.local.", "db.local.", "ns.db.local.",
		"lag-1s.bytes-2gb.lsn-ffffffff-ffffffff-t4294967295.any.x.db.local.",
		"..db.local.", "lag-.replica.db.local.", "example.com.", "", "orders.db.local.",
		"dc-east.lag-50ms.replica.db.local.", "dc-us-east-1.any.orders.db.local.", "dc-.replica.db.local.",
		"dc-a.dc-b.replica.db.local.", "offline.db.local.", "sync.replica.db.local.",
		"sync.lag-1s.dc-east.offline.orders.db.local.", "sync.sync.any.db.local.",
		"pg-1.host.main.db.local.", "_postgresql._tcp.lag-1s.replica.db.local.", "_postgresql._tcp.main.db.local.",
		"_postgresql._tcp.pg-1.host.main.db.local.", "_postgresql._udp.primary.db.local.",
		"host.main.db.local.", "_tcp.replica.db.local.", "_tcp.pg-1.host.main.db.local.", "_tcp.main.db.local.",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, name string) {
		q, err := Parse(name, origin)
		if err != nil {
			if q != (Query{}) {
				t.Fatalf("Parse(%q) returned %+v with error %v", name, q, err)
			}
			return
		}
		switch q.Kind {
		case KindApex:
			return
		case KindHosts:
			if q.Target < TargetPrimary || q.Target > TargetOffline {
				t.Fatalf("Parse(%q) target %d", name, q.Target)
			}
			if q.DC != "" && !ValidLocationName(q.DC) {
				t.Fatalf("Parse(%q) location %q", name, q.DC)
			}
			if q.From != "" {
				t.Fatalf("Parse(%q) set the client's location %q", name, q.From)
			}
		case KindCluster:
			if !ValidClusterName(q.Cluster) {
				t.Fatalf("Parse(%q) cluster %q", name, q.Cluster)
			}
		case KindHostName:
			hostENT := q.ENT && !q.SRV && q.Host == "" // host.<cluster>
			if (!hostENT && !ValidHostLabel(q.Host)) || q.Cluster == "" {
				t.Fatalf("Parse(%q) host %q of cluster %q", name, q.Host, q.Cluster)
			}
		}
		canon := q.String() + "." + origin
		back, err := Parse(canon, origin)
		if err != nil || back != q {
			t.Fatalf("round trip %q -> %q -> %+v, %v; want %+v", name, canon, back, err, q)
		}
	})
}
