package dnsserver

import (
	"encoding/binary"
	"net"
	"net/netip"

	"github.com/miekg/dns"
)

// answerSlow answers one datagram the way miekg/dns's own UDP server
// does before and around a handler: a header that does not unpack gets
// no reply, a response is ignored, what DefaultMsgAcceptFunc rejects (and
// a message that does not unpack) gets FORMERR or NOTIMP, and everything
// else goes to next.ServeDNS. The reply is packed into out when it fits;
// nil means nothing is sent.
func answerSlow(req []byte, local net.Addr, src netip.AddrPort, out []byte, next dns.Handler) []byte {
	if len(req) < 12 {
		return nil // let the client hang: any reply to junk can amplify
	}
	action := dns.DefaultMsgAcceptFunc(dns.Header{
		Id: binary.BigEndian.Uint16(req), Bits: binary.BigEndian.Uint16(req[2:]),
		Qdcount: binary.BigEndian.Uint16(req[4:]), Ancount: binary.BigEndian.Uint16(req[6:]),
		Nscount: binary.BigEndian.Uint16(req[8:]), Arcount: binary.BigEndian.Uint16(req[10:]),
	})
	if action == dns.MsgIgnore {
		return nil
	}
	w := &udpWriter{local: local, remote: src, buf: out}
	m := new(dns.Msg)
	if action == dns.MsgAccept {
		if m.Unpack(req) == nil {
			next.ServeDNS(w, m)
			return w.reply
		}
		action = dns.MsgReject
	} else {
		// Only the header: the counts cleared, so that nothing else is read.
		var hdr [12]byte
		copy(hdr[:4], req)
		if err := m.Unpack(hdr[:]); err != nil {
			return nil
		}
	}
	opcode := m.Opcode
	m.SetRcodeFormatError(m)
	m.Zero = false
	if action == dns.MsgRejectNotImplemented {
		m.Opcode, m.Rcode = opcode, dns.RcodeNotImplemented
	}
	m.Answer, m.Ns, m.Extra = nil, nil, nil
	_ = w.WriteMsg(m)
	return w.reply
}

// udpWriter is the dns.ResponseWriter of the slow path: it packs the
// reply into the reader's buffer, and the reader sends it with the rest
// of its batch.
type udpWriter struct {
	local  net.Addr
	remote netip.AddrPort
	buf    []byte
	reply  []byte
}

// LocalAddr implements dns.ResponseWriter.
func (w *udpWriter) LocalAddr() net.Addr { return w.local }

// RemoteAddr implements dns.ResponseWriter: a *net.UDPAddr, so that the
// handler fits its answer to UDP.
func (w *udpWriter) RemoteAddr() net.Addr { return net.UDPAddrFromAddrPort(w.remote) }

// WriteMsg implements dns.ResponseWriter.
func (w *udpWriter) WriteMsg(m *dns.Msg) error {
	b, err := m.PackBuffer(w.buf[:cap(w.buf)])
	if err != nil {
		return err
	}
	w.reply = b
	return nil
}

// Write implements dns.ResponseWriter.
func (w *udpWriter) Write(b []byte) (int, error) {
	w.reply = append(w.buf[:0], b...)
	return len(b), nil
}

// Close implements dns.ResponseWriter.
func (w *udpWriter) Close() error { return nil }

// TsigStatus implements dns.ResponseWriter; pgdns uses no TSIG.
func (w *udpWriter) TsigStatus() error { return nil }

// TsigTimersOnly implements dns.ResponseWriter.
func (w *udpWriter) TsigTimersOnly(bool) {}

// Hijack implements dns.ResponseWriter.
func (w *udpWriter) Hijack() {}
