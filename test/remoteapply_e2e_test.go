package test

// synchronous_commit = remote_apply (decisions.md rule 10's table): with
// FIRST n, a commit returns once every standby shown sync has applied it,
// so every host sync.replica answers right after it has the row; with
// ANY n only n of the standbys shown quorum have, and pgdns cannot tell
// which (the paused one is answered by sync.replica, lacking the row: the
// documented caveat), but the commit's lsn- token never answers it. The
// data is the oracle (roworacle_helpers_test.go). Review 12a, item 1.

import (
	"fmt"
	"testing"
	"time"
)

func TestRemoteApplyCommitsAndSyncReplica(t *testing.T) {
	e := newEnv(t, envOptions{})
	p, r1, r2 := e.pg.Nodes[0], e.pg.Nodes[1], e.pg.Nodes[2]
	dsns := nodeDSNs(e.pg)
	e.insertAndTakeLSN(t, p)
	conn := p.Conn(t)
	if _, err := conn.Exec(t.Context(), "SET synchronous_commit = remote_apply"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		names string
		want  []string
	}{{fmt.Sprintf(`FIRST 1 ("%s")`, r1.Name), []string{r1.IP}}, {fmt.Sprintf(`FIRST 2 ("%s", "%s")`, r1.Name, r2.Name), []string{r1.IP, r2.IP}}} {
		p.Exec(t, "ALTER SYSTEM SET synchronous_standby_names = '"+c.names+"'")
		p.Exec(t, "SELECT pg_reload_conf()")
		e.waitFor(t, "sync.replica.db.local.", c.want)
		for i := range 30 {
			marker := fmt.Sprintf("%s %d", c.names, i)
			tok := writeAndTakeLSN(t, conn, "INSERT INTO t (v) VALUES ($1)", marker)
			for _, name := range []string{"sync.replica.db.local.", "lsn-" + tok + ".replica.db.local.", "lsn-" + tok + ".sync.replica.db.local."} {
				if got, lacking := answeredLacking(t, e, dsns, name, marker); len(lacking) > 0 {
					t.Errorf("%s, right after remote_apply commit %q: %s answered %v; %v lack the row (%s; TXT %q)",
						c.names, marker, name, got, lacking, positionsLine(t, dsns), e.txt(t, name))
				}
			}
		}
	}

	p.Exec(t, fmt.Sprintf(`ALTER SYSTEM SET synchronous_standby_names = 'ANY 1 ("%s", "%s")'`, r1.Name, r2.Name))
	p.Exec(t, "SELECT pg_reload_conf()")
	e.waitFor(t, "sync.replica.db.local.", []string{r1.IP, r2.IP})
	r2.Exec(t, "SELECT pg_wal_replay_pause()")
	caveat := 0
	for i := range 10 {
		marker := fmt.Sprintf("any %d", i)
		tok := writeAndTakeLSN(t, conn, "INSERT INTO t (v) VALUES ($1)", marker)
		if _, lacking := answeredLacking(t, e, dsns, "sync.replica.db.local.", marker); len(lacking) > 0 {
			caveat++
		}
		neverLacking(t, e, dsns, 200*time.Millisecond, marker, "lsn-"+tok+".sync.replica.db.local.", "lsn-"+tok+".replica.db.local.")
	}
	t.Logf("ANY 1 with %s paused: %d of 10 sync.replica answers right after a commit held a standby lacking it (the documented caveat)", r2.Name, caveat)
	r2.Exec(t, "SELECT pg_wal_replay_resume()")
}
