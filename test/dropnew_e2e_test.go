package test

// A host whose new connections a packet filter DROPs (`ct state new
// drop`: conntrack lets pgdns's established session through) leaves the
// answers after two bare connects in a row time out while the session
// answers fast (review 7, H7; probe/admission.go reachTimedOut), and comes
// back once a connect gets through.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// dropNewConnections drops new TCP connections to ip:port in an nftables
// table of the test's own, deleted when the test ends; lift deletes it
// sooner.
func dropNewConnections(t *testing.T, table, ip string, port int) (lift func()) {
	t.Helper()
	return nftInput(t, table, fmt.Sprintf("ip daddr %s tcp dport %d ct state new drop", ip, port))
}

func TestHostDroppingNewConnectionsLeaves(t *testing.T) {
	e := newEnv(t, envOptions{})
	n2 := e.pg.Nodes[1]
	e.waitFor(t, "replica.db.local.", []string{e.ip(1), e.ip(2)})
	lift := dropNewConnections(t, "pgdns_test_dropnew", n2.IP, n2.Port)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if c, err := pgx.Connect(ctx, n2.DSN()+" connect_timeout=2"); err == nil {
		c.Close(ctx)
		t.Fatal("a new connection to n2 got through the filter")
	}
	// Two bare connects 4 admission intervals (1 s) apart, each timing out
	// within probe.timeout: out in about 6 s; waitFor's bound is generous.
	e.waitFor(t, "replica.db.local.", []string{e.ip(2)})
	e.holds(t, "replica.db.local.", 2*time.Second, without(n2.IP), "n2, whose new connections are dropped")
	lift()
	e.waitFor(t, "replica.db.local.", []string{e.ip(1), e.ip(2)})
}
