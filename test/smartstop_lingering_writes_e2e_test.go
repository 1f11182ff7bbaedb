package test

// Asynchronous commits of a session that a smart shutdown lets run, lost
// in the crash that ends the shutdown, then a failover or a restart; and
// the smart stop still completes (review 13a, finding 2).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// n1 is stopped in smart mode while a client's session is open: pgdns sees
// it stopping and takes it out of every answer, but keeps probing it while
// that session remains (before, it closed its own session at once, and saw
// nothing the client wrote after). The client's session writes on, with
// synchronous_commit = off (the WAL writer held stopped, so that nothing
// is flushed or streamed), and pgdns probes n1 once past the writes (the
// write after pgdns's last probe stays the documented open case: one
// interval). The stop is escalated to immediate (the WAL writer killed,
// then pg_ctl stop -m immediate: as a SIGKILL at systemd's TimeoutStopSec;
// a fast stop would write the commits out), which loses the commits, and
// n2 is promoted, n3 re-pointed at it, and n2 writes past the tokens (or,
// with no failover, n1 is started again and writes past them). Every host
// answered for a token must hold its row; before, lsn-T.replica answered
// n3 (failover) or n2 and n3 (restart), without the row.
func TestSmartStopLingeringWritesLostThenFailover(t *testing.T) {
	t.Parallel()
	for _, failover := range []bool{true, false} {
		name := "failover"
		if !failover {
			name = "restart"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			smartStopLost(t, failover)
		})
	}
}

