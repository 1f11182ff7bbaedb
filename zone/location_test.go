package zone

import (
	"errors"
	"net/netip"
	"slices"
	"testing"
)

// placed returns h labelled with location loc.
func placed(h Host, loc string) Host {
	h.Location = loc
	return h
}

// twoLocations is a primary in east, replicas .2 and .3 in east, .4 and .5
// in west and .6 unlabelled, with dns.locations mapping 10.1/16 to east
// and 10.2/16 to west.
func twoLocations() *Snapshot {
	s := cluster(
		placed(seen("10.0.0.1", false, 9), "east"),
		placed(seen("10.0.0.2", true, 9), "east"),
		placed(seen("10.0.0.4", true, 9), "west"),
		placed(seen("10.0.0.3", true, 9), "east"),
		placed(seen("10.0.0.5", true, 9), "west"),
		seen("10.0.0.6", true, 9),
	)
	s.Networks = NewNetworks([]Network{
		{netip.MustParsePrefix("10.1.0.0/16"), "east"},
		{netip.MustParsePrefix("10.2.0.0/16"), "west"},
	})
	return s
}

// selectFrom is selectIPs for a client in location from.
func selectFrom(t *testing.T, s *Snapshot, name, from string, turn uint64) ([]string, error) {
	t.Helper()
	q, err := Parse(name, origin)
	if err != nil {
		t.Fatalf("Parse(%q): %v", name, err)
	}
	q.From = from
	hosts, err := (View{Snap: s, Now: t0, Turn: turn}).Select(&q, nil)
	ips := []string{}
	for _, h := range hosts {
		ips = append(ips, h.IP.String())
	}
	return ips, err
}

func TestSelectLocalFirst(t *testing.T) {
	s := twoLocations()
	east := []string{"10.0.0.2", "10.0.0.3"}
	west := []string{"10.0.0.4", "10.0.0.5"}
	all := []string{"10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"}
	cases := []struct {
		name, from string
		local      []string // the first len(local) addresses, in any order
		rest       []string // the others, in any order
	}{
		{"replica.db.local.", "east", east, []string{"10.0.0.4", "10.0.0.5", "10.0.0.6"}},
		{"replica.db.local.", "west", west, []string{"10.0.0.2", "10.0.0.3", "10.0.0.6"}},
		{"prefer-replica.db.local.", "west", west, []string{"10.0.0.2", "10.0.0.3", "10.0.0.6"}},
		{"lag-1s.replica.db.local.", "west", west, []string{"10.0.0.2", "10.0.0.3", "10.0.0.6"}},
		{"replica.db.local.", "", nil, all},      // unknown client: today's answer
		{"replica.db.local.", "north", nil, all}, // a location with no host: no one is local
		// any: the primary heads its own location's group.
		{"any.db.local.", "east", []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}, []string{"10.0.0.4", "10.0.0.5", "10.0.0.6"}},
		{"any.db.local.", "west", west, []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.6"}},
	}
	for _, tc := range cases {
		for turn := uint64(0); turn < 6; turn++ {
			got, err := selectFrom(t, s, tc.name, tc.from, turn)
			if err != nil {
				t.Fatalf("%s from %q: %v", tc.name, tc.from, err)
			}
			n := len(tc.local)
			if len(got) != n+len(tc.rest) || !sameSet(got[:n], tc.local) || !sameSet(got[n:], tc.rest) {
				t.Fatalf("%s from %q turn %d: %v, want %v then %v", tc.name, tc.from, turn, got, tc.local, tc.rest)
			}
			if tc.name == "any.db.local." && !slices.Contains(tc.local, "10.0.0.1") && got[n] != "10.0.0.1" {
				t.Fatalf("%s from %q: the primary does not head the remote group: %v", tc.name, tc.from, got)
			}
			if tc.name == "any.db.local." && slices.Contains(tc.local, "10.0.0.1") && got[0] != "10.0.0.1" {
				t.Fatalf("%s from %q: the local primary is not first: %v", tc.name, tc.from, got)
			}
		}
	}
}

