package dnsserver

import (
	"net"
	"testing"

	"github.com/miekg/dns"
)

// discardWriter is a dns.ResponseWriter that packs the answer, as the real
// one does, and throws it away.
type discardWriter struct{ buf []byte }

func (w *discardWriter) LocalAddr() net.Addr {
	return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53}
}
func (w *discardWriter) RemoteAddr() net.Addr {
	return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 40000}
}
func (w *discardWriter) WriteMsg(m *dns.Msg) error {
	b, err := m.PackBuffer(w.buf)
	w.buf = b[:0]
	return err
}
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) Close() error                { return nil }
func (w *discardWriter) TsigStatus() error           { return nil }
func (w *discardWriter) TsigTimersOnly(bool)         {}
func (w *discardWriter) Hijack()                     {}

// BenchmarkHandler measures one whole query through ServeDNS: parse,
// select, build, pack.
func BenchmarkHandler(b *testing.B) {
	benchServeDNS(b, dns.TypeA, "primary.db.local.", "replica.db.local.", "lag-50ms.replica.db.local.", "nope.db.local.")
}

// BenchmarkSRV measures one SRV query through ServeDNS: the slow path,
// with the targets' addresses in the additional section.
func BenchmarkSRV(b *testing.B) {
	benchServeDNS(b, dns.TypeSRV, "_postgresql._tcp.primary.db.local.", "_postgresql._tcp.replica.db.local.", "_postgresql._tcp.main.db.local.")
}

// benchServeDNS measures ServeDNS of a query of qtype for each name, a
// sub-benchmark a name, on the test snapshot, the answer packed and
// thrown away.
func benchServeDNS(b *testing.B, qtype uint16, names ...string) {
	h := newTestHandler(testSnapshot())
	for _, name := range names {
		req := new(dns.Msg)
		req.SetQuestion(name, qtype)
		w := &discardWriter{buf: make([]byte, 0, 512)}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				h.ServeDNS(w, req)
			}
		})
	}
}
