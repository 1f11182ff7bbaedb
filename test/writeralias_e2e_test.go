package test

// The same server listed under another address (a reload moving its entry
// from an IP to a DNS name, a second IP, a forwarder) and then restarted
// is the first writer of its timeline restarted, not a second branch: its
// timeline is not forked, and tokens on it are answered (review 6, G6);
// the address is remembered with the writer in the state file, so a
// restart of pgdns in between changes nothing.

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/state"
	"github.com/pgdns/pgdns/internal/testkit"
)

func TestWriterRelistedThenRestartedForksNothing(t *testing.T) {
	t.Parallel()
	b := pgtest.Addrs(t)
	alt := b.IP(20) // a second address of n1's server
	pg := pgtest.New(t, pgtest.Options{IPs: b.IPs(3), Listen: func(ip string) []string {
		if ip == b.IP(1) {
			return []string{alt}
		}
		return nil
	}})
	path := filepath.Join(t.TempDir(), "state.json")
	e := attach(t, pg, envOptions{State: path})
	n1, n2, n3 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	e.waitFor(t, "replica.db.local.", []string{n2.IP, n3.IP})
	ctx := context.Background()
	restart := func() {
		t.Helper()
		if err := n1.Stop(ctx, "fast"); err != nil {
			t.Fatal(err)
		}
		if err := n1.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// answered checks that a token of a write made now, on timeline 1, is
	// answered by both replicas once they replayed it: timeline 1 is not
	// forked.
	answered := func(e *env, what string) {
		t.Helper()
		lsn := writeAndTakeLSN(t, n1.Conn(t), "INSERT INTO t (v) VALUES ('"+what+"')")
		waitStreaming(t, n2, 1, lsn)
		waitStreaming(t, n3, 1, lsn)
		e.waitFor(t, "lsn-"+lsn+"-t1.replica.db.local.", []string{n2.IP, n3.IP})
	}
	e.insertAndTakeLSN(t, n1)
	answered(e, "before")

	next := *e.cfg
	next.Clusters = slices.Clone(e.cfg.Clusters)
	hosts := []string{alt + ":5432", n2.Addr(), n3.Addr()}
	next.Clusters[0].Hosts = hosts
	if err := e.app.Reload(&next); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", []string{alt})
	restart() // a routine restart, under the address it is listed under now
	e.waitFor(t, "primary.db.local.", []string{alt})
	answered(e, "after a restart under its second address")

	// pgdns restarted from its state file, then the server again.
	testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "the state file to know the writer's second address", func() (string, bool) {
		m, _, err := state.Load(path)
		if err != nil {
			return err.Error(), false
		}
		return string(state.Encode(m)), slices.Contains(m["main"].Branches[1].Aliases, alt+":5432")
	})
	if err := e.app.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	restart()
	again := launch(t, pg, envOptions{State: path, Hosts: hosts})
	again.waitFor(t, "primary.db.local.", []string{alt})
	answered(again, "after a restart of pgdns and of the server")
	m, _, err := state.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if b := m["main"].Branches[1]; b.Forked != "" {
		t.Errorf("the state file says timeline 1 forked: %+v", b)
	}
}
