package dnsserver

import (
	"encoding/binary"
	"net/netip"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/zone"
)

// fastResult says what answerFast did with a datagram.
type fastResult uint8

const (
	fastNo   fastResult = iota // not a query the fast path answers: the slow path does
	fastDone                   // the reply is written
	fastWait                   // an lsn- query that may wait for a re-probe: answer it off the reader
)

// scratch is the memory one UDP reader reuses from query to query.
type scratch struct {
	name  nameScratch
	hosts []*zone.Host

	// atOnce: answer an lsn- query that may wait as lsn_wait 0 would
	// (every waiting slot is taken: udpServer.answerAtOnce).
	atOnce bool

	// fast counts the datagrams of the current batch answered on the
	// fast path, for their latency (udpServer.read).
	fast int
}

// answerFast answers the query that makes up nearly all of the traffic —
// A or AAAA for a role name, in a plain query — straight from the
// datagram into out, with no dns.Msg and no allocation. It answers what
// answer would (the same selection, records, SOA, EDNS, TC, AA and
// metrics); the tests run both on the same cases and the fuzz target
// compares them. Every other datagram is fastNo, for the slow path.
//
// Replicas in the location of src (the datagram's source, by the
// snapshot's dns.locations networks) come first. A query that carries an
// EDNS Client Subnet option has an OPT with options: the slow path
// answers it.
func (h *Handler) answerFast(req, out []byte, src netip.Addr, sc *scratch) ([]byte, fastResult) {
	q, ok := parseWire(req, &sc.name)
	if !ok || (q.qtype != dns.TypeA && q.qtype != dns.TypeAAAA) {
		return out, fastNo
	}
	if _, isNS := h.nsAddrs[q.name]; isNS {
		return out, fastNo
	}
	parsed, err := zone.Parse(q.name, h.origin)
	if err != nil || (parsed.Kind != zone.KindHosts && parsed.Kind != zone.KindHostName) || parsed.SRV || parsed.ENT {
		return out, fastNo // an SRV name's A, and an empty non-terminal's, is NODATA: the slow path says so
	}
	v := h.table.View(h.now()) // the one read of the zone this answer makes
	var hosts []*zone.Host
	asked := AskedHost
	if parsed.Kind == zone.KindHostName {
		// A host's own name (an SRV target, looked up by the client):
		// its address, as answerHostName; none (NODATA) for a host not
		// proven to be the cluster's server.
		host, code, _, err := v.Snap.HostNamedAnswer(&parsed)
		if err != nil {
			return out, fastNo
		}
		hosts = sc.hosts[:0]
		if code == "" {
			hosts = append(hosts, host)
		}
	} else {
		asked = askedRole(parsed.Target)
		parsed.From = v.Snap.Locate(src)
		hosts, err = v.Select(&parsed, sc.hosts[:0])
		sc.hosts = hosts[:0] // keep what it grew to for the next query
		if err != nil {
			return out, fastNo // not ready or no such cluster: rare, the slow path says which
		}
		if !sc.atOnce && h.shouldWaitForReplay(&parsed, hosts) && h.replayReachable(&parsed, v, v.Now, true) {
			return out, fastWait
		}
	}

	start := len(out)
	out = appendHeader(out, &q, true, false)
	budget := start + q.udpSize
	if q.edns {
		budget -= optLen
	}
	an, ns, tc := 0, 0, false
	for _, host := range hosts {
		ip := host.IP
		if parsed.Kind == zone.KindHostName {
			ip = host.Address()
		}
		switch {
		case q.qtype == dns.TypeA && ip.Is4():
			if len(out)+12+4 > budget {
				tc = true
			} else {
				a := ip.As4()
				out = appendAddress(out, dns.TypeA, h.ttl, a[:])
				an++
			}
		case q.qtype == dns.TypeAAAA && ip.Is6() && !ip.Is4In6():
			if len(out)+12+16 > budget {
				tc = true
			} else {
				a := ip.As16()
				out = appendAddress(out, dns.TypeAAAA, h.ttl, a[:])
				an++
			}
		}
		if tc {
			break // as dns.Msg.Truncate: the records that fit, in order, then TC
		}
	}
	if an == 0 && !tc {
		// NODATA: the SOA in the authority section, as finish does.
		if soa := h.apexSOAWire(h.apexSerial(v.Snap)); len(out)+len(soa) <= budget {
			out = append(out, soa...)
			ns = 1
		} else {
			tc = true
		}
	}
	ar := 0
	if q.edns {
		out = appendOPT(out, q.do)
		ar = 1
	}
	setCounts(out[start:], an, ns, ar)
	if tc {
		setTruncated(out[start:])
	}
	// Counted before it is sent: whoever has the answer can see it counted.
	if h.onAns != nil {
		h.onAns(asked, dns.RcodeSuccess)
	}
	if h.onLoc != nil && parsed.Kind == zone.KindHosts && parsed.Target != zone.TargetPrimary && len(hosts) > 0 {
		h.onLoc(zone.LocalityOf(parsed.From, hosts)) // as answerHosts
	}
	return out, fastDone // timed by the reader, with the rest of its batch (udpServer.read)
}

