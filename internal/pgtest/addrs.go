package pgtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// Loopback blocks handed out to tests: 127.B.0.0/16 for B in
// [firstBlock, lastBlock]. Every 127.x.y.z address is loopback on Linux,
// so each test gets addresses of its own on the standard ports (5432, 53)
// without asking anyone.
const (
	firstBlock = 100
	lastBlock  = 250
)

// lockDir holds one lock file per block. The lock is an flock on an open
// file: it is released when the test ends or its process dies, so a
// crashed run never leaks a block.
var lockDir = filepath.Join(os.TempDir(), "pgdns-test-addrs")

// Block is a range of loopback addresses owned by one test until it ends.
// Tests in other packages (other processes) never get the same block.
type Block struct {
	b int
}

// Addrs reserves a block of loopback addresses for t: the one allocator of
// test addresses, so that tests running in parallel, in this process or
// another, never share an address.
func Addrs(t testing.TB) *Block {
	t.Helper()
	if err := os.MkdirAll(lockDir, 0o777); err != nil {
		t.Fatalf("pgtest: address locks: %v", err)
	}
	for b := firstBlock; b <= lastBlock; b++ {
		f, err := os.OpenFile(filepath.Join(lockDir, strconv.Itoa(b)+".lock"), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			t.Fatalf("pgtest: address locks: %v", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			continue
		}
		t.Cleanup(func() { f.Close() })
		return &Block{b: b}
	}
	t.Fatalf("pgtest: all %d address blocks are taken", lastBlock-firstBlock+1)
	return nil
}

// IP returns the block's i-th address, i from 1 to 254: "127.B.0.i".
func (bl *Block) IP(i int) string {
	if i < 1 || i > 254 {
		panic(fmt.Sprintf("pgtest: address index %d out of 1..254", i))
	}
	return "127." + strconv.Itoa(bl.b) + ".0." + strconv.Itoa(i)
}

// IPs returns n consecutive addresses starting at the block's first.
func (bl *Block) IPs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = bl.IP(i + 1)
	}
	return out
}

// Addr returns the i-th address with a port: "127.B.0.i:port".
func (bl *Block) Addr(i, port int) string { return bl.IP(i) + ":" + strconv.Itoa(port) }
