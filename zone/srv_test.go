package zone

import (
	"net/netip"
	"slices"
	"strconv"
	"testing"
	"time"
)

// onPort is h listening on port, at ip.
func onPort(h Host, ip string, port uint16) Host {
	h.IP, h.Port, h.Addr = netip.MustParseAddr(ip), port, JoinHostPort(ip, port)
	return h
}

// twoPorts: the primary on 10.0.0.1:5432, a replica beside it on
// 10.0.0.1:5433 (a second instance on the machine), replicas on
// 10.0.0.2:5432 and 10.0.0.3:5433.
func twoPorts() *Snapshot {
	p := onPort(seen("10.0.0.1", false, 0x5000), "10.0.0.1", 5432)
	beside := onPort(seen("10.0.0.1", true, 0x5000), "10.0.0.1", 5433)
	beside.StartedAt = t0.Add(1) // another server than the primary
	r2 := onPort(seen("10.0.0.2", true, 0x5000), "10.0.0.2", 5432)
	r3 := onPort(seen("10.0.0.3", true, 0x5000), "10.0.0.3", 5433)
	c := &Cluster{Name: "main", Hosts: []Host{p, beside, r2, r3}, Port: ClientPort([]uint16{5432, 5433, 5432, 5433}, 0)}
	c.Decide(t0, stale, 3)
	return &Snapshot{Ready: true, Clusters: []*Cluster{c}, Default: "main", StaleAfter: stale}
}

func selectAddrs(t *testing.T, s *Snapshot, name string, turn uint64) []string {
	t.Helper()
	q, err := Parse(name, origin)
	if err != nil {
		t.Fatalf("Parse(%q): %v", name, err)
	}
	q = q.ClusterService()
	hosts, err := View{Snap: s, Now: t0, Turn: turn}.Select(&q, nil)
	if err != nil {
		t.Fatalf("Select(%q): %v", name, err)
	}
	out := []string{}
	for _, h := range hosts {
		out = append(out, h.Addr)
	}
	return out
}

// TestAddressAnswersKeepToTheClientPort: an A answer never holds an
// address that, on the cluster's client port, reaches another server than
// the one selected (review: the replica beside the primary on 5433 made
// replica.db.local answer the primary's address), nor an address two
// configured hosts share on different ports, whatever the client port
// (review R11: the primary's address answered as a replica once the
// majority port flipped); SRV answers them all.
func TestAddressAnswersKeepToTheClientPort(t *testing.T) {
	s := twoPorts()
	if p := s.Clusters[0].Port; p != 5432 {
		t.Fatalf("client port %d, want 5432 (a tie: the lowest)", p)
	}
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"primary.db.local.", []string{}}, // 10.0.0.1 is also the replica's, on 5433
		{"replica.db.local.", []string{"10.0.0.2:5432"}},
		{"any.db.local.", []string{"10.0.0.2:5432"}},
		{"_postgresql._tcp.primary.db.local.", []string{"10.0.0.1:5432"}},
		{"_postgresql._tcp.replica.db.local.", []string{"10.0.0.1:5433", "10.0.0.2:5432", "10.0.0.3:5433"}},
		{"_postgresql._tcp.any.db.local.", []string{"10.0.0.1:5432", "10.0.0.1:5433", "10.0.0.2:5432", "10.0.0.3:5433"}},
		{"_postgresql._tcp.main.db.local.", []string{"10.0.0.1:5432", "10.0.0.1:5433", "10.0.0.2:5432", "10.0.0.3:5433"}},
	} {
		if got := selectAddrs(t, s, tc.name, 0); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	// Every turn: the A answer is the SRV answer's hosts on the client
	// port and alone at their address, in the same order.
	for turn := range uint64(6) {
		a, srv := selectAddrs(t, s, "any.db.local.", turn), selectAddrs(t, s, "_postgresql._tcp.any.db.local.", turn)
		kept := []string{}
		for _, x := range srv {
			if x[len(x)-4:] == "5432" && x[:9] != "10.0.0.1:" {
				kept = append(kept, x)
			}
		}
		if !slices.Equal(a, kept) {
			t.Errorf("turn %d: A %v is not SRV %v on port 5432 at unshared addresses", turn, a, srv)
		}
	}
}