// packedSOA is the zone's SOA packed for one serial.
type packedSOA struct {
	serial uint32
	wire   []byte
}

// apexSOAWire returns the zone's SOA with serial, packed by miekg/dns
// once per serial (the serial changes only with a role answer).
func (h *Handler) apexSOAWire(serial uint32) []byte {
	if p := h.soaWire.Load(); p != nil && p.serial == serial {
		return p.wire
	}
	rr := h.soaRecord(h.origin, serial)
	buf := make([]byte, dns.Len(rr))
	n, err := dns.PackRR(rr, buf, 0, nil, false)
	if err != nil {
		panic(err) // built from the validated zone name: cannot fail
	}
	p := &packedSOA{serial: serial, wire: buf[:n]}
	h.soaWire.Store(p)
	return p.wire
}

// appendTruncatedReply appends the rate limiter's answer to a plain
// query: no records, TC set, so that a real resolver retries over TCP.
func appendTruncatedReply(out []byte, q *wireQuery) []byte {
	return appendHeader(out, q, false, true)
}

// mayWaitForReplay reports whether a datagram the slow path answers is an
// lsn- lookup that would wait for a re-probe, to be answered off the
// reader so that the wait holds up no other query. It decides as the fast
// path and answerHosts do: the question's name parsed (zone.Parse), the
// hosts selected from the current snapshot, shouldWaitForReplay and
// replayReachable (the slow path, deciding again, counts a lookup found
// unreachable). A name
// outside the zone or the grammar, a type or class never answered from
// the hosts, or a lookup the snapshot already satisfies never leaves the
// reader, whatever bytes it holds.
func (h *Handler) mayWaitForReplay(req []byte, sc *scratch) bool {
	if h.lsnWait <= 0 || h.refresh == nil || len(req) < 12 || !holdsLSN(req) {
		return false
	}
	flags := binary.BigEndian.Uint16(req[2:])
	if flags&(1<<15) != 0 || (flags>>11)&0xF != dns.OpcodeQuery || binary.BigEndian.Uint16(req[4:]) != 1 {
		return false // a response, not a QUERY, or not one question: never a lookup
	}
	name, off, err := dns.UnpackDomainName(req, 12)
	if err != nil || off+4 > len(req) {
		return false
	}
	qtype, qclass := binary.BigEndian.Uint16(req[off:]), binary.BigEndian.Uint16(req[off+2:])
	if qtype == dns.TypeAXFR || qtype == dns.TypeIXFR || (qclass != dns.ClassINET && qclass != dns.ClassANY) {
		return false // refused before any selection (lookup)
	}
	name = dns.CanonicalName(name)
	if _, isNS := h.nsAddrs[name]; isNS {
		return false
	}
	parsed, err := zone.Parse(name, h.origin)
	if err != nil || parsed.Kind != zone.KindHosts || !parsed.HasLSN || parsed.ENT {
		return false
	}
	v := h.table.View(h.now())
	hosts, err := v.Select(&parsed, sc.hosts[:0])
	sc.hosts = hosts[:0]
	return err == nil && h.shouldWaitForReplay(&parsed, hosts) && h.replayReachable(&parsed, v, v.Now, false)
}

// holdsLSN reports whether req holds "lsn-" in any case: every lsn- name
// does (a compression pointer in a question points backwards, into the
// header), so a datagram without it is no lsn- lookup and costs nothing
// more to tell.
func holdsLSN(req []byte) bool {
	for i := 0; i+4 <= len(req); i++ {
		if req[i]|0x20 == 'l' && req[i+1]|0x20 == 's' && req[i+2]|0x20 == 'n' && req[i+3] == '-' {
			return true
		}
	}
	return false
}
