package app

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/config"
	"github.com/pgdns/pgdns/internal/patroni"
	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/zone"
)

// TestEffectiveLocations: Patroni's members join the configured hosts,
// their dc tag gives their location, and a location in the configuration
// wins over the tag; the configuration itself is left as it was.
func TestEffectiveLocations(t *testing.T) {
	a := &App{discovered: map[string][]patroni.Member{"main": {
		{Addr: "10.0.0.1:5432", Location: "west"}, // configured in east: the config wins
		{Addr: "10.0.0.2:5432", Location: "west"},
		{Addr: "10.0.0.3:5432"}, // no tag, no location
	}}}
	configured := map[string]string{"10.0.0.1:5432": "east"}
	cfg := &config.Config{Clusters: []config.Cluster{{Name: "main", Hosts: []string{"10.0.0.1:5432"},
		Patroni: []string{"http://10.0.0.1:8008"}, Locations: maps.Clone(configured)}}}
	got := a.effective(cfg).Clusters[0]
	if want := []string{"10.0.0.1:5432", "10.0.0.2:5432", "10.0.0.3:5432"}; !slices.Equal(got.Hosts, want) {
		t.Fatalf("hosts %v, want %v", got.Hosts, want)
	}
	if want := map[string]string{"10.0.0.1:5432": "east", "10.0.0.2:5432": "west"}; !maps.Equal(got.Locations, want) {
		t.Fatalf("locations %v, want %v", got.Locations, want)
	}
	if !maps.Equal(cfg.Clusters[0].Locations, configured) || len(cfg.Clusters[0].Hosts) != 1 {
		t.Fatalf("effective changed the configuration: %+v", cfg.Clusters[0])
	}
}

// TestKickedDiscoveryBacksOff: while the probe keeps asking (a writable
// member without the leader key that stays so), Patroni is read at most
// every 100 ms at first and ever less often while the reads move no
// leader key; a moved key is heard at the next read.
func TestKickedDiscoveryBacksOff(t *testing.T) {
	var reads atomic.Int32
	leader := atomic.Value{}
	leader.Store("n1")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reads.Add(1)
		l := leader.Load().(string)
		fmt.Fprintf(w, `{"members":[{"name":"n1","host":"10.0.0.1","port":5432,"role":%q},{"name":"n2","host":"10.0.0.2","port":5432,"role":%q}]}`,
			map[bool]string{true: "leader", false: "replica"}[l == "n1"], map[bool]string{true: "leader", false: "replica"}[l == "n2"])
	}))
	defer srv.Close()
	a := &App{log: slog.New(slog.DiscardHandler), discovered: map[string][]patroni.Member{}, discoFailed: map[string]bool{},
		refused: map[string]string{}, discoKick: make(chan struct{}, 1), discoDone: make(chan struct{}),
		cfg: &config.Config{Clusters: []config.Cluster{{Name: "main", Patroni: []string{srv.URL}}}}}
	ctx, cancel := context.WithCancel(context.Background())
	go a.discoveryLoop(ctx)
	defer func() { cancel(); <-a.discoDone }()
	kick := func(d time.Duration) {
		testkit.Holds(d, 5*time.Millisecond, func() bool { a.kickDiscovery("main"); return true })
	}
	kick(3 * time.Second)
	if n := reads.Load(); n < 3 || n > 12 {
		t.Errorf("%d reads of /cluster in 3 s of kicks every 5 ms, want a few (backing off from 100 ms to 2 s)", n)
	}
	leader.Store("n2")
	kick(2500 * time.Millisecond) // the gap is at most discoveryInterval by now
	a.mu.Lock()
	got := patroni.Leader(a.discovered["main"])
	a.mu.Unlock()
	if got != "10.0.0.2:5432" {
		t.Errorf("leader %q after the key moved, want 10.0.0.2:5432", got)
	}
}