func TestSelectLocalFirstRotatesEachGroup(t *testing.T) {
	s := twoLocations()
	firstLocal, firstRemote := map[string]bool{}, map[string]bool{}
	for turn := uint64(0); turn < 6; turn++ {
		got, _ := selectFrom(t, s, "replica.db.local.", "west", turn)
		firstLocal[got[0]] = true
		firstRemote[got[2]] = true
	}
	if len(firstLocal) != 2 || len(firstRemote) != 3 {
		t.Fatalf("over 6 turns the local group started with %v, the remote one with %v", firstLocal, firstRemote)
	}
}

func TestSelectDCFilter(t *testing.T) {
	s := twoLocations()
	cases := []struct {
		name string
		want []string // in any order
	}{
		{"dc-east.replica.db.local.", []string{"10.0.0.2", "10.0.0.3"}},
		{"dc-west.replica.db.local.", []string{"10.0.0.4", "10.0.0.5"}},
		{"dc-west.any.db.local.", []string{"10.0.0.4", "10.0.0.5"}}, // the primary is in east
		{"dc-east.any.db.local.", []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}},
		{"dc-east.primary.db.local.", []string{"10.0.0.1"}},
		{"dc-west.primary.db.local.", []string{}}, // fail closed: not in west
		{"dc-west.prefer-replica.db.local.", []string{"10.0.0.4", "10.0.0.5"}},
		{"dc-west.lsn-0-a.prefer-replica.db.local.", []string{"10.0.0.1"}}, // no west replica fits: the primary, wherever it is
		{"dc-west.lsn-0-a.replica.db.local.", []string{}},
	}
	for _, tc := range cases {
		for _, from := range []string{"", "east", "west"} { // the client's location orders, never filters
			got, err := selectFrom(t, s, tc.name, from, 1)
			if err != nil || !sameSet(got, tc.want) {
				t.Errorf("%s from %q: %v %v, want %v", tc.name, from, got, err, tc.want)
			}
		}
	}
}

func TestSelectUnknownLocation(t *testing.T) {
	s := twoLocations()
	s.Networks = NewNetworks([]Network{{netip.MustParsePrefix("10.3.0.0/16"), "north"}})
	for name, want := range map[string]error{
		"dc-south.replica.db.local.": ErrUnknownLocation,
		"dc-south.primary.db.local.": ErrUnknownLocation,
		"dc-north.replica.db.local.": nil, // named by dns.locations: known, no host there
		"dc-west.replica.db.local.":  nil, // a host's label
	} {
		if _, err := selectFrom(t, s, name, "", 0); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}
	for _, c := range []*Snapshot{{}, {Ready: true}} { // readiness and clusters are checked first
		q, _ := Parse("dc-south.replica.db.local.", origin)
		if _, err := (View{Snap: c, Now: t0, Turn: 0}).Select(&q, nil); errors.Is(err, ErrUnknownLocation) {
			t.Errorf("ready=%v: %v", c.Ready, err)
		}
	}
}

func TestExplainLocation(t *testing.T) {
	s := twoLocations()
	q, _ := Parse("dc-west.any.db.local.", origin)
	q.From = "west"
	verdicts, err := (View{Snap: s, Now: t0}).Explain(&q)
	if err != nil {
		t.Fatal(err)
	}
	why := map[string]string{}
	ranks := []int{}
	for _, v := range verdicts {
		why[v.Host.IP.String()] = v.Why
		if v.Selected {
			ranks = append(ranks, v.Rank)
		}
	}
	if why["10.0.0.1"] != "primary: location east, not west" || why["10.0.0.2"] != "location east, not west" ||
		why["10.0.0.6"] != "no location, not west" || why["10.0.0.4"] != "" {
		t.Fatalf("reasons %q", why)
	}
	slices.Sort(ranks)
	if !slices.Equal(ranks, []int{1, 2}) {
		t.Fatalf("ranks %v", ranks)
	}

	q, _ = Parse("replica.db.local.", origin)
	q.From = "west"
	verdicts, _ = (View{Snap: s, Now: t0}).Explain(&q)
	for _, v := range verdicts {
		if v.Selected && (v.Rank <= 2) != (v.Host.Location == "west") {
			t.Fatalf("%s in %q ranked %d", v.Host.Addr, v.Host.Location, v.Rank)
		}
	}
}

