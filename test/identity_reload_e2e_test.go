package test

// Tests of the identity rule across a reload and of identity votes by
// server, not by entry (issue 22, case 5), against real PostgreSQL.

import (
	"context"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// The cluster's identity is kept while any live host has it, across a
// reload too. Hosts n1 (the primary), n2 and n3 of one cluster; n2 and n3
// stop; a reload adds n5 and n6, the primary and replica of another
// initdb. The new prober, warming up, saw two live hosts of the other
// cluster against one of ours and settled the other identity, and the
// hand-over gave up on the predecessor's: primary answered n5, and kept
// answering it after n2 and n3 came back, until a restart.
func TestIdentityKeptAcrossAReload(t *testing.T) {
	t.Parallel()
	ips := pgtest.Addrs(t).IPs(5)
	pg := pgtest.New(t, pgtest.Options{IPs: ips[:3]})
	other := pgtest.New(t, pgtest.Options{IPs: ips[3:]})
	n1, n2, n3 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	n5, n6 := other.Nodes[0], other.Nodes[1]
	e := attach(t, pg, envOptions{})
	e.waitFor(t, "replica.db.local.", []string{n2.IP, n3.IP})
	ctx := context.Background()
	for _, n := range []*pgtest.Node{n2, n3} {
		if err := n.Stop(ctx, "fast"); err != nil {
			t.Fatal(err)
		}
	}
	e.waitHost(t, n2.Addr(), "went down", func(h hostState) bool { return h.Role == "down" })
	e.waitHost(t, n3.Addr(), "went down", func(h hostState) bool { return h.Role == "down" })

	next := *e.cfg
	next.Clusters = slices.Clone(e.cfg.Clusters)
	next.Clusters[0].Hosts = []string{n1.Addr(), n2.Addr(), n3.Addr(), n5.Addr(), n6.Addr()}
	if err := e.app.Reload(&next); err != nil {
		t.Fatal(err)
	}
	e.holds(t, "primary.db.local.", 2*time.Second, exactly(n1.IP), "not the cluster's primary after the reload")
	e.holds(t, "any.db.local.", time.Second, exactly(n1.IP), "a host of the other cluster")
	e.waitHost(t, n5.Addr(), "was called foreign", func(h hostState) bool { return h.Aside == "foreign" })

	for _, n := range []*pgtest.Node{n2, n3} {
		if err := n.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	e.waitFor(t, "replica.db.local.", []string{n2.IP, n3.IP})
	e.holds(t, "primary.db.local.", time.Second, exactly(n1.IP), "not the cluster's primary once its replicas are back")
	e.holds(t, "any.db.local.", time.Second, without(n5.IP), "the other cluster's primary")
}

// One stray server listed twice (under two addresses it listens on) and
// one live host of the cluster: the stray is one server and one vote, a
// tie, so nothing is answered. Counted by entry it had two of three
// configured hosts, a majority, and was answered as the primary.
func TestIdentityVotesByServer(t *testing.T) {
	t.Parallel()
	ips := pgtest.Addrs(t).IPs(3)
	strayCluster := pgtest.New(t, pgtest.Options{IPs: ips[:1]})
	stray := strayCluster.Nodes[0]
	pg := pgtest.New(t, pgtest.Options{IPs: ips[2:]})
	primary := pg.Nodes[0]
	alias := net.JoinHostPort(ips[1], strconv.Itoa(stray.Port))
	ctx := context.Background()
	stray.Exec(t, "ALTER SYSTEM SET listen_addresses = '"+stray.IP+","+ips[1]+"'")
	if err := stray.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	if err := stray.Start(ctx); err != nil {
		t.Fatal(err)
	}

	e := launch(t, pg, envOptions{Hosts: []string{stray.Addr(), alias, primary.Addr()}})
	// Every host probed, the stray's first address too: until the first
	// round is in, pgdns rightly answers SERVFAIL, not an empty answer.
	for _, addr := range []string{stray.Addr(), alias, primary.Addr()} {
		e.waitHost(t, addr, "was probed", func(h hostState) bool { return h.Timeline != nil })
	}
	e.holds(t, "primary.db.local.", 3*time.Second, exactly(), "a primary while one server of each identity lives")
	e.holds(t, "any.db.local.", time.Second, exactly(), "a host on a 1:1 identity tie")
	e.waitHost(t, stray.Addr(), "explained the tie", func(h hostState) bool { return h.Aside == "unsettled" })
}
