package pgtest

import (
	"context"
	"testing"
	"time"
)

func TestClusterStreams(t *testing.T) {
	t.Parallel()
	c := New(t, Options{IPs: Addrs(t).IPs(2)})
	c.Nodes[0].Exec(t, "CREATE TABLE t (x int); INSERT INTO t VALUES (42)")
	conn := c.Nodes[1].Conn(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var inRecovery bool
		var n int
		err := conn.QueryRow(context.Background(), "SELECT pg_is_in_recovery(), (SELECT count(*) FROM t)").Scan(&inRecovery, &n)
		if err == nil && inRecovery && n == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica never saw the row: in recovery %v, rows %d, err %v", inRecovery, n, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
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
