// Package dnsserver owns the DNS wire: it answers queries for one zone
// from the current zone.Snapshot over UDP and TCP, with github.com/miekg/dns.
// It never recurses: names outside the zone are refused.
//
// TCP is miekg/dns's server. UDP is this package's own (udp.go): a reader
// per core on its own SO_REUSEPORT socket, datagrams read and written in
// batches (recvmmsg/sendmmsg), each answered inline; the common query —
// A or AAAA for a role name — straight from its bytes without a dns.Msg
// (fast.go, wire.go), everything else through miekg/dns and the same
// Handler (slow.go).
package dnsserver
