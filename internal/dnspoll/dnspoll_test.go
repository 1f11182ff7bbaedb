package dnspoll

import (
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/testkit"
)

// A poller against a server whose answer moves from one address to
// another keeps every answer, sorted, and finds when each was answered.
func TestPollerSeesTheAnswerMove(t *testing.T) {
	var answer atomic.Value
	answer.Store([]string{"10.0.0.2", "10.0.0.1"})
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		for _, ip := range answer.Load().([]string) {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1}, A: net.ParseIP(ip)})
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	defer srv.Shutdown()

	p := Start(pc.LocalAddr().String(), "primary.db.local.", time.Millisecond, time.Second)
	testkit.Eventually(t, 10*time.Second, time.Millisecond, "a first answer", func() (Answer, bool) { return p.Latest() })
	answer.Store([]string{"10.0.0.3"})
	moved := time.Now()
	testkit.Eventually(t, 10*time.Second, time.Millisecond, "an answer of 10.0.0.3 alone", func() (Answer, bool) {
		a, _ := p.Latest()
		return a, slices.Equal(a.IPs, []string{"10.0.0.3"})
	})
	got := p.Finish()
	if !slices.Equal(got[0].IPs, []string{"10.0.0.1", "10.0.0.2"}) || got[0].Rcode != dns.RcodeSuccess {
		t.Fatalf("first answer %+v, want both addresses sorted", got[0])
	}
	if last, first := LastWith(got, "10.0.0.1"), FirstWith(got, "10.0.0.3", time.Time{}); last.IsZero() || first.Before(moved) || !last.Before(first) {
		t.Fatalf("10.0.0.1 last at %v, 10.0.0.3 first at %v, moved at %v", last, first, moved)
	}
	if !FirstWith(got, "10.0.0.1", moved.Add(time.Hour)).IsZero() {
		t.Fatal("FirstWith found an answer after every answer")
	}
}
