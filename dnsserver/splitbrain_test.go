package dnsserver

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/zone/zonetest"
)

// Review 7, H10: during a split brain no name of the cluster answers the
// writers or a replica on the split timeline; every name's TXT says why in
// one split_brain= string (no host's string does, since none is in the
// answer). Other clusters' names say nothing of it.
func TestSplitBrainTXTSaysWhy(t *testing.T) {
	snap := zonetest.Ready(t0, 2*time.Second,
		zonetest.Cluster("main", host("127.0.0.11", false, 0x3000060), host("127.0.0.12", true, 0x3000060),
			host("127.0.0.13", false, 0x3000100)),
		zonetest.Cluster("orders", host("127.0.0.21", false, 5), host("127.0.0.22", true, 5)))
	h := newTestHandler(snap)
	const want = "split_brain=split brain on timeline 1: its branch may be lost; writable: 127.0.0.11:5432,127.0.0.13:5432 " +
		"(no primary, and no replica on the timeline, is answered)"
	for _, name := range []string{"replica.db.local.", "primary.db.local.", "any.db.local.", "lsn-0-10.prefer-replica.db.local."} {
		for _, qtype := range []uint16{dns.TypeA, dns.TypeTXT} {
			req := new(dns.Msg)
			req.SetQuestion(name, qtype)
			m, _ := h.reply(req, netip.MustParseAddr("127.0.0.1"), true)
			if m.Rcode != dns.RcodeSuccess {
				t.Fatalf("%s %s: %s", name, dns.TypeToString[qtype], dns.RcodeToString[m.Rcode])
			}
			var txt []string
			for _, rr := range m.Answer {
				switch rr := rr.(type) {
				case *dns.A:
					t.Errorf("%s answered %s during a split brain", name, rr.A)
				case *dns.TXT:
					txt = append(txt, strings.Join(rr.Txt, ""))
				}
			}
			if qtype == dns.TypeTXT && (len(txt) != 1 || txt[0] != want) {
				t.Errorf("TXT %s = %q, want [%q]", name, txt, want)
			}
		}
	}
	req := new(dns.Msg)
	req.SetQuestion("replica.orders.db.local.", dns.TypeTXT)
	m, _ := h.reply(req, netip.MustParseAddr("127.0.0.1"), true)
	for _, rr := range m.Answer {
		if txt, ok := rr.(*dns.TXT); ok && strings.Contains(strings.Join(txt.Txt, ""), "split_brain=") {
			t.Errorf("another cluster's TXT speaks of main's split brain: %q", txt.Txt)
		}
	}
}
