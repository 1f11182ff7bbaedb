package test

// A primary restarted as a replica with hot_standby = off (review 14a,
// withstood): a switchover whose old primary comes back as a standby that
// admits no session at all (57P03 "the database system is not accepting
// connections", Hot standby mode is disabled; nor does it serve the other
// replica, which streamed from it, until that one follows n2). That
// refusal is none of crash recovery's: it must set no restart window on
// the old primary's timeline, so the tokens of its writes stay answered,
// by hosts that have them; and no name answers a host lacking the row.

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdns/pgdns/internal/testkit"
)

func TestPrimaryRestartedAsAReplicaWithHotStandbyOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	n1, n2 := e.pg.Nodes[0], e.pg.Nodes[1]
	dsns := nodeDSNs(e.pg)
	conn := n1.Conn(t)
	if _, err := conn.Exec(t.Context(), "CREATE TABLE IF NOT EXISTS t (id serial PRIMARY KEY, v text)"); err != nil {
		t.Fatal(err)
	}
	marker := "written before the demotion"
	tok := writeAndTakeLSN(t, conn, "INSERT INTO t (v) VALUES ($1)", marker)
	conn.Close(context.Background())
	e.waitFor(t, "lsn-"+tok+".replica.db.local.", []string{e.ip(1), e.ip(2)})

	n1.Exec(t, "ALTER SYSTEM SET hot_standby = off")
	if err := n1.Stop(t.Context(), "fast"); err != nil {
		t.Fatal(err)
	}
	auto, err := os.ReadFile(filepath.Join(n1.Dir, "postgresql.auto.conf"))
	if err != nil {
		t.Fatal(err)
	}
	auto = append(auto, []byte("primary_conninfo = 'host="+n2.IP+" port="+strconv.Itoa(n2.Port)+" user=postgres application_name="+n1.Name+"'\n")...)
	if err := n1.WriteFile("postgresql.auto.conf", auto); err != nil {
		t.Fatal(err)
	}
	if err := n1.WriteFile("standby.signal", nil); err != nil {
		t.Fatal(err)
	}
	if err := n1.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if c, err := pgx.Connect(t.Context(), n1.DSN()); err == nil || !strings.Contains(err.Error(), "not accepting connections") {
		if c != nil {
			c.Close(context.Background())
		}
		t.Fatalf("n1 with hot_standby = off admitted a session, or refused it otherwise: %v", err)
	}
	if err := n2.Promote(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", []string{n2.IP})
	// n3, streaming from n1, is stuck on timeline 1: a standby without hot
	// standby serves no WAL sender either. Superseded, it is answered by no
	// name until it follows n2.
	neverLacking(t, e, dsns, 2*time.Second, marker, "replica.db.local.", "lsn-"+tok+".any.db.local.")
	if got := e.ips(t, "replica.db.local."); len(got) != 0 {
		t.Fatalf("replica answered %v: n3 is still on timeline 1", got)
	}
	e.pg.Nodes[2].Follow(t, n2)
	e.waitWithin(t, 60*time.Second, "replica.db.local.", []string{e.ip(2)})

	names := []string{"replica.db.local.", "prefer-replica.db.local.", "any.db.local.",
		"lsn-" + tok + ".replica.db.local.", "lsn-" + tok + ".prefer-replica.db.local.", "lsn-" + tok + ".any.db.local.",
		"lsn-" + tok + "-t1.prefer-replica.db.local.", "lsn-" + tok + "-t1.any.db.local."}
	seen := neverLacking(t, e, dsns, 4*time.Second, marker, names...)
	for _, name := range names[3:] {
		if len(seen[name]) == 0 {
			t.Errorf("%s answered nothing: the demoted primary's refusal set a window on its writes? TXT %q", name, e.txt(t, name))
		}
	}
	for _, name := range names {
		for _, ip := range seen[name] {
			if ip == n1.IP {
				t.Errorf("%s answered n1, which admits no session", name)
			}
		}
	}
	testkit.Eventually(t, 10*time.Second, 50*time.Millisecond, "/v1/hosts says why n1 is out", func() (string, bool) {
		_, body := e.get(t, http.DefaultClient, "/v1/hosts", "")
		return body, strings.Contains(body, "not accepting connections")
	})
	_, hosts := e.get(t, http.DefaultClient, "/v1/hosts", "")
	t.Logf("answered: %v; /v1/hosts %s", seen, hosts)
}
