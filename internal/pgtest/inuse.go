package pgtest

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// inUse reports whether any IPv4 TCP or UDP socket on this machine is bound
// to an address in the block 127.B.0.0/16, as the kernel lists them in
// /proc/net/tcp and /proc/net/udp. Where those files cannot be read, it
// reports false: the lock alone decides, as before.
func inUse(b int) bool {
	for _, path := range []string{"/proc/net/tcp", "/proc/net/udp"} {
		if boundIn(path, b) {
			return true
		}
	}
	return false
}

// tcpTimeWait is the st column of a TCP socket in TIME_WAIT. Such a socket
// belongs to no process and does not stop a server binding its address
// (Go and PostgreSQL set SO_REUSEADDR), but every test connection that
// closes leaves one for 60 s: counted, they made a block look taken for a
// minute after each test, and `go test -count=50` ran out of blocks
// ("all 151 address blocks are taken").
const tcpTimeWait = "06"

// boundIn scans one /proc/net table, skipping TIME_WAIT sockets. Its local_address column is the IPv4
// address as a hexadecimal 32-bit number in host (little-endian) order, then
// ":" and the port: 127.101.0.11 is "0B00657F".
func boundIn(path string, b int) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // the header line
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		if len(fields) > 3 && fields[3] == tcpTimeWait {
			continue
		}
		hexAddr, _, ok := strings.Cut(fields[1], ":")
		if !ok {
			continue
		}
		v, err := strconv.ParseUint(hexAddr, 16, 32)
		if err != nil {
			continue
		}
		if v&0xff == 127 && int(v>>8&0xff) == b {
			return true
		}
	}
	return false
}
