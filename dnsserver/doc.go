// Package dnsserver owns the DNS wire: it answers queries for one zone
// from the current zone.Snapshot over UDP and TCP, with github.com/miekg/dns.
// It never recurses: names outside the zone are refused.
package dnsserver
