package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// sessionsOf lists node n's client sessions (backends, not WAL senders or
// background processes) and who holds each, told by the address the
// session came in by (see net.go): "pgdns" for its probe path, "harness"
// for the node's main address. An empty list is "none".
func sessionsOf(n *pgtest.Node, h *harness) string {
	local := socketAddrs()
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		title := strings.TrimRight(strings.ReplaceAll(string(b), "\x00", " "), " ")
		rest, ok := strings.CutPrefix(title, "postgres: "+n.Name+": ")
		if !ok || !strings.Contains(rest, "(") || strings.HasPrefix(rest, "walsender") {
			continue // not a client backend
		}
		who := "unknown path"
		fds, _ := os.ReadDir(filepath.Join("/proc", e.Name(), "fd"))
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join("/proc", e.Name(), "fd", fd.Name()))
			if ip, ok := local[link]; ok && err == nil {
				who = pathName(h, ip) + " on " + ip
				break
			}
		}
		out = append(out, fmt.Sprintf("%s [%s]", who, rest))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}

// pathName names the path an address of a node is on.
func pathName(h *harness, ip string) string {
	parts := strings.Split(ip, ".")
	if len(parts) != 4 || h.nodeIndex(ip) == 0 {
		return "outside"
	}
	switch p, _ := strconv.Atoi(parts[2]); {
	case p == pathMain:
		return "harness"
	case p == pathPGDNS || p == pathProxy:
		return "pgdns"
	case p >= pathRepl:
		return "replication"
	}
	return "unknown path"
}

// socketAddrs maps "socket:[inode]" to the local IPv4 address of every TCP
// socket in this network namespace (/proc/net/tcp).
func socketAddrs() map[string]string {
	out := map[string]string{}
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan()
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 {
			continue
		}
		hexAddr, _, _ := strings.Cut(fields[1], ":")
		v, err := strconv.ParseUint(hexAddr, 16, 32)
		if err != nil {
			continue
		}
		ip := fmt.Sprintf("%d.%d.%d.%d", v&0xff, v>>8&0xff, v>>16&0xff, v>>24&0xff)
		out["socket:["+fields[9]+"]"] = ip
	}
	return out
}
