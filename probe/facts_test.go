package probe

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/zone"
)

// Nothing the probe learns about history files outlives what it holds for
// (review 5 F1): a role that may not read them is asked again in a new
// session, and every historyRetry within one, so that a GRANT made while
// pgdns runs takes effect without a restart (before: never); and a
// timeline's history read from one server run is not kept for the next (a
// re-cloned or restored server at the same address may have another
// history under the same number; before: the first run's was kept).
func TestHistoryDenialAndCacheDoNotOutliveTheirSessionAndRun(t *testing.T) {
	t.Parallel()
	node, _, ctx := probedNode(t, 90*time.Second)
	file := filepath.Join(node.Dir, "pg_wal", "0000002A.history")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("1\t0/5000080\tno recovery target specified\n")
	first := []zone.TimelineEnd{{Timeline: 1, End: 0x5000080}}
	const grant = "GRANT EXECUTE ON FUNCTION pg_catalog.pg_read_file(text, bigint, bigint, boolean) TO "
	// history probes c and reads timeline 42's history as of that probe.
	history := func(c *pgChecker) ([]zone.TimelineEnd, Sample) {
		t.Helper()
		var s Sample
		testkit.Eventually(t, 30*time.Second, 50*time.Millisecond, "a probe", func() (error, bool) {
			var err error
			s, err = c.Check(ctx)
			return err, err == nil
		})
		at := s
		at.Timeline = 42
		h := c.readHistory(ctx, &at)
		if h == nil && !c.noHistories {
			h = c.readHistory(ctx, &at) // the first read only asked for the privilege
		}
		return h, s
	}

	t.Run("a GRANT is seen by the next session", func(t *testing.T) {
		node.Exec(t, "CREATE ROLE reader1 LOGIN IN ROLE pg_monitor")
		c := pgCheckerOf(t, "user=reader1 dbname=postgres sslmode=disable", node.Addr())
		c.historyRetry = time.Hour
		if h, _ := history(c); h != nil || !c.noHistories {
			t.Fatalf("a role that may not call pg_read_file read %v (files not permitted: %v)", h, c.noHistories)
		}
		node.Exec(t, grant+"reader1")
		if h, _ := history(c); h != nil {
			t.Fatalf("asked again within the session, before historyRetry: %v", h)
		}
		c.Close()
		if h, _ := history(c); !slices.Equal(h, first) || c.noHistories {
			t.Fatalf("a new session after the GRANT read %v (files not permitted: %v), want %v", h, c.noHistories, first)
		}
	})

	t.Run("a GRANT is seen within a session after historyRetry", func(t *testing.T) {
		node.Exec(t, "CREATE ROLE reader2 LOGIN IN ROLE pg_monitor")
		c := pgCheckerOf(t, "user=reader2 dbname=postgres sslmode=disable", node.Addr())
		c.historyRetry = 100 * time.Millisecond
		if h, _ := history(c); h != nil || !c.noHistories {
			t.Fatalf("a role that may not call pg_read_file read %v (files not permitted: %v)", h, c.noHistories)
		}
		session := c.connectedAt
		node.Exec(t, grant+"reader2")
		testkit.Eventually(t, 10*time.Second, 50*time.Millisecond, "the history after the GRANT, in the same session", func() ([]zone.TimelineEnd, bool) {
			h, _ := history(c)
			return h, slices.Equal(h, first)
		})
		if !c.connectedAt.Equal(session) {
			t.Error("the session was reopened: this case proves nothing of a retry within one")
		}
		// Asking writes nothing to the server's log (review 5 F15: a
		// pg_read_file in the asking statement, even in a CASE branch not
		// taken, logged a permission ERROR at every ask).
		if log := node.Log(); strings.Contains(log, "permission denied for function pg_read_file") {
			t.Errorf("the server logged a permission error for the history reads:\n%s", log)
		}
	})

	t.Run("a history read from one server run is not kept for the next", func(t *testing.T) {
		c := pgCheckerOf(t, "user=postgres dbname=postgres sslmode=disable", node.Addr())
		h, before := history(c)
		if !slices.Equal(h, first) {
			t.Fatalf("timeline 42's history read as %v, want %v", h, first)
		}
		// Another server at the same address, same timeline number, another
		// history: here the same data directory restarted with another file.
		write("1\t0/6000000\tno recovery target specified\n")
		if err := node.Stop(ctx, "fast"); err != nil {
			t.Fatal(err)
		}
		if err := node.Start(ctx); err != nil {
			t.Fatal(err)
		}
		h, after := history(c)
		if after.StartedAt.Equal(before.StartedAt) {
			t.Fatal("the restart did not start another server run")
		}
		if want := []zone.TimelineEnd{{Timeline: 1, End: 0x6000000}}; !slices.Equal(h, want) {
			t.Fatalf("after the restart timeline 42's history is %v, want the new run's %v", h, want)
		}
	})
}
