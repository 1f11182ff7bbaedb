package dnsserver

import (
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/zone"
)

// Review 5, F12: a token on a forked timeline is proven by no host, and no
// refresh can change that: the lookup is answered at once (no lsn_wait, no
// refresh round), with no address, and its TXT says why.
func TestForkedTokenNeitherWaitsNorRefreshes(t *testing.T) {
	snap := testSnapshot()
	c := snap.Cluster("main")
	c.ForkedTimelines = []zone.TimelineFork{{Timeline: c.NewestTimeline, Note: "127.0.0.9:5432 writable on it at 0/3000000, then 127.0.0.1:5432 at 0/3000100"}}
	h := newTestHandler(snap)
	never := make(chan struct{})
	defer close(never)
	var refreshes atomic.Int64
	h.lsnWait = 20 * time.Second
	h.refresh = func(string) <-chan struct{} { refreshes.Add(1); return never }
	for _, qtype := range []uint16{dns.TypeA, dns.TypeTXT} {
		req := new(dns.Msg)
		req.SetQuestion("lsn-0-3000061.replica.db.local.", qtype)
		start := time.Now()
		m, _ := h.reply(req, netip.MustParseAddr("127.0.0.1"), true)
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s waited %v", dns.TypeToString[qtype], d)
		}
		if m.Rcode != dns.RcodeSuccess {
			t.Fatalf("%s: %s", dns.TypeToString[qtype], dns.RcodeToString[m.Rcode])
		}
		var txt []string
		for _, rr := range m.Answer {
			switch rr := rr.(type) {
			case *dns.A:
				t.Errorf("answered %s on a forked timeline", rr.A)
			case *dns.TXT:
				txt = append(txt, strings.Join(rr.Txt, ""))
			}
		}
		if qtype == dns.TypeTXT && (len(txt) != 1 || !strings.HasPrefix(txt[0], "unprovable=timeline ") || !strings.HasSuffix(txt[0], ": the token's branch is unknown")) {
			t.Errorf("TXT %q, want one string saying the timeline forked", txt)
		}
	}
	if n := refreshes.Load(); n != 0 {
		t.Errorf("%d refresh rounds asked for a token no refresh can prove", n)
	}
}
