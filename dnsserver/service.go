package dnsserver

import (
	"net/netip"
	"slices"
	"strconv"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/zone"
)

// Host names and SRV answers (zone/names.go, zone/srv.go).

// hostFQDN is host's own name in the zone, fully qualified.
func (h *Handler) hostFQDN(host *zone.Host) string {
	return zone.HostName(host.Name, host.Cluster) + "." + h.origin
}

// answerHostName answers <label>.host.<cluster>.<zone>: the host's
// address whatever its role or health (a name for the machine, which SRV
// targets and certificates name), its evidence for TXT, and one SRV
// record, priority 10, under _postgresql._tcp. A host not proven to be a
// server of the cluster (zone.Cluster.HostNameWhy: never probed, the
// identity not settled, or foreign) answers no address and no SRV
// (NODATA); its TXT says why. Before the first probe round: SERVFAIL.
func (h *Handler) answerHostName(m *dns.Msg, q dns.Question, parsed *zone.Query, v zone.View) zone.Outcome {
	host, code, _, err := v.Snap.HostNamedAnswer(parsed)
	if err != nil {
		return zone.OutcomeOf(err)
	}
	switch {
	case q.Qtype == dns.TypeTXT:
		m.Answer = append(m.Answer, txtRecord(q.Name, h.ttl, v, v.Snap.Cluster(parsed.Cluster), host, h.hostFQDN(host), hostNameNote(v.Snap.Cluster(parsed.Cluster), host, code)))
	case q.Qtype == dns.TypeANY:
		m.Answer = []dns.RR{&dns.HINFO{Hdr: header(q.Name, dns.TypeHINFO, h.ttl), Cpu: "RFC8482"}}
	case code != "":
		// Not the cluster's server as far as pgdns knows: NODATA.
	case parsed.SRV && q.Qtype == dns.TypeSRV:
		h.services(m, q.Name, parsed, []*zone.Host{host})
	case !parsed.SRV:
		m.Answer = h.addresses(q.Name, q.Qtype, []netip.Addr{host.Address()})
	}
	return zone.Answered
}

// hostNameNote is the end of a host name's TXT string: the host's port,
// since an address carries none and a host name is used with it (review
// S1: a host on 5433 sharing its IP with another server on 5432);
// srv_only=port (or address) when the cluster's address answers leave the
// host out, so that its address on the client port is another server or
// none; unanswered=<code> when the name answers no address at all.
func hostNameNote(c *zone.Cluster, host *zone.Host, code string) string {
	note := "port=" + strconv.Itoa(int(host.Port))
	if c != nil && !c.Addressable(host) {
		note += " srv_only=" + c.SRVOnlyWhy(host)
	}
	if code != "" {
		note += " unanswered=" + code
	}
	return note
}

// services fills an SRV answer to parsed: one record per host, by
// priority and in the selection's order within one (zone.Query.SRVOrder),
// with its priority (zone.Query.Priority), the equal
// weight, its own port and its host name; the targets' addresses in the
// additional section, which fitAdditional trims to the UDP size.
func (h *Handler) services(m *dns.Msg, owner string, parsed *zone.Query, hosts []*zone.Host) {
	for _, host := range parsed.SRVOrder(hosts) {
		target := h.hostFQDN(host)
		m.Answer = append(m.Answer, &dns.SRV{Hdr: header(owner, dns.TypeSRV, h.ttl),
			Priority: parsed.Priority(host), Weight: zone.SRVWeight, Port: host.Port, Target: target})
		ip := host.Address()
		m.Extra = append(m.Extra, h.addresses(target, dns.TypeA, []netip.Addr{ip})...)
		if !ip.Is4In6() {
			m.Extra = append(m.Extra, h.addresses(target, dns.TypeAAAA, []netip.Addr{ip})...)
		}
	}
}

// evidence fills a TXT answer: one string per host of the name's SRV
// answer, so that the hosts an address answer leaves out are said too
// (srv_only=port, or srv_only=address when their address is already in
// it or another configured host's on another port), then any host only the address answer has (prefer-replica's
// primary, when every fitting replica is on another port); then, during a
// split brain, one split_brain= string, and for a token no host proves one
// unprovable= string. parsed is the name asked, hosts its answer.
func (h *Handler) evidence(m *dns.Msg, owner string, parsed *zone.Query, hosts []*zone.Host, v zone.View) {
	c := v.Snap.Cluster(parsed.Cluster)
	all := hosts
	if !parsed.SRV && parsed.Kind == zone.KindHosts {
		withSRV := *parsed
		withSRV.SRV = true
		all, _ = v.Select(&withSRV, nil) // the same view and turn: the same order
		for _, host := range hosts {
			if !slices.Contains(all, host) {
				all = append(all, host)
			}
		}
	}
	for _, host := range all {
		note := ""
		if !slices.Contains(hosts, host) {
			note = "srv_only=address"
			if c != nil {
				note = "srv_only=" + c.SRVOnlyWhy(host)
			}
		}
		m.Answer = append(m.Answer, txtRecord(owner, h.ttl, v, c, host, h.hostFQDN(host), note))
	}
	if why := c.SplitBrainWhy(); why != "" {
		// During a split brain neither writer nor any replica of the
		// split timeline is answered: say why, since no host's string
		// does (review 7, H10).
		m.Answer = append(m.Answer, txtString(owner, h.ttl, "split_brain="+why))
	}
	if why := v.TokenUnprovable(parsed); why != "" {
		// No host proves the token (a forked timeline) or has it (a
		// write lost in a failover, a position beyond the primary's
		// reach): say why, since no host's string does.
		m.Answer = append(m.Answer, txtString(owner, h.ttl, "unprovable="+why))
	}
}

// txtString is a TXT record of one string, cut to the 255 bytes one
// character-string holds.
func txtString(owner string, ttl uint32, s string) dns.RR {
	if len(s) > 255 {
		s = s[:255]
	}
	return &dns.TXT{Hdr: header(owner, dns.TypeTXT, ttl), Txt: []string{s}}
}

// fitAdditional drops, from the end, the additional records of an SRV
// answer that would not fit a UDP reply of size: they are optional
// (RFC 2782: a client looks the targets up itself), so dropping them sets
// no TC, while an answer record that does not fit still does (Truncate).
func fitAdditional(m *dns.Msg, size int) {
	if len(m.Question) != 1 || m.Question[0].Qtype != dns.TypeSRV || len(m.Extra) == 0 {
		return
	}
	opt := m.IsEdns0()
	extra := m.Extra[:0:0]
	for _, rr := range m.Extra {
		if rr.Header().Rrtype != dns.TypeOPT {
			extra = append(extra, rr)
		}
	}
	for len(extra) > 0 {
		m.Extra = extra
		if opt != nil {
			m.Extra = append(extra[:len(extra):len(extra)], opt)
		}
		if m.Len() <= size {
			return
		}
		extra = extra[:len(extra)-1]
	}
	m.Extra = nil
	if opt != nil {
		m.Extra = []dns.RR{opt}
	}
}
