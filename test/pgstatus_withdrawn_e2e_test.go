package test

// pg-status's endpoints take a min_lsn and fall back to the primary when no
// replica fits; for a token pgdns withdraws for every name (here rule 13's
// window, and rule 12's fork: the primary restored in place from a backup
// taken before the write, while pgdns watched) that fallback sent the client to the
// restored primary, which lacks the write (review 7, H8). Now they answer
// no host, as prefer-replica does, and say why in X-Pgdns-Reason.

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/testkit"
)

func TestPgStatusMinLSNOfAWithdrawnToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{Nodes: 1})
	n1 := e.pg.Nodes[0]
	ctx := context.Background()
	n1.Exec(t, "CREATE TABLE t (id serial PRIMARY KEY, v text)")
	backup, err := n1.BaseBackup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lost := writeAndTakeLSN(t, n1.Conn(t), "INSERT INTO t (v) VALUES ('lost to the restore')")
	minLSN := strings.Replace(strings.ToUpper(lost), "-", "/", 1)
	// pgdns sees n1 at or past the token (rule 13's window reaches what
	// it saw of the old run).
	testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "pgdns to see n1 past the token", func() (hostState, bool) {
		h := e.hostStates(t)[n1.Addr()]
		return h, h.ReplayLSN != nil && parseLSN(t, *h.ReplayLSN) >= parseLSN(t, lost)
	})
	// No replica: the fallback answers the primary, which has the write.
	if code, body := e.get(t, http.DefaultClient, "/replica?min_lsn="+minLSN, ""); code != http.StatusOK || strings.TrimSpace(body) != n1.IP {
		t.Fatalf("before the restore GET /replica?min_lsn=%s → %d %q, want n1", minLSN, code, body)
	}
	if err := n1.RestoreInPlace(ctx, backup); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", []string{n1.IP})
	e.holds(t, "lsn-"+lost+".prefer-replica.db.local.", time.Second, exactly(), "n1: restored, it lacks the write")
	for _, path := range []string{"/replica", "/sync_by_time", "/sync_by_bytes", "/sync_by_time_or_bytes", "/sync_by_time_and_bytes", "/most_sync_by_bytes"} {
		path += "?min_lsn=" + minLSN
		resp, err := http.Get("http://" + e.app.HTTPAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || len(body) != 0 {
			t.Errorf("GET %s → %d %q, want 404 and no host: n1 was restored from before the token's write", path, resp.StatusCode, body)
		}
		if why := resp.Header.Get("X-Pgdns-Reason"); !strings.HasPrefix(why, "unprovable=") {
			t.Errorf("GET %s: X-Pgdns-Reason %q, want the unprovable= reason", path, why)
		}
	}
}
