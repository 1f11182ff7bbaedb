package zone

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// A primary whose new sessions are read-only (default_transaction_read_only
// on, review 5 F3) stays the cluster's primary, but primary answers no
// host: libpq's target_session_attrs=read-write refuses it, and a writer
// sent there is refused its first write. Reads go on: any and
// prefer-replica's fallback still answer it.
func TestReadOnlyPrimaryIsNotAnsweredByPrimary(t *testing.T) {
	const why = "default_transaction_read_only is on"
	s := drainCluster(func(i int, h *Host) { h.DefaultReadOnly = i == 0 })
	cl := s.Clusters[0]
	p := cl.PrimaryHost()
	if p == nil || p.Addr != cl.Hosts[0].Addr || !p.ReadOnly || !strings.Contains(p.Note, why) {
		t.Fatalf("primary %+v: want 10.0.0.1, read-only, its note saying %q", p, why)
	}
	for name, want := range map[string][]string{
		"primary.db.local.":                  {},
		"_postgresql._tcp.primary.db.local.": {},
		"any.db.local.":                      {"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"},
		"lag-50ms.replica.db.local.":         {"10.0.0.2", "10.0.0.3", "10.0.0.4"},
		"dc-east.any.db.local.":              {"10.0.0.1", "10.0.0.2", "10.0.0.3"},
		"dc-north.prefer-replica.db.local.":  {"10.0.0.1"}, // no replica there: the fallback reads from the primary
	} {
		if got := sorted(selectIPs(t, withNorth(s), name, t0, 0)); !slices.Equal(got, want) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	v := View{Snap: s, Now: t0}
	if got := v.AnsweredPrimary(cl); got != nil {
		t.Errorf("AnsweredPrimary = %s, want none: primary answers no host", got.Addr)
	}
	if got := v.WritablePrimary(cl); got != nil {
		t.Errorf("WritablePrimary = %s, want none", got.Addr)
	}
	if got := v.Primary(cl); got != p {
		t.Errorf("Primary = %v, want the read-only primary: it is still the cluster's", got)
	}
	q, _ := Parse("primary.db.local.", origin)
	verdicts, err := v.Explain(&q)
	if err != nil {
		t.Fatal(err)
	}
	if why := verdicts[0].Why; verdicts[0].Selected || !strings.HasPrefix(why, "primary: refuses writes (read_only): "+readOnlyNote) {
		t.Errorf("/v1/resolve says %q for the primary, want why it refuses writes", why)
	}

	// A value of pgdns's own (a role, database or connection setting for
	// its session) says nothing of the applications' sessions: it is not
	// used, whatever it says, and the note says a fence cannot be seen
	// (review 5 F16: a read-only probe role emptied primary).
	const hidden = `"default_transaction_read_only=on" is set by ALTER ROLE ... SET for pgdns's session, which hides the server's value: a fence of the server's (ALTER SYSTEM SET default_transaction_read_only = on) cannot be seen`
	for _, on := range []bool{true, false} {
		s := drainCluster(func(i int, h *Host) {
			if i == 0 {
				h.DefaultReadOnly, h.ReadOnlyShadowed = on, hidden
			}
		})
		p := s.Clusters[0].PrimaryHost()
		if p == nil || p.ReadOnly || !strings.Contains(p.Note, hidden) {
			t.Fatalf("session value %v, hidden: primary %+v, want answered, its note saying the fence cannot be seen", on, p)
		}
		if got := selectIPs(t, s, "primary.db.local.", t0, 0); !slices.Equal(got, []string{"10.0.0.1"}) {
			t.Errorf("session value %v, hidden: primary.db.local = %v, want 10.0.0.1", on, got)
		}
	}
	// default_transaction_read_only on a replica changes nothing: every
	// replica's sessions are read-only anyway.
	s = drainCluster(func(i int, h *Host) { h.DefaultReadOnly = i > 0 })
	if got := selectIPs(t, s, "primary.db.local.", t0, 0); !slices.Equal(got, []string{"10.0.0.1"}) {
		t.Errorf("primary.db.local = %v with read-only replicas, want 10.0.0.1", got)
	}
	for _, h := range s.Clusters[0].Hosts {
		if h.ReadOnly || h.Note != "" {
			t.Errorf("%s: read-only %v, note %q; want neither", h.Addr, h.ReadOnly, h.Note)
		}
	}
}

// withNorth adds the location north, where no host is, so that a dc-north
// name is known and answered only by prefer-replica's fallback.
func withNorth(s *Snapshot) *Snapshot {
	c := *s
	c.Networks = NewNetworks([]Network{{Prefix: netip.MustParsePrefix("192.0.2.0/24"), Location: "north"}})
	return &c
}

// A primary refusing writes, or no longer, changes the role answer of
// primary: the SOA serial moves, and the change is an event
// (read_only_began with why, read_only_ended).
func TestReadOnlyChangesSerialAndEvents(t *testing.T) {
	p, r := changeHost(1, false, 1), changeHost(2, true, 1)
	open := changeSnap(nil, p, r)
	p.DefaultReadOnly = true
	fenced := changeSnap(open, p, r)
	fenced.Built = open.Built.Add(5e9)
	fenced.StampSerials(open)
	if !SerialLess(open.Clusters[0].Serial, fenced.Clusters[0].Serial) {
		t.Errorf("serial %d -> %d: a fence changes primary's answer", open.Clusters[0].Serial, fenced.Clusters[0].Serial)
	}
	chs := Changes(open, fenced)
	if got := show(chs); got != "read_only_began main "+p1 {
		t.Errorf("changes = %q, want read_only_began main %s", got, p1)
	} else if !strings.Contains(chs[0].Detail, "default_transaction_read_only is on") {
		t.Errorf("read_only_began says %q, want why", chs[0].Detail)
	}
	if got := show(Changes(fenced, changeSnap(fenced, changeHost(1, false, 1), r))); got != "read_only_ended main "+p1 {
		t.Errorf("changes = %q, want read_only_ended main %s", got, p1)
	}
}
