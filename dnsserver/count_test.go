package dnsserver

import (
	"testing"

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
