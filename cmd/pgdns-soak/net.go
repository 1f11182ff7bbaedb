package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// The soak's addresses, all in its block 127.B.0.0/16. Every path to a
// node has an address of its own on that node, so that a packet filter
// can cut one path and leave the others (every packet between two local
// sockets has source 127.0.0.1, whoever sent it; only the destination
// tells paths apart):
//
//	127.B.0.i        node i (4: the foreign host): the harness, the
//	                 heartbeat and the clients' connections
//	127.B.1.i        node i as pgdns probes it (the hosts in its config,
//	                 so the addresses it answers)
//	127.B.2.i        the delaying proxy in front of 127.B.1.i (node
//	                 proxied only)
//	127.B.(10+j).i   node i as node j's WAL receiver streams from it
//	127.B.0.53       pgdns's DNS listener
//
// A client maps an answered 127.B.1.i or 127.B.2.i to 127.B.0.i, the same
// server: a partition between pgdns and a node leaves the clients' path
// open, as when pgdns runs on another machine than the applications.
const (
	pathMain  = 0
	pathPGDNS = 1
	pathProxy = 2
	pathRepl  = 10
	// proxied is the node whose probe path runs through the delaying
	// proxy.
	proxied    = 2
	foreignIdx = 4
)

// pathIP is node i's address on path (third octet) p.
func (h *harness) pathIP(p, i int) string {
	octets := strings.Split(h.opts.Addrs.IP(i), ".")
	octets[2] = fmt.Sprint(p)
	return strings.Join(octets, ".")
}

// nodeIndex is the node i whose address ip is on any path, 0 if none.
func (h *harness) nodeIndex(ip string) int {
	octets := strings.Split(h.opts.Addrs.IP(1), ".")
	prefix := octets[0] + "." + octets[1] + "." // "127.B."
	if !strings.HasPrefix(ip, prefix) {
		return 0
	}
	var p, i int
	if _, err := fmt.Sscanf(ip[len(prefix):], "%d.%d", &p, &i); err != nil || i < 1 || i > foreignIdx {
		return 0
	}
	return i
}

// listenPaths lists the addresses node ip listens on besides its own.
func (h *harness) listenPaths(ip string) []string {
	i := h.nodeIndex(ip)
	out := []string{h.pathIP(pathPGDNS, i)}
	if i == foreignIdx {
		return out
	}
	for j := 1; j <= 3; j++ {
		if j != i {
			out = append(out, h.pathIP(pathRepl+j, i))
		}
	}
	return out
}

// upstreamPath is the address the replica at ip streams from upstream by.
func (h *harness) upstreamPath(ip, upstream string) string {
	return h.pathIP(pathRepl+h.nodeIndex(ip), h.nodeIndex(upstream))
}

// InNetns reports whether this process runs in the soak's own network
// namespace (see Reexec).
func InNetns() bool { return os.Getenv(netnsEnv) != "" }

const netnsEnv = "PGDNS_SOAK_NETNS"

// Reexec runs this program again, with args, in a network namespace of its
// own (root only): the soak's servers, pgdns and packet filter rules live
// and die there, so nothing leaks to the machine and a killed run leaves
// nothing to clean up. It returns the child's exit code.
func Reexec(args []string, out io.Writer) (int, error) {
	cmd := exec.Command("/proc/self/exe", args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, out, out
	cmd.Env = append(os.Environ(), netnsEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return 2, fmt.Errorf("re-running in a network namespace of its own: %w", err)
	}
	netns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid))
	defer killNetns(netns)
	// Ctrl-C and SIGTERM end the child's run (it reports and cleans up),
	// and so this one.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		for sig := range sigs {
			_ = cmd.Process.Signal(sig)
		}
	}()
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), nil
	}
	if err != nil {
		return 2, err
	}
	return 0, nil
}

// killNetns ends every process left in the network namespace netns
// ("net:[inode]") once the soak that made it is gone: servers of a run that
// died before its cleanup (pg_ctl daemonizes them) would live on there,
// unreachable.
func killNetns(netns string) {
	if netns == "" {
		return
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if ns, err := os.Readlink(filepath.Join("/proc", e.Name(), "ns", "net")); err == nil && ns == netns {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// SetupNetns brings the namespace's loopback up (a new namespace starts
// with it down) and checks that nft can filter in it.
func SetupNetns() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("reading lo's flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bringing lo up: %w", err)
	}
	return nft("add table inet soak")
}

// nft runs one nft script.
func nft(script string) error {
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script + "\n")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("nft: %w: %s (script: %s)", err, strings.TrimSpace(out.String()), script)
	}
	return nil
}

// Directions of a drop on one path, as seen from the side that connects
// (pgdns, a WAL receiver).
const (
	dropBoth = "both"
	dropTo   = "to"   // what the connecting side sends is lost (queries, feedback)
	dropFrom = "from" // what the server sends back is lost (results, WAL)
)

// partitions holds the packet filter's drops, one chain per fault so
// that each heals on its own.
type partitions struct {
	mu sync.Mutex
}

// cut drops packets to and/or from address ip (one path to one node)
// under chain name.
func (p *partitions) cut(name, ip, dir string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var rules []string
	if dir == dropBoth || dir == dropTo {
		rules = append(rules, fmt.Sprintf("add rule inet soak %s ip daddr %s drop", name, ip))
	}
	if dir == dropBoth || dir == dropFrom {
		rules = append(rules, fmt.Sprintf("add rule inet soak %s ip saddr %s drop", name, ip))
	}
	return nft(fmt.Sprintf("add chain inet soak %s { type filter hook output priority 0; policy accept; }\n%s", name, strings.Join(rules, "\n")))
}

// heal removes chain name's drops.
func (p *partitions) heal(name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return nft(fmt.Sprintf("flush chain inet soak %s\ndelete chain inet soak %s", name, name))
}
