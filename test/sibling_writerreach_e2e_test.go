package test

import (
	"strings"
	"testing"
	"time"
)

// TestSiblingClusterRefusesAWriteLostInAFailover: "main" lists n1, n2, n3;
// "reporting" lists n2 and n3 under their other addresses (a second name
// for the same database, listing only the replicas that team reads). n1's
// WAL senders are held, a write W is made on n1, pgdns probes n1 past it
// (under main), n1 is killed and n2 promoted, and timeline 2 is written
// past W's position: W is lost. Under main the token without a timeline
// lies in (where timeline 1 ended, where pgdns saw n1 insert] and every
// name refuses it (decisions.md rule 9). reporting never saw n1: only what
// pgdns saw the writer insert under main says how far timeline 1's writes
// went, and what pgdns saw of the servers is the servers', whatever
// cluster lists them. Before, only the newest timeline (and forks) were
// shared: lsn-W.any.reporting answered n2 and n3, which lack W.
func TestSiblingClusterRefusesAWriteLostInAFailover(t *testing.T) {
	pg := newReportingCluster(t)
	old, promoted, follower := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	old.Exec(t, "CREATE TABLE ryw (v text)")
	e := startMainAndReporting(t, pg, promoted, follower)
	e.waitFor(t, "primary.main.db.local.", []string{old.IP})
	e.waitFor(t, "replica.reporting.db.local.", []string{secondAddress(promoted.IP), secondAddress(follower.IP)})

	lost, later := e.lostWriteSeen(t, old, promoted, follower)
	e.waitFor(t, "primary.reporting.db.local.", []string{secondAddress(promoted.IP)})
	e.waitFor(t, "lsn-"+later+".any.reporting.db.local.", []string{secondAddress(promoted.IP), secondAddress(follower.IP)})
	for _, cl := range []string{"main", "reporting"} {
		for _, role := range []string{"replica", "prefer-replica", "any"} {
			name := "lsn-" + lost + "." + role + "." + cl + ".db.local."
			e.holds(t, name, time.Second, exactly(),
				"no host: the token's position lies between where timeline 1 ended and where pgdns saw n1 insert on it; "+
					"every host now on timeline 2 lacks the write")
		}
	}
	t.Logf("lsn-%s.any.reporting TXT: %s", lost, strings.Join(e.txt(t, "lsn-"+lost+".any.reporting.db.local."), " "))
}