// TestMemberNamesLabelHosts: a Patroni member's name labels its host,
// sanitised when it is not a valid label (with a WARN line naming the
// member and the name used), never refused; it wins over the
// configuration's names; a member whose name leaves nothing is named by
// its address.
func TestMemberNamesLabelHosts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"members":[{"name":"pg1","host":"10.0.0.1","port":5432,"role":"leader"},`+
			`{"name":"PG_Node.2","host":"10.0.0.2","port":5432,"role":"replica"},{"name":"__","host":"10.0.0.3","port":5433,"role":"replica"}]}`)
	}))
	defer srv.Close()
	logs := &testkit.Buffer{}
	a := &App{log: slog.New(slog.NewTextHandler(logs, nil)), discovered: map[string][]patroni.Member{}, discoFailed: map[string]bool{},
		refused: map[string]string{},
		cfg: &config.Config{Clusters: []config.Cluster{{Name: "main", Patroni: []string{srv.URL},
			Names: map[string]string{"10.0.0.1:5432": "configured"}}}}}
	if !a.discover(context.Background()) {
		t.Fatal("no members read")
	}
	got := a.effective(a.cfg).Clusters[0].Names
	if want := map[string]string{"10.0.0.1:5432": "pg1", "10.0.0.2:5432": "pg-node-2"}; !maps.Equal(got, want) {
		t.Errorf("names %v, want %v", got, want)
	}
	for _, line := range []string{
		`level=WARN msg="Patroni member name is not a valid host label; its host name uses another" cluster=main member=PG_Node.2 addr=10.0.0.2:5432 label=pg-node-2 host_name=pg-node-2.host.main`,
		`member=__ addr=10.0.0.3:5433 label=10-0-0-3-5433 host_name=10-0-0-3-5433.host.main`,
	} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("log lacks %q:\n%s", line, logs)
		}
	}
}

// TestCollidingMemberNamesLabelNeither: review R13. Members node_1 and
// NODE-1 both sanitise to node-1; before, the label went to whichever
// came first in the list, so node-1.host.main answered 10.0.0.11, then
// 10.0.0.14 once node_1 left, then 10.0.0.11 again, and the WARN named
// NODE-1 as having it while node_1 did. Now, once they have met, neither
// host has the label while pgdns runs (each is named by its address),
// whoever comes and goes, and the WARN names both members and addresses.
func TestCollidingMemberNamesLabelNeither(t *testing.T) {
	var list atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"members":[`+list.Load().(string)+`]}`)
	}))
	defer srv.Close()
	member := func(name, host, role string) string {
		return fmt.Sprintf(`{"name":%q,"host":%q,"port":5432,"role":%q}`, name, host, role)
	}
	n1, n3, n14 := member("node_1", "10.0.0.11", "replica"), member("n3", "10.0.0.13", "leader"), member("NODE-1", "10.0.0.14", "replica")
	logs := &testkit.Buffer{}
	a := &App{log: slog.New(slog.NewTextHandler(logs, nil)), discovered: map[string][]patroni.Member{}, discoFailed: map[string]bool{},
		refused: map[string]string{}, cfg: &config.Config{Clusters: []config.Cluster{{Name: "main", Patroni: []string{srv.URL}}}}}
	labels := func() map[string]string {
		eff := a.effective(a.cfg).Clusters[0]
		got, _ := zone.AssignLabels(eff.Hosts, eff.Names)
		out := map[string]string{}
		for i, h := range eff.Hosts {
			out[h] = got[i]
		}
		return out
	}
	for _, step := range []struct {
		members string
		want    map[string]string
	}{
		{n1 + "," + n3, map[string]string{"10.0.0.11:5432": "node-1", "10.0.0.13:5432": "n3"}},
		{n1 + "," + n3 + "," + n14, map[string]string{"10.0.0.11:5432": "10-0-0-11-5432", "10.0.0.13:5432": "n3", "10.0.0.14:5432": "10-0-0-14-5432"}},
		{n3 + "," + n14, map[string]string{"10.0.0.13:5432": "n3", "10.0.0.14:5432": "10-0-0-14-5432"}},
		{n14 + "," + n3 + "," + n1, map[string]string{"10.0.0.11:5432": "10-0-0-11-5432", "10.0.0.13:5432": "n3", "10.0.0.14:5432": "10-0-0-14-5432"}},
	} {
		list.Store(step.members)
		a.discover(context.Background())
		if got := labels(); !maps.Equal(got, step.want) {
			t.Errorf("members %s: labels %v, want %v", step.members, got, step.want)
		}
	}
	for _, line := range []string{
		`msg="Patroni member names sanitise to one host label; no member's host uses it while pgdns runs, each is named by its address" cluster=main label=node-1 members=NODE-1@10.0.0.14:5432,node_1@10.0.0.11:5432`,
		`msg="Patroni member name is not a valid host label; its host name uses another" cluster=main member=NODE-1 addr=10.0.0.14:5432 label=10-0-0-14-5432 host_name=10-0-0-14-5432.host.main`,
		`msg="Patroni member name is not a valid host label; its host name uses another" cluster=main member=node_1 addr=10.0.0.11:5432 label=10-0-0-11-5432 host_name=10-0-0-11-5432.host.main`,
	} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("log lacks %q:\n%s", line, logs)
		}
	}
	if n := strings.Count(logs.String(), "sanitise to one host label"); n != 1 {
		t.Errorf("the collision warned %d times, want once", n)
	}
	if _, after, _ := strings.Cut(logs.String(), "sanitise to one host label"); strings.Contains(after, "label=node-1 host_name") {
		t.Errorf("after the collision, a WARN says a member has node-1:\n%s", logs)
	}
}

// A Patroni member name that would give a host name longer than DNS
// allows is cut and hashed to fit, with a WARN line (review S9: every SRV
// answer naming the host was a malformed packet).
func TestLongMemberNameShortened(t *testing.T) {
	long := strings.Repeat("h", 63)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"members":[{"name":"`+long+`","host":"10.0.0.1","port":5432,"role":"leader"},{"name":"pg2","host":"10.0.0.2","port":5432,"role":"replica"}]}`)
	}))
	defer srv.Close()
	z := strings.Repeat("a", 50) + "." + strings.Repeat("a", 50) + "." + strings.Repeat("a", 50) + ".local"
	c := strings.Repeat("c", 60)
	logs := &testkit.Buffer{}
	a := &App{log: slog.New(slog.NewTextHandler(logs, nil)), discovered: map[string][]patroni.Member{}, discoFailed: map[string]bool{},
		refused: map[string]string{},
		cfg:     &config.Config{DNS: config.DNS{Zone: z}, Clusters: []config.Cluster{{Name: c, Patroni: []string{srv.URL}}}}}
	if !a.discover(context.Background()) {
		t.Fatal("no members read")
	}
	got := a.effective(a.cfg).Clusters[0].Names
	label := got["10.0.0.1:5432"]
	if !zone.ValidHostLabel(label) || zone.HostNameOctets(label, c, z) > zone.MaxNameOctets || !strings.HasPrefix(label, "hhh") || got["10.0.0.2:5432"] != "pg2" {
		t.Errorf("names %v: the long member's label %q is %d octets as a host name", got, label, zone.HostNameOctets(label, c, z))
	}
	want := `level=WARN msg="Patroni member name gives a host name longer than DNS allows (255 octets); its host name uses a shorter label" cluster=` + c + ` member=` + long + ` addr=10.0.0.1:5432 label=` + label
	if !strings.Contains(logs.String(), want) {
		t.Errorf("log lacks %q:\n%s", want, logs)
	}
}
