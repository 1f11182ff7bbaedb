package test

// A crash of one backend reinitialises the primary (same start time,
// asynchronous commits lost, other data written at their positions), and
// pgdns sees none of rule 13's three crash signs: its session was cut by
// a failed probe before the crash (so no crash notice reaches it), every
// connect it tries fails until crash recovery is over (so no 57P03
// refusal), and clients write past the old position before its next
// probe (so the WAL is not back). The statistics' reset time, which crash
// recovery moves within a run (probe/statsreset.go), is what is left to
// see it by: the lost tokens must be answered by no name. And the same
// crash while pgdns was stopped, seen by the reset time its state file
// kept.

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/state"
	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/zone"
)

// cutAddress drops every TCP packet to and from ip:port (established
// sessions included) in an nftables table of the test's own, deleted when
// the test ends; lift deletes it sooner.
func cutAddress(t *testing.T, table, ip string, port int) (lift func()) {
	t.Helper()
	testkit.RequireRoot(t, "nftables rules")
	nft := testkit.RequireTool(t, "nft")
	rules := fmt.Sprintf("table inet %s {\n chain input {\n  type filter hook input priority 0; policy accept;\n"+
		"  ip daddr %s tcp dport %d drop\n  ip saddr %s tcp sport %d drop\n }\n}\n", table, ip, port, ip, port)
	cmd := exec.Command(nft, "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft: %v: %s", err, out)
	}
	lift = func() { _ = exec.Command(nft, "delete", "table", "inet", table).Run() }
	t.Cleanup(lift)
	return lift
}

