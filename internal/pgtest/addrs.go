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
// crashed run never leaks a block. The path is fixed, not under TMPDIR:
// loopback addresses are shared by the whole machine, so every run on it
// must take its locks in one place, whatever TMPDIR each was given.
var lockDir = "/tmp/pgdns-test-addrs"

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
	bl, release, err := Reserve()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(release)
	return bl
}

// Reserve is Addrs for a program that is not a test (make soak): it takes
// the same locks, and the block is held until release is called or the
// process ends.
func Reserve() (bl *Block, release func(), err error) {
	if err := os.MkdirAll(lockDir, 0o777); err != nil {
		return nil, nil, fmt.Errorf("address locks: %w", err)
	}
	for b := firstBlock; b <= lastBlock; b++ {
		f, err := os.OpenFile(filepath.Join(lockDir, strconv.Itoa(b)+".lock"), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			return nil, nil, fmt.Errorf("address locks: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			continue
		}
		if inUse(b) {
			// A free lock but a bound address: a run killed before
			// its cleanup left a server behind (pg_ctl daemonizes
			// postgres, so it outlives the test). Using the block
			// would make its tests fail on "address in use".
			f.Close()
			continue
		}
		return &Block{b: b}, func() { f.Close() }, nil
	}
	return nil, nil, fmt.Errorf("all %d address blocks are taken", lastBlock-firstBlock+1)
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

// FleetSize is how many addresses Fleet has: 127.B.1.1 to 127.B.255.254.
const FleetSize = 255 * 254

// Fleet returns the block's i-th address beyond 127.B.0.*, i from 0 to
// FleetSize-1: 127.B.1.1, ..., 127.B.1.254, 127.B.2.1, ... For a run that
// needs hundreds of servers (the scale bench's fake fleet); the whole /16
// is the block's.
func (bl *Block) Fleet(i int) string {
	if i < 0 || i >= FleetSize {
		panic(fmt.Sprintf("pgtest: fleet address index %d out of 0..%d", i, FleetSize-1))
	}
	return "127." + strconv.Itoa(bl.b) + "." + strconv.Itoa(1+i/254) + "." + strconv.Itoa(1+i%254)
}

// Addr returns the i-th address with a port: "127.B.0.i:port".
func (bl *Block) Addr(i, port int) string { return bl.IP(i) + ":" + strconv.Itoa(port) }

// Port returns a port that is the block's own on any address: 20000+B,
// below Linux's ephemeral range. It is for a test that must listen outside
// the block, e.g. on 127.0.0.1 because it reaches the server by the name
// localhost.
func (bl *Block) Port() int { return 20000 + bl.b }
