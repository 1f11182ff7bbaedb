package probe

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// A host that accepts no session (new backends wait in their startup
// behind a catalog lock) is not tried again by Watch after each probe:
// every try leaves one more backend stuck, holding a connection slot, until
// the lock goes. Probes alone leave one per probe; Watch must not double it.
func TestWatchLeavesNoExtraStuckSessions(t *testing.T) {
	t.Parallel()
	cl := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(1)})
	node := cl.Nodes[0]
	newChecker, err := PostgresCheckers("user=postgres dbname=postgres sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	c, err := newChecker(node.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := c.Check(ctx); err != nil {
		t.Fatal(err)
	}
	locker, err := pgx.Connect(ctx, node.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(context.Background())
	if _, err := locker.Exec(ctx, "BEGIN; LOCK TABLE pg_catalog.pg_stat_replication IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	// Backends are counted from ps: a new session would wait on the lock.
	pid, err := os.ReadFile(node.Dir + "/postmaster.pid")
	if err != nil {
		t.Fatal(err)
	}
	backends := func() int {
		out, err := exec.Command("ps", "--ppid", strings.SplitN(string(pid), "\n", 2)[0], "-o", "args=").Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(out), "postgres postgres")
	}
	before := backends() // the locker
	const probes = 8
	for range probes {
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, err := c.Check(pctx)
		pcancel()
		if err == nil {
			t.Fatal("a probe succeeded behind the lock")
		}
		wctx, wcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_ = c.(Watcher).Watch(wctx)
		wcancel()
	}
	if n := backends() - before; n > probes+2 {
		t.Fatalf("%d probes (and Watch between them) left %d backends stuck in startup, want at most %d", probes, n, probes+2)
	}
}
