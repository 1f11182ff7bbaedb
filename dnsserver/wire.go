package dnsserver

import (
	"encoding/binary"
	"unsafe"

	"github.com/miekg/dns"
)

// wireQuery is a plain query read straight from its datagram: one
// question of class IN, no other record than an OPT without options.
// Anything else is left to miekg/dns (the slow path).
type wireQuery struct {
	id       uint16
	rd, cd   bool   // copied into the reply, as dns.Msg.SetReply does
	question []byte // name, type and class as sent: echoed byte for byte (0x20 case)
	qtype    uint16
	name     string // lower-case FQDN in presentation form; points into the caller's scratch
	edns     bool   // the query has an OPT record (version 0)
	do       bool   // its DO bit
	udpSize  int    // how large the UDP reply may be
}

// nameScratch holds the lower-cased name of one query: a name on the wire
// is at most 255 bytes, its presentation form as long.
type nameScratch [256]byte

// parseWire reads req as a plain query. ok is false for anything the
// fast path does not answer: a response, another opcode, more or fewer
// records, a compressed or unusual name, an EDNS version other than 0, an
// OPT with options (cookies, client subnet), trailing bytes.
func parseWire(req []byte, scratch *nameScratch) (q wireQuery, ok bool) {
	if len(req) < 12 {
		return q, false
	}
	flags := binary.BigEndian.Uint16(req[2:])
	if flags&(1<<15) != 0 || (flags>>11)&0xF != dns.OpcodeQuery {
		return q, false // a response, or not a QUERY
	}
	qd, an, ns, ar := binary.BigEndian.Uint16(req[4:]), binary.BigEndian.Uint16(req[6:]), binary.BigEndian.Uint16(req[8:]), binary.BigEndian.Uint16(req[10:])
	if qd != 1 || an != 0 || ns != 0 || ar > 1 {
		return q, false
	}
	q.id = binary.BigEndian.Uint16(req)
	q.rd, q.cd = flags&(1<<8) != 0, flags&(1<<4) != 0

	off, n := 12, 0
	for {
		if off >= len(req) {
			return q, false
		}
		l := int(req[off])
		off++
		if l == 0 {
			break
		}
		// 254 bytes of presentation form are 255 on the wire, the most
		// a name may have (RFC 1035 2.3.4).
		if l > 63 || off+l > len(req) || n+l+1 > 254 {
			return q, false // a compression pointer, or too long
		}
		for _, c := range req[off : off+l] {
			switch {
			case c >= 'A' && c <= 'Z':
				c += 'a' - 'A'
			case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
			default:
				return q, false // would need escaping in presentation form
			}
			scratch[n] = c
			n++
		}
		scratch[n] = '.'
		n++
		off += l
	}
	if n == 0 || off+4 > len(req) {
		return q, false // the root, or no type and class
	}
	q.qtype = binary.BigEndian.Uint16(req[off:])
	if binary.BigEndian.Uint16(req[off+2:]) != dns.ClassINET {
		return q, false
	}
	off += 4
	q.question = req[12:off]
	// The name lives in scratch until the next query on this reader: it is
	// read by zone.Parse and selection, never kept.
	q.name = unsafe.String(&scratch[0], n)

	q.udpSize = dns.MinMsgSize
	if ar == 1 {
		// An OPT: root name, type, UDP size, extended rcode, version,
		// flags, and no options.
		if off+11 != len(req) || req[off] != 0 || binary.BigEndian.Uint16(req[off+1:]) != dns.TypeOPT ||
			req[off+6] != 0 || binary.BigEndian.Uint16(req[off+9:]) != 0 {
			return q, false
		}
		q.edns = true
		q.udpSize = max(int(binary.BigEndian.Uint16(req[off+3:])), dns.MinMsgSize)
		q.do = req[off+7]&0x80 != 0
		off += 11
	}
	q.udpSize = min(q.udpSize, maxUDPSize)
	return q, off == len(req)
}

// appendHeader starts a reply to q in out: the header with its counts
// zero (set by setCounts), then the question as the client sent it.
func appendHeader(out []byte, q *wireQuery, aa, tc bool) []byte {
	b2 := byte(1 << 7) // QR
	if aa {
		b2 |= 1 << 2
	}
	if tc {
		b2 |= 1 << 1
	}
	if q.rd {
		b2 |= 1
	}
	var b3 byte // RA clear, rcode NOERROR
	if q.cd {
		b3 |= 1 << 4
	}
	out = append(out, byte(q.id>>8), byte(q.id), b2, b3, 0, 1, 0, 0, 0, 0, 0, 0)
	return append(out, q.question...)
}

// setCounts writes the section counts of the reply that starts at out[0].
func setCounts(out []byte, an, ns, ar int) {
	binary.BigEndian.PutUint16(out[6:], uint16(an))
	binary.BigEndian.PutUint16(out[8:], uint16(ns))
	binary.BigEndian.PutUint16(out[10:], uint16(ar))
}

// setTruncated sets TC in the reply that starts at out[0].
func setTruncated(out []byte) { out[2] |= 1 << 1 }

// optLen is the size of the OPT record of a reply: root name, type,
// class (UDP size), TTL (extended rcode, version, flags), RDLENGTH.
const optLen = 11

// appendOPT appends the reply's OPT: pgdns's UDP size and the query's
// DO bit (RFC 3225), as dns.Msg.SetEdns0(maxUDPSize, do) packs it.
func appendOPT(out []byte, do bool) []byte {
	var flags byte
	if do {
		flags = 0x80
	}
	return append(out, 0, byte(dns.TypeOPT>>8), byte(dns.TypeOPT), byte(maxUDPSize>>8), byte(maxUDPSize&0xff), 0, 0, flags, 0, 0, 0)
}

// appendAddress appends an A or AAAA record for the question's name (a
// compression pointer to offset 12) with address ip (4 or 16 bytes).
func appendAddress(out []byte, rrtype uint16, ttl uint32, ip []byte) []byte {
	out = append(out, 0xC0, 12, byte(rrtype>>8), byte(rrtype), 0, byte(dns.ClassINET),
		byte(ttl>>24), byte(ttl>>16), byte(ttl>>8), byte(ttl), 0, byte(len(ip)))
	return append(out, ip...)
}
