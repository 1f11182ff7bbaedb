package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// TestAddrsSkipALeftoverServer binds an address of a free block, as a
// server left behind by a killed run would, and checks the allocator hands
// that block to nobody while it is bound, over TCP and over UDP.
func TestAddrsSkipALeftoverServer(t *testing.T) {
	for _, network := range []string{"tcp", "udp"} {
		bl, release, err := Reserve()
		if err != nil {
			t.Fatal(err)
		}
		release()
		var closer interface{ Close() error }
		if network == "tcp" {
			closer, err = net.Listen("tcp", bl.Addr(254, 9))
		} else {
			closer, err = net.ListenPacket("udp", bl.Addr(254, 9))
		}
		if err != nil {
			t.Fatal(err)
		}
		if !inUse(bl.b) {
			t.Errorf("%s: inUse(%d) = false with %s bound", network, bl.b, bl.Addr(254, 9))
		}
		next := Addrs(t)
		if next.b == bl.b {
			t.Errorf("%s: block %d handed out while %s is bound", network, bl.b, bl.Addr(254, 9))
		}
		closer.Close()
	}
}

// A connection a test closed leaves a TIME_WAIT socket on its block for
// 60 s; the block is free again at once. Before the fix inUse counted it,
// and go test -count=50 of a test with a server ran out of blocks.
func TestAddrsReuseABlockInTimeWait(t *testing.T) {
	bl, release, err := Reserve()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", bl.Addr(254, 9))
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	s.Close() // the server closes first: its side (in the block) waits
	_, _ = c.Read(make([]byte, 1))
	c.Close()
	ln.Close()
	release()
	if inUse(bl.b) {
		t.Errorf("inUse(%d) = true with only a TIME_WAIT socket left in the block", bl.b)
	}
}

func TestBoundInReadsProcNet(t *testing.T) {
	table := "  sl  local_address rem_address   st\n" +
		"   0: 0B00657F:1538 00000000:0000 0A\n" +
		"   1: 0100007F:0035 00000000:0000 0A\n" +
		"   2: 0B00677F:1538 0100007F:9C40 06\n" // TIME_WAIT in 127.103.0.0/16
	path := filepath.Join(t.TempDir(), "tcp")
	if err := os.WriteFile(path, []byte(table), 0o600); err != nil {
		t.Fatal(err)
	}
	for b, want := range map[int]bool{101: true, 0: true, 102: false, 103: false} {
		if got := boundIn(path, b); got != want {
			t.Errorf("boundIn(127.%d.0.0/16) = %v, want %v", b, got, want)
		}
	}
	if boundIn(filepath.Join(t.TempDir(), "missing"), 101) {
		t.Error("an unreadable table counts as bound")
	}
}

// TestFailedStartSaysWhy holds the primary's address, so that its server
// cannot bind: the error carries the server's own words from its log,
// which Start removes with the cluster (pg_ctl says only "Examine the log
// output").
func TestFailedStartSaysWhy(t *testing.T) {
	t.Parallel()
	Require(t)
	ip := Addrs(t).IP(1)
	ln, err := net.Listen("tcp", ip+":5432")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{IPs: []string{ip}})
	if err == nil {
		c.Close()
		t.Fatal("the primary started on an address in use")
	}
	if !strings.Contains(err.Error(), "could not bind") || !strings.Contains(err.Error(), ip+":5432's log") {
		t.Fatalf("the error does not say why:\n%v", err)
	}
}

// A pg_basebackup that hangs (its server frozen by SIGSTOP: the kernel
// takes the connection, nobody answers) is stopped by its step's own
// deadline and made once more, which, the server thawed, succeeds; one
// stopped by the caller's context is not made again, and its error says
// that pgtest stopped it, and when, rather than "exit status 130".
func TestBaseBackupStoppedByItsStepIsMadeAgain(t *testing.T) {
	t.Parallel()
	c := New(t, Options{IPs: Addrs(t).IPs(1)})
	// A step of 6s leaves the second copy 5s after the thaw: with 3s (2s
	// after the thaw) a copy at load 19 (CI beside five other runs) was
	// stopped by its second step's deadline too.
	c.backupStep = 6 * time.Second
	n := c.Nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	if err := n.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// Frozen through the first step, thawed during the second.
	thawed := time.AfterFunc(c.backupStep+time.Second, func() { _ = n.Signal(syscall.SIGCONT) })
	defer func() { thawed.Stop(); _ = n.Signal(syscall.SIGCONT) }()
	start := time.Now()
	dir, err := n.BaseBackup(ctx)
	if err != nil {
		t.Fatalf("the copy made again after its step's deadline: %v", err)
	}
	if took := time.Since(start); took < c.backupStep {
		t.Fatalf("the copy took %v, less than a step (%v): the server was not frozen through the first", took, c.backupStep)
	}
	if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); err != nil {
		t.Fatalf("the copy: %v", err)
	}

	if err := n.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	defer cancelShort()
	start = time.Now()
	_, err = n.BaseBackup(short)
	_ = n.Signal(syscall.SIGCONT)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "stopped by pgtest after") {
		t.Fatalf("a copy stopped by its caller's context: %v, want pgtest's word for it", err)
	}
	if took := time.Since(start); took > c.backupStep {
		t.Fatalf("a copy stopped by its caller's context took %v: it was made again", took)
	}
	t.Logf("%v", err)
}
