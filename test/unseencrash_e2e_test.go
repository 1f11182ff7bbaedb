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
	"path/filepath"
	"strconv"
	"strings"
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
	return nftInput(t, table, fmt.Sprintf("ip daddr %s tcp dport %d drop", ip, port), fmt.Sprintf("ip saddr %s tcp sport %d drop", ip, port))
}

func TestAsyncCommitsLostToACrashPgdnsSawNoSignOf(t *testing.T) {
	b := pgtest.Addrs(t)
	alt := b.IP(20) // a second address of n1's server, for the clients, which the cut spares
	pg := pgtest.New(t, pgtest.Options{IPs: b.IPs(2), Conf: asyncCrashConf,
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

	conn, err := pgx.Connect(ctx, altDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	walWriter, pid, tokens := writeUnflushedCommits(t, e, n1, conn)
	last := tokens[len(tokens)-1]

	// pgdns's probes of n1 go unanswered: its session is closed by the
	// first that times out, and its connects fail, until the cut is
	// lifted. No crash notice, no refusal in crash recovery reaches it.
	lift := cutAddress(t, "pgdns_test_unseencrash", n1.IP, n1.Port)
	e.waitHost(t, n1.Addr(), "down behind the cut", func(h hostState) bool { return !h.Alive })

	// The OOM killer takes the backend: the postmaster reinitialises the
	// server (the stopped WAL writer is killed, as the postmaster would
	// after 5 s); the clients reconnect at once and write on, past the
	// position pgdns last saw.
	crashAndWriteOn(t, altDSN, walWriter, pid, tokens)
	if h := e.hostStates(t)[n1.Addr()]; h.Alive {
		t.Fatalf("pgdns reached n1 through the cut: %+v", h)
	}

	// The cut lifted, pgdns's next session finds n1 writable, in the
	// same server run, past where it last saw it: the statistics' reset
	// time alone shows the crash recovery.
	lift()
	e.waitFor(t, "primary.db.local.", []string{n1.IP})
	expectLostToTheCrash(t, e, n1, n2, []string{tokens[0], last}, "a crash pgdns saw no sign of but the statistics' reset", "or a stats reset")
}

// The same crash while pgdns was stopped: it left a state file, and the
// writer's run it finds when it starts again is the one the file names,
// past where the file last saw it. The reset time the file kept is what
// shows the crash recovery.
func TestAsyncCommitsLostToACrashWhilePgdnsWasDown(t *testing.T) {
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(2), Conf: asyncCrashConf})
	n1, n2 := pg.Nodes[0], pg.Nodes[1]
	n1.Exec(t, "CREATE TABLE ryw (id serial PRIMARY KEY, v text)")
	path := filepath.Join(t.TempDir(), "state.json")
	e := attach(t, pg, envOptions{Interval: "250ms", State: path})
	e.waitFor(t, "replica.db.local.", []string{n2.IP})
	ctx := context.Background()

	walWriter, pid, tokens := writeUnflushedCommits(t, e, n1, n1.Conn(t))
	last := tokens[len(tokens)-1]
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
	crashAndWriteOn(t, n1.DSN(), walWriter, pid, tokens)

	again := launch(t, pg, envOptions{Interval: "250ms", State: path})
	again.waitFor(t, "primary.db.local.", []string{n1.IP})
	expectLostToTheCrash(t, again, n1, n2, []string{tokens[0], last}, "a crash while pgdns was down", "or a stats reset")
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
