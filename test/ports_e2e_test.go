package test

// A cluster whose hosts listen on different ports, two of them at one IP:
// A answers keep to the cluster's client port, SRV answers carry every
// host's own port and name, and each host's name answers its address.

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// serverOf connects to host:port as a client would and says which server
// it reached: its port and whether it is a replica.
func serverOf(t *testing.T, host string, port uint16) (int, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres sslmode=disable connect_timeout=3", host, port))
	if err != nil {
		t.Fatalf("connect %s:%d: %v", host, port, err)
	}
	defer conn.Close(ctx)
	var p int
	var replica bool
	if err := conn.QueryRow(ctx, "SELECT current_setting('port')::int, pg_is_in_recovery()").Scan(&p, &replica); err != nil {
		t.Fatal(err)
	}
	return p, replica
}

// srvRecords asks pgdns for name's SRV records and the addresses its
// additional section gives their targets.
func (e *env) srvRecords(t *testing.T, name string) ([]*dns.SRV, map[string]string) {
	t.Helper()
	m := e.query(t, "udp", name, dns.TypeSRV)
	if m.Rcode != dns.RcodeSuccess || m.Truncated {
		t.Fatalf("SRV %s: rcode %s, TC %v", name, dns.RcodeToString[m.Rcode], m.Truncated)
	}
	var out []*dns.SRV
	for _, rr := range m.Answer {
		out = append(out, rr.(*dns.SRV))
	}
	addrs := map[string]string{}
	for _, rr := range m.Extra {
		if a, ok := rr.(*dns.A); ok {
			addrs[a.Hdr.Name] = a.A.String()
		}
	}
	return out, addrs
}