// TestNoClientPortAnswersASharedAddress: review R11. Whatever the client
// port (configured, or the majority of the hosts, which adding one host
// or listing stopped ones flips), no A answer holds an address two
// configured hosts share on different ports: a client on either port
// could reach the other server there. Before the fix, with 5433 the
// majority, replica.db.local answered the primary's 10.0.0.1 and
// primary.db.local nothing; now both keep to the unshared hosts.
func TestNoClientPortAnswersASharedAddress(t *testing.T) {
	hosts := func() []Host {
		return []Host{
			onPort(seen("10.0.0.3", false, 0x5000), "10.0.0.3", 5432), // the primary
			onPort(seen("10.0.0.1", true, 0x5000), "10.0.0.1", 5432),
			onPort(seen("10.0.0.1", true, 0x5000), "10.0.0.1", 5433),
			onPort(seen("10.0.0.2", true, 0x5000), "10.0.0.2", 5433),
			onPort(seen("10.0.0.3", true, 0x5000), "10.0.0.3", 5433),
			onPort(seen("10.0.0.4", true, 0x5000), "10.0.0.4", 5432),
		}
	}
	for _, port := range []uint16{0, 5432, 5433} {
		hs := hosts()
		for i := range hs {
			hs[i].StartedAt = t0.Add(time.Duration(i)) // distinct servers
			if hs[i].InRecovery {
				hs[i].SenderHost = "10.0.0.3" // streaming from the primary (setAsideUnlistedUpstream)
			}
		}
		ports := make([]uint16, len(hs))
		for i := range hs {
			ports[i] = hs[i].Port
		}
		c := &Cluster{Name: "main", Hosts: hs, Port: ClientPort(ports, port)}
		c.Decide(t0, stale, 3)
		s := &Snapshot{Ready: true, Clusters: []*Cluster{c}, Default: "main", StaleAfter: stale}
		for _, name := range []string{"primary.db.local.", "replica.db.local.", "any.db.local.", "prefer-replica.db.local."} {
			for _, a := range selectAddrs(t, s, name, 0) {
				if a[:9] == "10.0.0.1:" || a[:9] == "10.0.0.3:" {
					t.Errorf("client port %d: %s answers %s, an address two hosts share on different ports", c.Port, name, a)
				}
			}
		}
		want := map[uint16][]string{5432: {"10.0.0.4:5432"}, 5433: {"10.0.0.2:5433"}}[c.Port]
		if got := selectAddrs(t, s, "replica.db.local.", 0); !slices.Equal(got, want) {
			t.Errorf("client port %d: replica %v, want %v", c.Port, got, want)
		}
		if got := selectAddrs(t, s, "_postgresql._tcp.primary.db.local.", 0); !slices.Equal(got, []string{"10.0.0.3:5432"}) {
			t.Errorf("client port %d: SRV primary %v", c.Port, got)
		}
	}
}

// TestPreferReplicaOffPort: prefer-replica's A answer falls back to the
// primary when every fitting replica is on another port; its SRV answer
// names those replicas.
func TestPreferReplicaOffPort(t *testing.T) {
	p := onPort(seen("10.0.0.1", false, 0x5000), "10.0.0.1", 5432)
	r := onPort(seen("10.0.0.2", true, 0x5000), "10.0.0.2", 5433)
	c := &Cluster{Name: "main", Hosts: []Host{p, r}, Port: 5432}
	c.Decide(t0, stale, 3)
	s := &Snapshot{Ready: true, Clusters: []*Cluster{c}, Default: "main", StaleAfter: stale}
	if got := selectAddrs(t, s, "prefer-replica.db.local.", 0); !slices.Equal(got, []string{"10.0.0.1:5432"}) {
		t.Errorf("A: %v", got)
	}
	if got := selectAddrs(t, s, "_postgresql._tcp.prefer-replica.db.local.", 0); !slices.Equal(got, []string{"10.0.0.2:5433"}) {
		t.Errorf("SRV: %v", got)
	}
}

// TestAddressAnswersNeverRepeatAnIP: two hosts at one address on the
// client port (a name resolving to another host's address) are answered
// once by A; Decide's duplicate rule would set the same server aside, this
// holds whatever the probe saw.
func TestAddressAnswersNeverRepeatAnIP(t *testing.T) {
	r1 := onPort(seen("10.0.0.2", true, 0x5000), "10.0.0.2", 5432)
	r2 := onPort(seen("10.0.0.2", true, 0x5000), "10.0.0.2", 5432)
	r2.Addr, r2.StartedAt = "replica.example:5432", t0.Add(1)
	p := onPort(seen("10.0.0.1", false, 0x5000), "10.0.0.1", 5432)
	c := &Cluster{Name: "main", Hosts: []Host{p, r1, r2}, Port: 5432}
	c.Decide(t0, stale, 3)
	s := &Snapshot{Ready: true, Clusters: []*Cluster{c}, Default: "main", StaleAfter: stale}
	for turn := range uint64(3) {
		if got := selectIPs(t, s, "replica.db.local.", t0, turn); !slices.Equal(got, []string{"10.0.0.2"}) {
			t.Errorf("turn %d: %v", turn, got)
		}
	}
}

