package dnsserver

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// countCheckingWriter fails the test if an answer is written before
// OnAnswer has counted it.
type countCheckingWriter struct {
	discardWriter
	t       *testing.T
	counted *int
}

func (w *countCheckingWriter) WriteMsg(m *dns.Msg) error {
	if *w.counted != 1 {
		w.t.Errorf("%s: the answer was written with %d answers counted, want it counted first", m.Question[0].Name, *w.counted)
	}
	return w.discardWriter.WriteMsg(m)
}

// Each answer is counted before it is written, so that a client (or a
// test) that has the answer and then scrapes /metrics finds it counted.
func TestAnswerCountedBeforeItIsWritten(t *testing.T) {
	h := newTestHandler(testSnapshot())
	counted := 0
	h.onAns = func(Asked, int) { counted++ }
	for _, name := range []string{"primary.db.local.", "nope.db.local.", "example.com."} {
		counted = 0
		req := new(dns.Msg)
		req.SetQuestion(name, dns.TypeA)
		h.ServeDNS(&countCheckingWriter{t: t, counted: &counted}, req)
		if counted != 1 {
			t.Errorf("%s: counted %d times", name, counted)
		}
	}
}

// Each answer is timed once (OnLatency), before it is sent, on the path
// that built it and with the rcode it carries: a role name over UDP on the
// fast path, the rest (TCP, another type, a name outside the grammar) on
// the slow. Through a real server: the UDP reader times the fast path.
func TestAnswerTimedOnItsPath(t *testing.T) {
	h := newTestHandler(testSnapshot())
	type timing struct {
		path  Path
		rcode int
	}
	var (
		mu  sync.Mutex
		got []timing
	)
	h.onLat = func(p Path, rcode int, took time.Duration) {
		if took < 0 { // 0 is possible: a coarse clock
			t.Errorf("latency %v", took)
		}
		mu.Lock()
		got = append(got, timing{p, rcode})
		mu.Unlock()
	}
	srv, err := Start("127.0.0.1:0", h, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	for _, c := range []struct {
		name  string
		qtype uint16
		net   string
		want  timing
	}{
		{"primary.db.local.", dns.TypeA, "udp", timing{PathFast, dns.RcodeSuccess}},
		{"replica.db.local.", dns.TypeAAAA, "udp", timing{PathFast, dns.RcodeSuccess}},
		{"primary.db.local.", dns.TypeA, "tcp", timing{PathSlow, dns.RcodeSuccess}},
		{"primary.db.local.", dns.TypeTXT, "udp", timing{PathSlow, dns.RcodeSuccess}},
		{"nope.db.local.", dns.TypeA, "udp", timing{PathSlow, dns.RcodeNameError}},
		{"replica.nosuchcluster.db.local.", dns.TypeA, "tcp", timing{PathSlow, dns.RcodeNameError}},
	} {
		mu.Lock()
		got = got[:0]
		mu.Unlock()
		req := new(dns.Msg)
		req.SetQuestion(c.name, c.qtype)
		if _, _, err := (&dns.Client{Net: c.net, Timeout: 5 * time.Second}).Exchange(req, srv.Addr()); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		if len(got) != 1 || got[0] != c.want {
			t.Errorf("%s %s over %s: timed %+v, want once as %+v", c.name, dns.TypeToString[c.qtype], c.net, got, c.want)
		}
		mu.Unlock()
	}
}