// TestHostsOnTwoPorts: the primary on IP1:5432, a replica beside it on
// IP1:5433, one on IP2:5432 (so the client port is 5432). Review found
// replica.db.local answering IP1, where a client on 5432 reaches the
// primary: it failed before the fix (answer [IP1 IP2]). IP1 is two hosts'
// on different ports, so no A answer holds it (review R11: not even for
// the primary; the client port can change).
func TestHostsOnTwoPorts(t *testing.T) {
	t.Parallel()
	b := pgtest.Addrs(t)
	ip1, ip2 := b.IP(11), b.IP(12)
	pg := pgtest.New(t, pgtest.Options{IPs: []string{ip1, ip1, ip2}, Ports: []int{5432, 5433, 5432}})
	e := launch(t, pg, envOptions{Interval: "100ms", Cluster: "    names:\n      pg-beside: " + ip1 + ":5433\n"})
	e.waitFor(t, "any.db.local.", []string{ip2})
	besideName := "pg-beside.host.main.db.local."
	name := func(ip string, port int) string {
		return strings.ReplaceAll(ip, ".", "-") + "-" + strconv.Itoa(port) + ".host.main.db.local."
	}

	t.Run("the start-up log warns, naming the cluster and the host", func(t *testing.T) {
		want := "clusters.main: " + ip1 + ":5432, " + ip1 + ":5433 share an address on different ports"
		if !strings.Contains(e.logs.String(), want) {
			t.Fatalf("no warning %q in the log:\n%s", want, e.logs.String())
		}
	})

	t.Run("A answers reach the selected servers on the client port", func(t *testing.T) {
		for range 4 {
			got := e.ips(t, "replica.db.local.")
			if !slices.Equal(got, []string{ip2}) {
				t.Fatalf("replica.db.local. answered %v, want [%s] (the replica beside the primary is on 5433)", got, ip2)
			}
			for _, ip := range got {
				if port, replica := serverOf(t, ip, 5432); !replica || port != 5432 {
					t.Fatalf("%s:5432 from replica.db.local. reached a primary (port %d)", ip, port)
				}
			}
		}
		if got := e.ips(t, "primary.db.local."); len(got) != 0 {
			t.Fatalf("primary.db.local. answered %v: %s on 5433 is a replica", got, ip1)
		}
		txt := strings.Join(e.txt(t, "replica.db.local."), "\n")
		if !strings.Contains(txt, "host="+ip1+":5433 ") || !strings.Contains(txt, "name="+besideName+" srv_only=address") {
			t.Fatalf("TXT does not say the host on 5433 is SRV only:\n%s", txt)
		}
		_, body := e.get(t, http.DefaultClient, "/v1/resolve?name=replica", "")
		if !strings.Contains(body, `"addr":"`+ip1+`:5433","reason":"address `+ip1+` is also another configured host's on another port: answered by SRV only (_postgresql._tcp.), never by A or AAAA (a client on either port could reach the wrong server)","srv_only":true`) {
			t.Fatalf("/v1/resolve: %s", body)
		}
	})

	t.Run("SRV answers carry each host's port and name", func(t *testing.T) {
		recs, addrs := e.srvRecords(t, "_postgresql._tcp.replica.db.local.")
		got := map[string]uint16{}
		for _, r := range recs {
			got[r.Target] = r.Port
			ip := addrs[r.Target]
			if ip == "" {
				t.Fatalf("no address for %s in the additional section", r.Target)
			}
			if port, replica := serverOf(t, ip, r.Port); !replica || port != int(r.Port) {
				t.Fatalf("%s (%s:%d) reached port %d, replica %v", r.Target, ip, r.Port, port, replica)
			}
		}
		if len(got) != 2 || got[besideName] != 5433 || got[name(ip2, 5432)] != 5432 {
			t.Fatalf("SRV replica: %v", recs)
		}
		recs, _ = e.srvRecords(t, "_postgresql._tcp.main.db.local.")
		prio := map[string]uint16{}
		for _, r := range recs {
			prio[r.Target] = r.Priority
		}
		if len(prio) != 3 || prio[name(ip1, 5432)] != 10 || prio[besideName] != 20 || prio[name(ip2, 5432)] != 20 {
			t.Fatalf("SRV of the cluster: %v", recs)
		}
	})

	t.Run("every host's name answers its address", func(t *testing.T) {
		for _, n := range []string{name(ip1, 5432), besideName, name(ip2, 5432)} {
			if got := e.ips(t, n); len(got) != 1 {
				t.Fatalf("%s answered %v", n, got)
			}
		}
		_, body := e.get(t, http.DefaultClient, "/v1/hosts", "")
		if !strings.Contains(body, `"port":5433,"name":"pg-beside.host.main.db.local"`) {
			t.Fatalf("/v1/hosts: %s", body)
		}
	})

	t.Run("the replica beside the old primary promoted: SRV only", func(t *testing.T) {
		switchover(t, pg.Nodes[0], pg.Nodes[1])
		testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "SRV primary to name the promoted host", func() (string, bool) {
			recs, _ := e.srvRecords(t, "_postgresql._tcp.primary.db.local.")
			return fmt.Sprint(recs), len(recs) == 1 && recs[0].Target == besideName && recs[0].Port == 5433
		})
		// Its address on the client port is where the old primary was:
		// an A answer would send clients there.
		if got := e.ips(t, "primary.db.local."); len(got) != 0 {
			t.Fatalf("primary.db.local. answered %v for a primary on port 5433", got)
		}
		if got := e.ips(t, besideName); !slices.Equal(got, []string{ip1}) {
			t.Fatalf("%s answered %v", besideName, got)
		}
		// The stopped old primary's name still answers its address: a
		// name for the machine, whatever its health.
		testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "the old primary to be down", func() (string, bool) {
			txt := strings.Join(e.txt(t, name(ip1, 5432)), "")
			return txt, strings.Contains(txt, "role=down")
		})
		if got := e.ips(t, name(ip1, 5432)); !slices.Equal(got, []string{ip1}) {
			t.Fatalf("%s (down) answered %v", name(ip1, 5432), got)
		}
	})
}