func TestNetworksMostSpecificWins(t *testing.T) {
	n := NewNetworks([]Network{
		{netip.MustParsePrefix("10.0.0.0/8"), "east"},
		{netip.MustParsePrefix("10.9.9.0/24"), "west"},
		{netip.MustParsePrefix("10.9.0.0/16"), "north"},
		{netip.MustParsePrefix("10.9.9.7/32"), "south"},
		{netip.MustParsePrefix("2001:db8::/32"), "west"},
		{netip.MustParsePrefix("192.0.2.77/24"), "east"}, // host bits are masked off
	})
	for ip, want := range map[string]string{
		"10.1.2.3":         "east",
		"10.9.1.1":         "north",
		"10.9.9.1":         "west",
		"10.9.9.7":         "south",
		"::ffff:10.9.9.1":  "west", // a dual-stack socket's view of an IPv4 client
		"2001:db8::1":      "west",
		"192.0.2.1":        "east",
		"11.0.0.1":         "",
		"2001:db9::1":      "",
		"fe80::1%eth0":     "",
		"::ffff:192.0.2.9": "east",
	} {
		if got := n.Locate(netip.MustParseAddr(ip)); got != want {
			t.Errorf("Locate(%s) = %q, want %q", ip, got, want)
		}
	}
	if got := n.Names(); !slices.Equal(got, []string{"east", "north", "south", "west"}) {
		t.Errorf("Names() = %v", got)
	}
	for subnet, want := range map[string]struct {
		loc   string
		scope int
	}{
		"10.9.0.0/16":     {"north", 32}, // west's /24 and south's /32 lie inside
		"10.9.8.0/24":     {"north", 24},
		"10.9.9.0/25":     {"west", 32},
		"10.9.9.128/25":   {"west", 25},
		"10.0.0.0/7":      {"", 32},     // no network holds all of it
		"2001:db8:5::/48": {"west", 48}, // IPv4 networks do not narrow an IPv6 subnet
	} {
		if loc, scope := n.LocateSubnet(netip.MustParsePrefix(subnet)); loc != want.loc || scope != want.scope {
			t.Errorf("LocateSubnet(%s) = %q, %d, want %q, %d", subnet, loc, scope, want.loc, want.scope)
		}
	}
	var none *Networks
	if none.Locate(netip.MustParseAddr("10.0.0.1")) != "" || none.Names() != nil {
		t.Error("a nil Networks locates someone")
	}
	if loc, scope := none.LocateSubnet(netip.MustParsePrefix("10.0.0.0/8")); loc != "" || scope != 8 {
		t.Errorf("a nil Networks: LocateSubnet = %q, %d", loc, scope)
	}
	if loc, scope := n.LocateSubnet(netip.Prefix{}); loc != "" || scope != 0 {
		t.Errorf("LocateSubnet of no prefix = %q, %d", loc, scope)
	}
}

func TestSelectLocalFirstAllocations(t *testing.T) {
	s := twoLocations()
	q, _ := Parse("lag-50ms.replica.db.local.", origin)
	q.From = "west"
	buf := make([]*Host, 0, 8)
	allocs := testing.AllocsPerRun(100, func() {
		buf, _ = (View{Snap: s, Now: t0, Turn: 1}).Select(&q, buf[:0])
	})
	if allocs != 0 {
		t.Fatalf("Select allocates %v times per call", allocs)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func TestLocalityOf(t *testing.T) {
	east, west := &Host{Location: "east"}, &Host{Location: "west"}
	for _, tc := range []struct {
		from  string
		hosts []*Host
		want  Locality
	}{
		{"", []*Host{east}, Unlocated},
		{"east", []*Host{east, west}, Local},
		{"west", []*Host{east, west}, Remote},
		{"west", nil, Remote},
	} {
		if got := LocalityOf(tc.from, tc.hosts); got != tc.want {
			t.Errorf("LocalityOf(%q, …) = %v, want %v", tc.from, got, tc.want)
		}
	}
}
