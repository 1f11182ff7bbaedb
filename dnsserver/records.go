package dnsserver

import (
	"net/netip"
	"strconv"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/zone"
)

// Helpers that build records with the header set in full. Every record
// carries the configured TTL, so that no part of an answer outlives the
// probe data it came from.

func header(name string, rrtype uint16, ttl uint32) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: rrtype, Class: dns.ClassINET, Ttl: ttl}
}

func aRecord(name string, ttl uint32, ip netip.Addr) dns.RR {
	return &dns.A{Hdr: header(name, dns.TypeA, ttl), A: ip.AsSlice()}
}

func aaaaRecord(name string, ttl uint32, ip netip.Addr) dns.RR {
	return &dns.AAAA{Hdr: header(name, dns.TypeAAAA, ttl), AAAA: ip.AsSlice()}
}

// soaRecord is an SOA of the zone at owner (the apex, or a cluster's
// name) with serial. MINIMUM equals the TTL so that resolvers cache a
// negative answer no longer than a positive one (RFC 2308).
func (h *Handler) soaRecord(owner string, serial uint32) dns.RR {
	return &dns.SOA{
		Hdr:     header(owner, dns.TypeSOA, h.ttl),
		Ns:      h.nsNames[0],
		Mbox:    "hostmaster." + h.origin,
		Serial:  serial,
		Refresh: 60,
		Retry:   10,
		Expire:  3600,
		Minttl:  h.ttl,
	}
}

func (h *Handler) nsRecord(target string) dns.RR {
	return &dns.NS{Hdr: header(h.origin, dns.TypeNS, h.ttl), Ns: target}
}

// txtRecord is the evidence behind one host of cluster c in an answer,
// for dig, as of view v (a lag only when v vouches for it):
// host=127.0.0.12:5432 role=replica lag_ms=3 lag_bytes=0 replay_lsn=0/3000060 age_ms=120,
// then what marks the host, only when it holds: drained=true with
// drained_by (pgdns.drain, noloadbalance, or both), offline=true,
// sync=true (a synchronous standby, as the sync filter proves it),
// read_only=true (a primary that refuses writes: primary does not answer
// it); then
// the host's own name (name=pg-2.host.main.db.local.) and note, when not
// "" (srv_only=port).
func txtRecord(name string, ttl uint32, v zone.View, c *zone.Cluster, host *zone.Host, hostName, note string) dns.RR {
	b := make([]byte, 0, 128)
	b = append(b, "host="...)
	b = append(b, host.Addr...)
	b = append(b, " role="...)
	b = append(b, host.Role.String()...)
	if lag, ok := v.Lag(c, host); ok {
		b = append(b, " lag_ms="...)
		b = strconv.AppendInt(b, lag.Milliseconds(), 10)
	} else {
		b = append(b, " lag_ms=unknown"...)
	}
	if bytes, ok := v.LagBytes(c, host); ok {
		b = append(b, " lag_bytes="...)
		b = strconv.AppendUint(b, bytes, 10)
	} else {
		b = append(b, " lag_bytes=unknown"...)
	}
	b = append(b, " replay_lsn="...)
	b = host.ReplayLSN.AppendText(b)
	b = append(b, " age_ms="...)
	b = strconv.AppendInt(b, host.Age(v.Now).Milliseconds(), 10)
	if host.Drained {
		b = append(b, " drained=true drained_by="...)
		b = append(b, host.DrainedBy.String()...)
	}
	if host.Offline {
		b = append(b, " offline=true"...)
	}
	if host.SyncProven {
		b = append(b, " sync=true"...)
	}
	if host.ReadOnly {
		b = append(b, " read_only=true"...)
	}
	b = append(b, " name="...)
	b = append(b, hostName...)
	if note != "" {
		b = append(b, ' ')
		b = append(b, note...)
	}
	if len(b) > 255 { // one character-string holds at most 255 bytes
		b = b[:255]
	}
	return &dns.TXT{Hdr: header(name, dns.TypeTXT, ttl), Txt: []string{string(b)}}
}
