package probe

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// A primary's probe reads its WAL senders' names (pg_stat_activity) when
// it does not know them, then takes them as known, and reads them again
// as soon as the set of senders changes: a replica that reconnects under
// another application name is named by it, never by the old one.
func TestPrimaryReadsSenderNamesOnlyWhenTheyChange(t *testing.T) {
	t.Parallel()
	cl := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(2)})
	primary, replica := cl.Nodes[0], cl.Nodes[1]
	c := pgCheckerOf(t, "user=postgres dbname=postgres sslmode=disable", primary.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	probe := func() (Sample, string) {
		t.Helper()
		pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
		defer pcancel()
		s, err := c.Check(pctx)
		if err != nil {
			t.Fatal(err)
		}
		return s, string(c.row.values[standbysColumn])
	}
	testkit.Eventually(t, 30*time.Second, 100*time.Millisecond, "the replica listed by its name", func() (string, bool) {
		s, col := probe()
		return col, len(s.Standbys) == 1 && s.Standbys[0].AppName == replica.Name
	})
	s, col := probe()
	if len(s.Standbys) != 1 || s.Standbys[0].AppName != replica.Name || !s.Standbys[0].Addr.IsValid() {
		t.Fatalf("the replica's sender on the next probe: %+v", s.Standbys)
	}
	if !strings.Contains(col, "true, null]") || strings.Contains(col, replica.Name) {
		t.Fatalf("the next probe's standbys column %q: the server read the sender's name again, or did not take it as known", col)
	}

	// The replica's WAL receiver restarts under another name: a new
	// sender on the primary, whose name the next probe that sees it reads.
	var conninfo string
	replica.Query(t, "SELECT current_setting('primary_conninfo')", &conninfo)
	replica.Exec(t, "ALTER SYSTEM SET primary_conninfo = '"+strings.ReplaceAll(conninfo, "'", "''")+" application_name=renamed'")
	var ok bool
	replica.Query(t, "SELECT pg_reload_conf()", &ok)
	testkit.Eventually(t, 30*time.Second, 50*time.Millisecond, "the renamed replica listed by its new name", func() ([]string, bool) {
		s, _ := probe()
		var names []string
		for _, sb := range s.Standbys {
			names = append(names, sb.AppName)
			if sb.AppName != replica.Name && sb.AppName != "renamed" {
				t.Fatalf("a sender named %q", sb.AppName)
			}
		}
		return names, len(names) == 1 && names[0] == "renamed"
	})
	if s, _ := probe(); len(s.Standbys) != 1 || s.Standbys[0].AppName != "renamed" {
		t.Fatalf("after the rename: %+v", s.Standbys)
	}
}