func TestExplainSRVOnly(t *testing.T) {
	s := twoPorts()
	q, _ := Parse("replica.db.local.", origin)
	vs, err := View{Snap: s, Now: t0}.Explain(&q)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		wantSRV := v.Host.Port == 5433 && v.Host.Role == RoleReplica
		why := "port 5433: answered by SRV only (_postgresql._tcp.), A and AAAA answer port 5432"
		if v.Host.Addr == "10.0.0.1:5433" {
			why = "address 10.0.0.1 is also another configured host's on another port: answered by SRV only (_postgresql._tcp.), " +
				"never by A or AAAA (a client on either port could reach the wrong server)"
		}
		if v.SRVOnly != wantSRV || (wantSRV && v.Why != why) {
			t.Errorf("%s: SRVOnly %v, why %q", v.Host.Addr, v.SRVOnly, v.Why)
		}
	}
}

func TestPriority(t *testing.T) {
	p := placed(seen("10.0.0.1", false, 0x5000), "east")
	e := placed(seen("10.0.0.2", true, 0x5000), "east")
	w := placed(seen("10.0.0.3", true, 0x5000), "west")
	s := cluster(p, e, w)
	prio := func(name, from string) string {
		q, err := Parse(name, origin)
		if err != nil {
			t.Fatal(err)
		}
		q = q.ClusterService()
		q.From = from
		hosts, err := View{Snap: s, Now: t0}.Select(&q, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := ""
		for _, h := range q.SRVOrder(hosts) {
			out += h.IP.String()[7:] + "=" + strconv.Itoa(int(q.Priority(h))) + " "
		}
		return out
	}
	for _, tc := range []struct{ name, from, want string }{
		{"_postgresql._tcp.primary.db.local.", "west", "1=10 "},
		// By priority, the A answer's order within one (the local replica
		// first): review S3 saw 3=20 1=10 2=20.
		{"_postgresql._tcp.any.db.local.", "west", "1=10 3=20 2=20 "},
		{"_postgresql._tcp.any.db.local.", "east", "1=10 2=20 3=20 "},
		{"_postgresql._tcp.replica.db.local.", "east", "2=10 3=20 "},
		{"_postgresql._tcp.any.db.local.", "", "1=10 2=20 3=20 "},
		{"_postgresql._tcp.main.db.local.", "", "1=10 2=20 3=20 "},
		{"_postgresql._tcp.replica.db.local.", "west", "3=10 2=20 "},
		{"_postgresql._tcp.replica.db.local.", "", "2=10 3=10 "},
		{"_postgresql._tcp.lsn-ffff-0.prefer-replica.db.local.", "west", "1=10 "},
	} {
		if got := prio(tc.name, tc.from); got != tc.want {
			t.Errorf("%s from %q: %q, want %q", tc.name, tc.from, got, tc.want)
		}
	}
}

// A host configured as an IPv4-mapped IPv6 address shares its IPv4
// address with a host configured by it on another port from the start:
// before any connection its address was the mapped form, and only the
// probe's first connection (which stores the address unmapped) made the
// two share, so that SharesIP, and with it which hosts address answers
// may hold, changed with who was up. Its own name answers the IPv4
// address, as once connected.
func TestMappedAddressSharedBeforeItsFirstConnection(t *testing.T) {
	mapped := Host{Cluster: "main", Addr: "[::ffff:10.0.0.11]:5433", Port: 5433}
	plain := Host{Cluster: "main", Addr: "10.0.0.11:5432", Port: 5432}
	other := Host{Cluster: "main", Addr: "10.0.0.12:5432", Port: 5432}
	if got := mapped.Address(); got != netip.MustParseAddr("10.0.0.11") {
		t.Errorf("Address of %s before a connection = %v, want 10.0.0.11", mapped.Addr, got)
	}
	for _, connected := range []string{"none", "mapped", "plain", "both"} {
		hosts := []Host{mapped, plain, other}
		if connected == "mapped" || connected == "both" {
			hosts[0].IP = netip.MustParseAddr("10.0.0.11") // as the probe stores it
		}
		if connected == "plain" || connected == "both" {
			hosts[1].IP = netip.MustParseAddr("10.0.0.11")
		}
		c := &Cluster{Name: "main", Hosts: hosts}
		c.Decide(t0, stale, 3)
		if !hosts[0].SharesIP || !hosts[1].SharesIP || hosts[2].SharesIP || c.ipsDistinct {
			t.Errorf("connected: %s: SharesIP %v %v %v, distinct %v; want the two on 10.0.0.11 sharing, whoever is up",
				connected, hosts[0].SharesIP, hosts[1].SharesIP, hosts[2].SharesIP, c.ipsDistinct)
		}
	}
}
