package dnsserver

import (
	"fmt"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/zone"
	"github.com/pgdns/pgdns/zone/zonetest"
)

// bigCluster is a primary and n replicas, every fourth one on IPv6, so
// that an SRV answer of them with its additional section outgrows any
// UDP size.
func bigCluster(n int) *zone.Snapshot {
	hosts := []zone.Host{host("10.9.0.1", false, 9)}
	for i := range n {
		ip := fmt.Sprintf("10.9.1.%d", i+1)
		if i%4 == 3 {
			ip = fmt.Sprintf("2001:db8::%x", i+1)
		}
		r := host(ip, true, 9)
		r.StartedAt = t0.Add(time.Duration(i+1) * time.Second)
		hosts = append(hosts, r)
	}
	return zonetest.Ready(t0, 2*time.Second, zonetest.Cluster("main", hosts...))
}

// An SRV answer over UDP, at every EDNS size from 512 to past pgdns's
// 1232 and without EDNS: it fits the size; TC is set exactly when an SRV
// record was left out (the answers that fit, in order, as for A); the
// additional section holds only addresses of targets in the answer, and
// dropping some of those sets no TC (they are optional: RFC 2782). Over
// TCP the whole answer comes, every target's address with it.
func TestSRVTruncatesAtEveryEDNSSize(t *testing.T) {
	const replicas = 16
	h := newTestHandler(bigCluster(replicas))
	s := &udpServer{h: h}
	name := "_postgresql._tcp.replica.db.local."
	trimmedOnly := 0
	for size := 511; size <= 1300; size++ {
		req := new(dns.Msg)
		req.SetQuestion(name, dns.TypeSRV)
		req.Id = uint16(size)
		limit := dns.MinMsgSize
		if size >= 512 {
			req.SetEdns0(uint16(size), false)
			limit = min(size, maxUDPSize)
		}
		wire, _ := req.Pack()
		reply, asked := answerDatagram(s, wire)
		if asked != AskedReplica {
			t.Fatalf("size %d: counted as %v", size, asked)
		}
		if len(reply) > limit {
			t.Fatalf("size %d: a reply of %d bytes, over %d", size, len(reply), limit)
		}
		m := new(dns.Msg)
		if err := m.Unpack(reply); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if m.Rcode != dns.RcodeSuccess || len(m.Answer) == 0 {
			t.Fatalf("size %d: rcode %s, %d answers", size, dns.RcodeToString[m.Rcode], len(m.Answer))
		}
		if full := len(m.Answer) == replicas; full == m.Truncated {
			t.Fatalf("size %d: %d of %d SRV records, TC %v", size, len(m.Answer), replicas, m.Truncated)
		}
		targets := map[string]bool{}
		for _, rr := range m.Answer {
			srv, ok := rr.(*dns.SRV)
			if !ok || srv.Port != 5432 || srv.Priority != zone.PriorityFirst || srv.Weight != zone.SRVWeight {
				t.Fatalf("size %d: answer %v", size, rr)
			}
			targets[srv.Target] = true
		}
		extras := 0
		for _, rr := range m.Extra {
			if rr.Header().Rrtype == dns.TypeOPT {
				continue
			}
			extras++
			if !targets[rr.Header().Name] {
				t.Fatalf("size %d: an address of %s, which is no target of the answer", size, rr.Header().Name)
			}
		}
		if !m.Truncated && extras < len(m.Answer) {
			trimmedOnly++
		}
	}
	if trimmedOnly == 0 {
		t.Error("no size kept every SRV record and dropped addresses: the test proves nothing about TC")
	}

	req := new(dns.Msg)
	req.SetQuestion(name, dns.TypeSRV)
	m := exchange(t, "tcp", startServer(t, h), req)
	if len(m.Answer) != replicas || len(m.Extra) != replicas || m.Truncated {
		t.Fatalf("TCP: %d answers, %d additional, TC %v", len(m.Answer), len(m.Extra), m.Truncated)
	}
}
