package main

import (
	"flag"
	"net"
	"os"
	"os/signal"
	"strings"

	"github.com/miekg/dns"
)

// runFloor serves a constant map of names to A records with miekg/dns and
// nothing else: the fastest an authoritative server on this library can
// be, the floor pgdns is compared with.
func runFloor(args []string) {
	fs := flag.NewFlagSet("floor", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:5353", "address")
	primary := fs.String("primary", "", "primary IP")
	replicas := fs.String("replicas", "", "replica IPs, comma-separated")
	lsn := fs.String("lsn", "", "relative lsn- name")
	_ = fs.Parse(args)

	records := map[string][]dns.RR{}
	add := func(name, ip string) {
		fqdn := name + ".db.local."
		records[fqdn] = append(records[fqdn], &dns.A{Hdr: dns.RR_Header{Name: fqdn, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1}, A: net.ParseIP(ip)})
	}
	add("primary", *primary)
	for _, r := range strings.Split(*replicas, ",") {
		for _, name := range []string{"replica", "lag-50ms.replica", "bytes-1mb.replica", *lsn} {
			add(name, r)
		}
	}
	handler := dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		m.Authoritative = true
		if len(req.Question) == 1 {
			m.Answer = records[strings.ToLower(req.Question[0].Name)]
		}
		_ = w.WriteMsg(m)
	})
	srv := &dns.Server{Addr: *listen, Net: "udp", Handler: handler}
	go func() {
		c := make(chan os.Signal, 1)
		signal.Notify(c, os.Interrupt)
		<-c
		_ = srv.Shutdown()
	}()
	if err := srv.ListenAndServe(); err != nil {
		os.Exit(1)
	}
}
