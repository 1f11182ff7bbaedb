package test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// secondAddress is the other address each node of newReportingCluster
// listens on: 127.B.0.1i beside 127.B.0.i.
func secondAddress(ip string) string {
	i := strings.LastIndex(ip, ".")
	return ip[:i+1] + "1" + ip[i+1:]
}

// newReportingCluster starts a primary and two streaming replicas on
// the first addresses of a block of the test's own, each listening on its
// secondAddress too: the servers of one database under two names, "main"
// listing them by their addresses and "reporting" by their second ones
// (startMainAndReporting). Replicas stream from the primary's first.
func newReportingCluster(t *testing.T) *pgtest.Cluster {
	t.Helper()
	return pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(3), Listen: func(ip string) []string { return []string{secondAddress(ip)} }})
}

// startMainAndReporting starts pgdns (clustersHead: no state file, main
// the default cluster) with "main" listing pg's nodes and "reporting"
// listing the nodes given, under their second addresses: a second name
// for the same database, listing only the hosts one team uses.
func startMainAndReporting(t *testing.T, pg *pgtest.Cluster, reporting ...*pgtest.Node) *env {
	t.Helper()
	var hosts []string
	for _, n := range reporting {
		hosts = append(hosts, secondAddress(n.IP)+":5432")
	}
	return startYAML(t, pg, clustersHead("")+mainOf(pg)+fmt.Sprintf("  reporting:\n    hosts: [%s]\n", strings.Join(hosts, ", ")))
}