func TestAsyncCommitsLostToACrashPgdnsSawNoSignOf(t *testing.T) {
	b := pgtest.Addrs(t)
	alt := b.IP(20) // a second address of n1's server, for the clients, which the cut spares
	pg := pgtest.New(t, pgtest.Options{IPs: b.IPs(2), Conf: []string{"wal_writer_delay = 10s", "wal_writer_flush_after = 0"},
		Listen: func(ip string) []string {
			if ip == b.IP(1) {
				return []string{alt}
			}
			return nil
		}})
	n1, n2 := pg.Nodes[0], pg.Nodes[1]
	n1.Exec(t, "CREATE TABLE ryw (id serial PRIMARY KEY, v text)")
	e := attach(t, pg, envOptions{Interval: "250ms"}) // the default interval
	e.waitFor(t, "replica.db.local.", []string{n2.IP})
	ctx := context.Background()
	altDSN := "host=" + alt + " port=" + strconv.Itoa(n1.Port) + " user=postgres dbname=postgres sslmode=disable"

	// The WAL writer is held stopped, so that no asynchronous commit is
	// written out before the crash: every one of them is lost.
	var walWriter int
	n1.Query(t, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'", &walWriter)
	if err := syscall.Kill(walWriter, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, altDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SET synchronous_commit = off"); err != nil {
		t.Fatal(err)
	}
	var pid int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	var tokens []string
	for i := range 30 {
		tokens = append(tokens, writeAndTakeLSN(t, conn, "INSERT INTO ryw (v) VALUES ($1)", fmt.Sprintf("async-%d", i)))
	}
	last := tokens[len(tokens)-1]
	testkit.Eventually(t, 10*time.Second, 50*time.Millisecond, "pgdns to probe n1 past the tokens", func() (string, bool) {
		got := e.hostStates(t)[n1.Addr()].ReplayLSN // a primary's is its insert position
		return deref(got), got != nil && parseLSN(t, *got) >= parseLSN(t, last)
	})

	// pgdns's probes of n1 go unanswered: its session is closed by the
	// first that times out, and its connects fail, until the cut is
	// lifted. No crash notice, no refusal in crash recovery reaches it.
	lift := cutAddress(t, "pgdns_test_unseencrash", n1.IP, n1.Port)
	e.waitHost(t, n1.Addr(), "down behind the cut", func(h hostState) bool { return !h.Alive })

	// The OOM killer takes the backend: the postmaster reinitialises the
	// server (the stopped WAL writer is killed, as the postmaster would
	// after 5 s); the clients reconnect at once and write on, past the
	// position pgdns last saw.
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(walWriter, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, 2*time.Millisecond, "a client to reconnect and write", func() (string, bool) {
		c, err := pgx.Connect(ctx, altDSN)
		if err != nil {
			return err.Error(), false
		}
		defer c.Close(ctx)
		_, err = c.Exec(ctx, "INSERT INTO ryw (v) SELECT repeat('z', 200) FROM generate_series(1, 3000)")
		return fmt.Sprint(err), err == nil
	})
	check, err := pgx.Connect(ctx, altDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close(ctx)
	var survived int
	var past bool
	if err := check.QueryRow(ctx, "SELECT count(*) FROM ryw WHERE v LIKE 'async-%'").Scan(&survived); err != nil {
		t.Fatal(err)
	}
	if survived != 0 {
		t.Fatalf("%d of %d asynchronous commits survived the crash (the WAL writer was stopped): the scene is not what the test needs", survived, len(tokens))
	}
	if err := check.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn() > '"+strings.Replace(last, "-", "/", 1)+"'::pg_lsn").Scan(&past); err != nil {
		t.Fatal(err)
	}
	if !past {
		t.Fatalf("n1 did not write past the lost tokens")
	}
	if h := e.hostStates(t)[n1.Addr()]; h.Alive {
		t.Fatalf("pgdns reached n1 through the cut: %+v", h)
	}

	// The cut lifted, pgdns's next session finds n1 writable, in the
	// same server run, past where it last saw it: the statistics' reset
	// time alone shows the crash recovery.
	lift()
	e.waitFor(t, "primary.db.local.", []string{n1.IP})
	expectLostToTheCrash(t, e, n1, n2, []string{tokens[0], last}, "a crash pgdns saw no sign of but the statistics' reset")
}

// The same crash while pgdns was stopped: it left a state file, and the
// writer's run it finds when it starts again is the one the file names,
// past where the file last saw it. The reset time the file kept is what
// shows the crash recovery.
func TestAsyncCommitsLostToACrashWhilePgdnsWasDown(t *testing.T) {
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(2), Conf: []string{"wal_writer_delay = 10s", "wal_writer_flush_after = 0"}})
	n1, n2 := pg.Nodes[0], pg.Nodes[1]
	n1.Exec(t, "CREATE TABLE ryw (id serial PRIMARY KEY, v text)")
	path := filepath.Join(t.TempDir(), "state.json")
	e := attach(t, pg, envOptions{Interval: "250ms", State: path})
	e.waitFor(t, "replica.db.local.", []string{n2.IP})
	ctx := context.Background()

	var walWriter int
	n1.Query(t, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'", &walWriter)
	if err := syscall.Kill(walWriter, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	conn := n1.Conn(t)
	if _, err := conn.Exec(ctx, "SET synchronous_commit = off"); err != nil {
		t.Fatal(err)
	}
	var pid int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	var tokens []string
	for i := range 30 {
		tokens = append(tokens, writeAndTakeLSN(t, conn, "INSERT INTO ryw (v) VALUES ($1)", fmt.Sprintf("async-%d", i)))
	}
	last := tokens[len(tokens)-1]
	testkit.Eventually(t, 10*time.Second, 50*time.Millisecond, "pgdns to probe n1 past the tokens", func() (string, bool) {
		got := e.hostStates(t)[n1.Addr()].ReplayLSN
		return deref(got), got != nil && parseLSN(t, *got) >= parseLSN(t, last)
	})
	if err := e.app.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	m, _, err := state.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if b := m["main"].Branches[1]; b.StatsReset == 0 || b.Upto != 0 || b.Insert < zone.LSN(parseLSN(t, last)) {
		t.Fatalf("the state file's branch of timeline 1: %+v, want the run's reset time, no window, past %s", b, last)
	}

	// pgdns is down: the backend crashes, the server is reinitialised,
	// the clients write past the lost tokens.
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(walWriter, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, 2*time.Millisecond, "a client to reconnect and write", func() (string, bool) {
		c, err := pgx.Connect(ctx, n1.DSN())
		if err != nil {
			return err.Error(), false
		}
		defer c.Close(ctx)
		_, err = c.Exec(ctx, "INSERT INTO ryw (v) SELECT repeat('z', 200) FROM generate_series(1, 3000)")
		return fmt.Sprint(err), err == nil
	})
	var survived int
	n1.Query(t, "SELECT count(*) FROM ryw WHERE v LIKE 'async-%'", &survived)
	if survived != 0 {
		t.Fatalf("%d of %d asynchronous commits survived the crash (the WAL writer was stopped): the scene is not what the test needs", survived, len(tokens))
	}
	var past bool
	n1.Query(t, "SELECT pg_current_wal_insert_lsn() > '"+strings.Replace(last, "-", "/", 1)+"'::pg_lsn", &past)
	if !past {
		t.Fatalf("n1 did not write past the lost tokens")
	}

	again := launch(t, pg, envOptions{Interval: "250ms", State: path})
	again.waitFor(t, "primary.db.local.", []string{n1.IP})
	expectLostToTheCrash(t, again, n1, n2, []string{tokens[0], last}, "a crash while pgdns was down")
}

// expectLostToTheCrash checks what both crashes above must leave: a write
// after the crash is answered by the replica, and the lost commits'
// tokens (the first and the last) by no name, with and without their
// timeline, the last one's TXT saying why (a crash or a stats reset).
func expectLostToTheCrash(t *testing.T, e *env, n1, n2 *pgtest.Node, lost []string, crash string) {
	t.Helper()
	after := e.insertAndTakeLSN(t, n1)
	waitStreaming(t, n2, 1, after)
	e.waitFor(t, "lsn-"+after+".replica.db.local.", []string{n2.IP}) // a write after it is answered
	for _, tok := range lost {
		for _, name := range []string{"lsn-" + tok + ".replica.db.local.", "lsn-" + tok + "-t1.any.db.local.", "lsn-" + tok + ".prefer-replica.db.local."} {
			e.holds(t, name, 500*time.Millisecond, exactly(), "no host: the write was an asynchronous commit lost to "+crash)
		}
	}
	last := lost[len(lost)-1]
	txt := strings.Join(e.txt(t, "lsn-"+last+".any.db.local."), " ")
	t.Logf("lsn-%s.any TXT: %s", last, txt)
	if !strings.Contains(txt, "unprovable=") || !strings.Contains(txt, "or a stats reset") {
		t.Errorf("lsn-%s.any TXT %q: want unprovable= saying the server was reinitialised after a crash or a stats reset", last, txt)
	}
}

// An operator's pg_stat_reset_shared('bgwriter') moves the same reset
// time within a run, and pgdns cannot tell it from a crash recovery: the
// tokens of the writes before it fail closed as after a crash, with a
// reason that says it may be a stats reset; a write after it is answered.
func TestStatsResetFailsClosedLikeACrash(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{Nodes: 2})
	n1, n2 := e.pg.Nodes[0], e.pg.Nodes[1]
	e.waitFor(t, "replica.db.local.", []string{n2.IP})
	before := e.insertAndTakeLSN(t, n1)
	waitStreaming(t, n2, 1, before)
	e.waitFor(t, "lsn-"+before+".replica.db.local.", []string{n2.IP})

	n1.Exec(t, "SELECT pg_stat_reset_shared('bgwriter')")
	testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "the token of a write before the reset refused", func() (string, bool) {
		txt := strings.Join(e.txt(t, "lsn-"+before+".any.db.local."), " ")
		return txt, strings.Contains(txt, "unprovable=") && strings.Contains(txt, "or a stats reset")
	})
	e.holds(t, "lsn-"+before+".replica.db.local.", 500*time.Millisecond, exactly(), "no host: a stats reset cannot be told from a crash recovery")
	after := e.insertAndTakeLSN(t, n1)
	waitStreaming(t, n2, 1, after)
	e.waitFor(t, "lsn-"+after+".replica.db.local.", []string{n2.IP})
}
