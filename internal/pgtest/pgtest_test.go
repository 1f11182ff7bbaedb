package pgtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/testkit"
)

func TestClusterStreams(t *testing.T) {
	t.Parallel()
	c := New(t, Options{IPs: Addrs(t).IPs(2)})
	c.Nodes[0].Exec(t, "CREATE TABLE t (x int); INSERT INTO t VALUES (42)")
	conn := c.Nodes[1].Conn(t)
	testkit.Eventually(t, 10*time.Second, 50*time.Millisecond, "the replica to see the row (in recovery, rows, error)", func() (string, bool) {
		var inRecovery bool
		var n int
		err := conn.QueryRow(context.Background(), "SELECT pg_is_in_recovery(), (SELECT count(*) FROM t)").Scan(&inRecovery, &n)
		return fmt.Sprintf("%v, %d, %v", inRecovery, n, err), err == nil && inRecovery && n == 1
	})
}

func TestAddrsNeverShared(t *testing.T) {
	a, b := Addrs(t), Addrs(t)
	if a.IP(1) == b.IP(1) {
		t.Fatalf("two blocks share %s", a.IP(1))
	}
	if got := a.IPs(3); got[0] != a.IP(1) || got[2] != a.IP(3) {
		t.Fatalf("IPs(3) = %v", got)
	}
	if a.Port() == b.Port() {
		t.Fatalf("two blocks share port %d", a.Port())
	}
}
