package test

// A crash of one backend (the OOM killer's pick) makes the postmaster
// reinitialise the server: every session ends, the server goes through
// crash recovery and comes back writable with the same start time. WAL
// not yet written out is lost, asynchronous commits included (review 7,
// H5), and the server writes other data at their positions. pgdns's
// session ended with the rest, and its new session was refused with 57P03
// "the database system is in recovery mode": rule 13's window must follow,
// whether or not pgdns's first probe after it sees the insert position
// back below the one it last saw (a busy primary has written past it).

import (
	"testing"

	"github.com/pgdns/pgdns/internal/pgtest"
)

func TestAsyncCommitsLostToAReinitialisation(t *testing.T) {
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(2), Conf: asyncCrashConf})
	n1, n2 := pg.Nodes[0], pg.Nodes[1]
	n1.Exec(t, "CREATE TABLE ryw (id serial PRIMARY KEY, v text)")
	e := attach(t, pg, envOptions{Interval: "250ms"}) // the default interval
	e.waitFor(t, "replica.db.local.", []string{n2.IP})

	walWriter, pid, tokens := writeUnflushedCommits(t, e, n1, n1.Conn(t))
	last := tokens[len(tokens)-1]

	// The OOM killer takes the backend: the postmaster reinitialises the
	// server; the clients reconnect at once and write on.
	crashAndWriteOn(t, n1.DSN(), walWriter, pid, tokens)
	// A write once pgdns sees the run again is above the window.
	e.waitFor(t, "primary.db.local.", []string{n1.IP})
	expectLostToTheCrash(t, e, n1, n2, []string{tokens[0], last}, "the reinitialisation", "reinitialised")
}