// smartStopLost is that case, with a failover or (!failover) n1 started
// again after its crash and written past the tokens.
func smartStopLost(t *testing.T, failover bool) {
	e := newEnv(t, envOptions{})
	n1, n2, n3 := e.pg.Nodes[0], e.pg.Nodes[1], e.pg.Nodes[2]
	e.waitFor(t, "replica.db.local.", []string{n2.IP, n3.IP})
	ctx := context.Background()
	common := e.insertAndTakeLSN(t, n1)
	waitStreaming(t, n2, 1, common)
	waitStreaming(t, n3, 1, common)

	client := n1.Conn(t)
	if _, err := client.Exec(ctx, "SET synchronous_commit = off"); err != nil {
		t.Fatal(err)
	}
	var walWriter int
	n1.Query(t, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'", &walWriter)
	stopped := make(chan error, 1)
	go func() { stopped <- n1.Stop(ctx, "smart") }()
	e.waitFor(t, "primary.db.local.", nil)
	// Errors, not fatal: the case goes on to the answers it leads to
	// (before, pgdns closed its session here and saw none of the writes).
	if !testkit.Poll(20*time.Second, 50*time.Millisecond, func() bool { return e.hostStates(t)[n1.Addr()].Aside == "stopping" }) {
		t.Errorf("n1 never set aside as stopping: %+v", e.hostStates(t)[n1.Addr()])
	}
	var ours int // pgdns's sessions
	if err := client.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgdns'").Scan(&ours); err != nil || ours == 0 {
		t.Errorf("pgdns's sessions on the stopping n1: %d (%v), want its probe session kept", ours, err)
	}
	if err := syscall.Kill(walWriter, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var tokens, markers []string
	for i := range 5 {
		m := fmt.Sprintf("during the smart stop %d", i)
		markers = append(markers, m)
		tokens = append(tokens, writeAndTakeLSN(t, client, "INSERT INTO t (v) VALUES ($1)", m))
	}
	last := parseLSN(t, tokens[len(tokens)-1])
	// pgdns probes n1 once past the writes before the stop is escalated.
	if !testkit.Poll(20*time.Second, 20*time.Millisecond, func() bool {
		h := e.hostStates(t)[n1.Addr()]
		return h.Aside == "stopping" && replayedPast(t, h, tokens[len(tokens)-1])
	}) {
		t.Errorf("pgdns never probed the stopping n1 past the last token %s: %+v", tokens[len(tokens)-1], e.hostStates(t)[n1.Addr()])
	}
	t.Logf("tokens %v written while n1 stopped smartly; %s", tokens, positionsLine(t, nodeDSNs(e.pg)))
	if err := syscall.Kill(walWriter, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The postmaster may end by itself first: a child killed ends every
	// session, and a server shutting down is not restarted after that.
	if err := n1.Stop(ctx, "immediate"); err != nil {
		if _, serr := os.Stat(filepath.Join(n1.Dir, "postmaster.pid")); serr == nil {
			t.Fatal(err)
		}
	}
	<-stopped

	for _, n := range e.pg.Nodes[1:] {
		var has int
		n.Query(t, "SELECT count(*) FROM t WHERE v LIKE 'during the smart stop %'", &has)
		if has > 0 {
			t.Fatalf("%s has %d of the commits: they were not lost, nothing to test", n.Name, has)
		}
	}

	writer, follower, replicas := n2, n3, []string{n3.IP}
	if failover {
		if err := n2.Promote(ctx); err != nil {
			t.Fatal(err)
		}
		n3.Follow(t, n2)
	} else {
		if err := n1.Start(ctx); err != nil {
			t.Fatal(err)
		}
		var kept int
		n1.Query(t, "SELECT count(*) FROM t WHERE v LIKE 'during the smart stop %'", &kept)
		if kept > 0 {
			t.Fatalf("n1 kept %d of the commits through its crash: nothing to test", kept)
		}
		writer, follower, replicas = n1, n2, []string{n2.IP, n3.IP}
	}
	e.waitFor(t, "primary.db.local.", []string{writer.IP})
	w := writer.Conn(t)
	for uint64(positionAt(t, writer.DSN(), "pg_current_wal_insert_lsn()")) <= last+1024 {
		if _, err := w.Exec(ctx, "INSERT INTO t (v) SELECT 'after ' || g FROM generate_series(1, 20) g"); err != nil {
			t.Fatal(err)
		}
	}
	after := writeAndTakeLSN(t, w, "INSERT INTO t (v) VALUES ('after')")
	tl := 2
	if !failover {
		tl = 1
	}
	waitStreaming(t, follower, tl, after)
	e.waitFor(t, "lsn-"+after+".replica.db.local.", replicas)
	t.Logf("after: %s", positionsLine(t, nodeDSNs(e.pg)))

	dsns := nodeDSNs(e.pg)
	for i, tok := range tokens {
		var names []string
		for _, role := range []string{"replica", "prefer-replica", "any", "primary"} {
			names = append(names, "lsn-"+tok+"."+role+".db.local.", "lsn-"+tok+"-t1."+role+".db.local.")
		}
		seen := neverLacking(t, e, dsns, time.Second, markers[i], names...)
		t.Logf("token %s: %v", tok, seen)
	}
	if txt := e.txt(t, "lsn-"+tokens[0]+".any.db.local."); !strings.Contains(strings.Join(txt, " "), "unprovable=") {
		t.Errorf("lsn-%s.any TXT %q: want unprovable=", tokens[0], txt)
	}
}

// A smart stop of a writable server with a client session open: pgdns
// keeps its own session while the client's remains (n1 out of every
// answer, set aside as stopping), and closes it once the client's ends,
// so that the stop completes: pgdns's session is never the one it waits
// for (a probe interval at most). Seen by postmaster.pid's status (a
// superuser) or by a new session refused (pg_monitor). A role without
// pg_read_all_stats is shown no type of another role's backends: pgdns
// cannot count them, and closes at once, as before.
func TestSmartStopCompletesOnceItsClientsLeave(t *testing.T) {
	t.Parallel()
	for name, dsn := range map[string]string{
		"superuser":  "",                                             // postmaster.pid's status, every probe
		"pg_monitor": "user=monitor dbname=postgres sslmode=disable", // a new session refused, about once a second
		"LOGIN only": leastPrivilege,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(2)})
			n1, n2 := pg.Nodes[0], pg.Nodes[1]
			n1.Exec(t, "CREATE ROLE pgdns LOGIN")
			n1.Exec(t, "CREATE ROLE monitor LOGIN IN ROLE pg_monitor")
			e := attach(t, pg, envOptions{DSN: dsn, Nodes: 2})
			e.waitFor(t, "primary.db.local.", []string{n1.IP})
			if dsn != leastPrivilege {
				e.waitFor(t, "replica.db.local.", []string{n2.IP})
			} else {
				waitHiddenAside(t, e, n2) // no replica is proven without pg_read_all_stats (decisions.md rule 1)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			client := n1.Conn(t)
			stopped := make(chan error, 1)
			go func() { stopped <- n1.Stop(ctx, "smart") }()
			e.waitFor(t, "primary.db.local.", nil)
			ours := func() int {
				var n int
				if err := client.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgdns'").Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			if dsn != leastPrivilege {
				e.waitHost(t, n1.Addr(), "set aside as stopping", func(h hostState) bool { return h.Aside == "stopping" })
				if n := ours(); n == 0 {
					t.Fatalf("pgdns closed its session on the stopping n1 while a client's remains")
				}
			} else {
				testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "pgdns's session on n1 closed", func() (int, bool) {
					n := ours()
					return n, n == 0
				})
			}
			if slices.Contains(e.ips(t, "any.db.local."), n1.IP) {
				t.Fatalf("any.db.local answered the stopping n1")
			}
			select {
			case err := <-stopped:
				t.Fatalf("the smart stop ended (%v) with the client's session open", err)
			default:
			}
			if err := client.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-stopped; err != nil {
				t.Fatalf("smart stop of n1 once its client left, pgdns running: %v", err)
			}
			e.waitFor(t, "primary.db.local.", nil)
		})
	}
}
