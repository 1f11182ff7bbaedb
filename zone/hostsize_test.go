package zone

import (
	"testing"
	"unsafe"
)

// TestHostSizeClasses guards the size of a Host (host.go: its booleans
// together): a cluster of 3 hosts is allocated as 3 Hosts in the
// prober's state, and as a Cluster with its 3 Hosts in every snapshot
// (probe's newBuilt), each with the allocator's 8-byte header; at 720
// bytes a Host took both one size class higher, 2.1 MiB more live heap
// at ten thousand hosts (issue 28). A field added to Host may cost that
// again: put it where padding was, or say why it is worth it here.
func TestHostSizeClasses(t *testing.T) {
	const header = 8
	host, cluster := unsafe.Sizeof(Host{}), unsafe.Sizeof(Cluster{})
	if n := 3*host + header; n > 2048 {
		t.Errorf("a cluster of 3 hosts in the prober's state takes %d bytes (a Host is %d), past the 2,048-byte size class", n, host)
	}
	if n := cluster + 3*host + header; n > 2304 {
		t.Errorf("a built cluster of 3 hosts takes %d bytes (a Host %d, a Cluster %d), past the 2,304-byte size class", n, host, cluster)
	}
}
