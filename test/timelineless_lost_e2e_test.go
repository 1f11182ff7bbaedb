package test

// A token without a timeline of a write lost in a failover (review 7, H4):
// pgdns saw the old primary insert past the token, and the new timeline's
// history file says the old timeline ended before it. Such a position lies
// in (where timeline 1 ended, where pgdns saw its writer insert]: on
// timeline 1 it names the lost write, on timeline 2 other WAL, and every
// host now on timeline 2 lacks the write. No name may answer it, as rule
// 13 refuses a token without a timeline in a restart's window.

import (
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
)

func TestTimelinelessTokenOfAWriteLostInAFailover(t *testing.T) {
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(3)})
	old, promoted, follower := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	old.Exec(t, "CREATE TABLE ryw (v text)")
	e := attach(t, pg, envOptions{})
	kept := e.insertAndTakeLSN(t, old)
	e.waitFor(t, "lsn-"+kept+".replica.db.local.", []string{promoted.IP, follower.IP})

	lost, later := e.lostWriteSeen(t, old, promoted, follower)
	e.waitFor(t, "primary.db.local.", []string{promoted.IP})
	e.waitFor(t, "lsn-"+later+".replica.db.local.", []string{follower.IP})
	e.waitFor(t, "lsn-"+later+".any.db.local.", []string{promoted.IP, follower.IP})
	e.waitFor(t, "lsn-"+kept+".replica.db.local.", []string{follower.IP}) // a token before the switch is in both timelines
	// With -t1 every name refuses it (rule 9: the history file proves the loss).
	e.holds(t, "lsn-"+lost+"-t1.prefer-replica.db.local.", 500*time.Millisecond, exactly(), "no host: the write is lost")
	for _, name := range []string{"lsn-" + lost + ".replica.db.local.", "lsn-" + lost + ".prefer-replica.db.local.", "lsn-" + lost + ".any.db.local."} {
		e.holds(t, name, time.Second, exactly(),
			"no host: the token's position lies between where timeline 1 ended and where pgdns saw n1 insert on it; "+
				"every host now on timeline 2 lacks the write")
	}
	txt := strings.Join(e.txt(t, "lsn-"+lost+".any.db.local."), " ")
	t.Logf("lsn-%s.any TXT: %s", lost, txt)
	if !strings.Contains(txt, "unprovable=") || !strings.Contains(txt, "may be a write of timeline 1 lost in the failover to 2 at") {
		t.Errorf("lsn-%s.any TXT %q: want unprovable= saying it may be a write of timeline 1 lost in the failover to 2", lost, txt)
	}
}
