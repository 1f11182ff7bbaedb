package test

// Several pgdns instances serve one zone: each probes the hosts itself and
// nothing is shared, so two instances with the same config must give the
// same answers, and after a change they must agree again within a probe
// round or so.

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// sameAnswerNames are the questions two instances must answer alike: every
// role and alias, each filter kind with a bound every live replica passes
// at rest, the apex and name-server records, and the negative answers.
var sameAnswerNames = []struct {
	name  string
	qtype uint16
}{
	{"primary.db.local.", dns.TypeA}, {"master.db.local.", dns.TypeA},
	{"replica.db.local.", dns.TypeA}, {"standby.db.local.", dns.TypeA},
	{"prefer-replica.db.local.", dns.TypeA}, {"prefer-standby.db.local.", dns.TypeA},
	{"any.db.local.", dns.TypeA}, {"primary.main.db.local.", dns.TypeA},
	{"lag-30s.replica.db.local.", dns.TypeA}, {"bytes-1gb.replica.db.local.", dns.TypeA},
	{"lsn-0-1.replica.db.local.", dns.TypeA}, {"lag-30s.bytes-1gb.any.db.local.", dns.TypeA},
	{"lsn-ffffffff-0.replica.db.local.", dns.TypeA}, // no replica has replayed it: NODATA
	{"primary.db.local.", dns.TypeTXT}, {"replica.db.local.", dns.TypeTXT}, {"any.db.local.", dns.TypeTXT},
	{"primary.db.local.", dns.TypeAAAA},
	{"db.local.", dns.TypeSOA}, {"db.local.", dns.TypeNS}, {"main.db.local.", dns.TypeSOA},
	{"main.db.local.", dns.TypeA}, {"ns1.db.local.", dns.TypeA}, {"ns2.db.local.", dns.TypeA},
	{"nope.db.local.", dns.TypeA}, {"primary.nope.db.local.", dns.TypeA},
	{"primary.example.com.", dns.TypeA},
}

// answerSet renders a reply as what must not differ between instances:
// the rcode and flags, then each section's records as sorted text. Three
// things may differ and are left out: the SOA serial (each instance counts
// its own changes), a TXT record's measurements (lag, age: each instance
// probes at its own moments; the host and its role stay), and the order
// of addresses (replica answers rotate).
func answerSet(m *dns.Msg) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s aa=%v", dns.RcodeToString[m.Rcode], m.Authoritative)
	for i, section := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		var rrs []string
		for _, rr := range section {
			switch v := rr.(type) {
			case *dns.OPT:
				continue
			case *dns.SOA:
				c := *v
				c.Serial = 0
				rr = &c
			case *dns.TXT:
				c := *v
				c.Txt = []string{strings.Join(slices.DeleteFunc(strings.Fields(strings.Join(v.Txt, "")), func(f string) bool {
					return !strings.HasPrefix(f, "host=") && !strings.HasPrefix(f, "role=")
				}), " ")}
				rr = &c
			}
			rrs = append(rrs, rr.String())
		}
		slices.Sort(rrs)
		fmt.Fprintf(&b, "\n%d: %s", i, strings.Join(rrs, " | "))
	}
	return b.String()
}

// differences asks both instances every sameAnswerNames question and
// returns the ones they answer differently.
func differences(t *testing.T, a, b *env) []string {
	t.Helper()
	var diff []string
	for _, n := range sameAnswerNames {
		ra, rb := answerSet(a.query(t, "udp", n.name, n.qtype)), answerSet(b.query(t, "udp", n.name, n.qtype))
		if ra != rb {
			diff = append(diff, fmt.Sprintf("%s %s:\n  one: %s\n  two: %s", n.name, dns.TypeToString[n.qtype], ra, rb))
		}
	}
	return diff
}

// TestTwoInstancesAnswerAlike: two pgdns with the same config on one real
// cluster answer every name alike at rest (serials aside), name both
// instances in NS and glue, and agree again after a switchover.
func TestTwoInstancesAnswerAlike(t *testing.T) {
	t.Parallel()
	b := pgtest.Addrs(t)
	p, r1, r2 := b.IP(11), b.IP(12), b.IP(13)
	pg := pgtest.New(t, pgtest.Options{IPs: []string{p, r1, r2}})
	ns := []string{"ns1=" + b.IP(53), "ns2=" + b.IP(54)}
	one := attach(t, pg, envOptions{NameServers: ns})
	two := attach(t, pg, envOptions{NameServers: ns})
	// At rest: each instance has probed enough to vouch for every
	// replica's lag (a fresh instance fails closed until it can).
	for _, e := range []*env{one, two} {
		for _, name := range []string{"replica.db.local.", "lag-30s.replica.db.local.", "bytes-1gb.replica.db.local."} {
			e.waitFor(t, name, []string{r1, r2})
		}
	}
	if got := answerIPs(t, one.query(t, "udp", "ns2.db.local.", dns.TypeA)); !slices.Equal(got, []string{b.IP(54)}) {
		t.Fatalf("ns2.db.local. %v, want %s", got, b.IP(54))
	}

	// At rest. A round asks each instance in turn, not at one instant, and
	// a probe delayed on a loaded machine can leave a lag filter failing
	// closed for a moment: a round with differences is asked again, five
	// rounds 250 ms apart at most.
	for round := 1; ; round++ {
		diff := differences(t, one, two)
		if len(diff) == 0 {
			t.Logf("at rest the instances answered alike in round %d", round)
			break
		}
		if round == 5 {
			t.Fatalf("the instances answer differently at rest, %d rounds in a row:\n%s", round, strings.Join(diff, "\n"))
		}
		time.Sleep(250 * time.Millisecond)
	}

	// A switchover; the other replica follows the new primary. Both
	// instances get there on their own probes and agree again.
	promoted := switchover(t, pg.Nodes[0], pg.Nodes[1])
	pg.Nodes[2].Follow(t, pg.Nodes[1])
	var at [2]time.Duration
	for i, e := range []*env{one, two} {
		e.waitFor(t, "primary.db.local.", []string{r1})
		e.waitFor(t, "replica.db.local.", []string{r2})
		at[i] = time.Since(promoted)
	}
	var diff []string
	testkit.Poll(20*time.Second, 100*time.Millisecond, func() bool {
		diff = differences(t, one, two)
		return len(diff) == 0
	})
	if len(diff) > 0 {
		t.Fatalf("20 s after the switchover the instances still answer differently:\n%s", strings.Join(diff, "\n"))
	}
	serial := func(e *env) uint32 { return e.query(t, "udp", "db.local.", dns.TypeSOA).Answer[0].(*dns.SOA).Serial }
	t.Logf("after the switchover both instances answered the new roles (%v and %v after the promote) and agree on every name; SOA serials %d and %d",
		at[0].Round(time.Millisecond), at[1].Round(time.Millisecond), serial(one), serial(two))
}
