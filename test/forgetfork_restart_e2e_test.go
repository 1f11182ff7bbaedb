package test

// Review 7, H11 (on 8f61224, forget-fork): the proof was dropped at the
// replica's next server run, whatever that run was. An operator who asked
// before the rebuild and whose replica then merely restarted (a crash, a
// setting that needs a restart, a reboot, the operator's own stop before
// deciding) had the unrebuilt replica, still the other branch's, answered
// again. Forget-fork now refuses while the host runs the run proven.

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
)

func TestForgetForkThenARestartThatIsNoRebuild(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(3)})
	n1, n2, n3 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	tokenFile := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(tokenFile, []byte("r7-admin-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := attach(t, pg, envOptions{AdminTokenFile: tokenFile})
	e.waitFor(t, "replica.db.local.", []string{n2.IP, n3.IP})
	ctx := context.Background()
	e.insertAndTakeLSN(t, n1)
	backup, err := n1.BaseBackup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lost := writeAndTakeLSN(t, n1.Conn(t), "INSERT INTO t (v) VALUES ('lost to the restore')")
	waitStreaming(t, n2, 1, lost)
	waitStreaming(t, n3, 1, lost)
	e.waitHost(t, n1.Addr(), "probed at or past the write", func(h hostState) bool { return replayedPast(t, h, lost) })
	if err := n1.RestoreInPlace(ctx, backup); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "primary.db.local.", []string{n1.IP})
	e.waitFor(t, "replica.db.local.", nil)
	writeAndTakeLSN(t, n1.Conn(t), "CREATE TABLE b AS SELECT repeat('y', 100) AS v FROM generate_series(1, 1000)")

	// The operator means to rebuild n2 and says so first: refused, n2
	// still runs the run proven on another branch.
	code, body := e.post(t, "/v1/admin/forget-fork?cluster=main&host="+n2.Addr(), "r7-admin-token")
	// n2 restarts before the rebuild: same data directory, the other branch.
	if err := n2.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	if err := n2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var has int
	n2.Query(t, "SELECT count(*) FROM t WHERE v = 'lost to the restore'", &has)
	if has != 1 {
		t.Fatalf("n2 restarted, not rebuilt, has %d rows of the lost write, want 1", has)
	}
	e.holds(t, "replica.db.local.", 3*time.Second, without(n2.IP),
		"n2, restarted but not rebuilt: its data is still the other branch's (it has the write the primary lost)")
	if code != 409 || !strings.Contains(body, "is the one proven on another branch") {
		t.Errorf("forget-fork before the rebuild: %d %s, want 409 saying n2 still runs the run proven", code, body)
	}
}
