package probe

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/zone"
)

// A primary's probe reads its WAL senders' names (pg_stat_activity) and
// slots when it does not know them, then takes them as known (the known
// variant, which reads neither), and reads them again in the probe that
// first sees the set of senders change: a replica that reconnects under
// another application name and with a slot is named by it, never by the
// old one, and keeps its slot on the probes after. In its first moments,
// before its WAL receiver's first reply (1 to 100 ms, replay_lsn NULL), it
// is named by none (standbysSQL), and by its name at the probe after
// (senderKnownSQL: known only while replay_lsn stays NULL).
func TestPrimaryReadsSenderNamesOnlyWhenTheyChange(t *testing.T) {
	t.Parallel()
	cl := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(2)})
	primary, replica := cl.Nodes[0], cl.Nodes[1]
	c := pgCheckerOf(t, "user=postgres dbname=postgres sslmode=disable", primary.Addr())
	c.keepColumns = true // read below: the standbys column as the server sent it
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
	if !strings.Contains(col, "null, true, null]") || strings.Contains(col, replica.Name) || c.row.senders.run == 0 {
		t.Fatalf("the next probe's standbys column %q: the server read the sender's name or slot again, or did not take it as known", col)
	}

	// The replica's WAL receiver restarts under another name: a new
	// sender on the primary, whose name the next probe that sees it reads.
	var conninfo string
	replica.Query(t, "SELECT current_setting('primary_conninfo')", &conninfo)
	var slot string
	primary.Query(t, "SELECT slot_name FROM pg_create_physical_replication_slot('pgdns_test_slot')", &slot)
	replica.Exec(t, "ALTER SYSTEM SET primary_conninfo = '"+strings.ReplaceAll(conninfo, "'", "''")+" application_name=renamed'")
	replica.Exec(t, "ALTER SYSTEM SET primary_slot_name = 'pgdns_test_slot'")
	var ok bool
	replica.Query(t, "SELECT pg_reload_conf()", &ok)
	testkit.Eventually(t, 30*time.Second, 50*time.Millisecond, "the renamed replica listed by its new name", func() ([]string, bool) {
		s, _ := probe()
		var names []string
		for _, sb := range s.Standbys {
			names = append(names, sb.AppName)
			if sb.AppName != replica.Name && sb.AppName != "renamed" && sb.AppName != "" {
				t.Fatalf("a sender named %q", sb.AppName)
			}
		}
		return names, len(names) == 1 && names[0] == "renamed"
	})
	testkit.Eventually(t, 30*time.Second, 50*time.Millisecond, "the renamed sender's slot", func() ([]zone.Standby, bool) {
		s, _ := probe()
		return s.Standbys, len(s.Standbys) == 1 && s.Standbys[0].Slot == slot
	})
	for range 3 {
		s, col := probe()
		if len(s.Standbys) != 1 || s.Standbys[0].AppName != "renamed" || s.Standbys[0].Slot != slot || !strings.Contains(col, "null, true, null]") {
			t.Fatalf("after the rename, with the sender known: %+v (standbys column %q)", s.Standbys, col)
		}
	}
}
