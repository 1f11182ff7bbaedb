package metrics

import (
	"bytes"
	"math"
	"os"
	"strconv"
	"strings"
)

// The process's families (process_*), as client_golang's process
// collector wrote them on Linux, from /proc/self at each scrape. A file
// that cannot be read leaves its families out (client_golang failed the
// whole scrape instead).

// userHZ is the unit of /proc/PID/stat's times (USER_HZ): 100 on every
// Linux that Go runs on, as client_golang (procfs) takes it.
const userHZ = 100

func writeProcess(p *pageWriter) {
	stat, statOK := readStat()
	if statOK {
		p.family("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.")
		p.sample("process_cpu_seconds_total", float64(stat.utime+stat.stime)/userHZ)
	}
	maxFDs, maxVsize, limitsOK := readLimits()
	if limitsOK {
		p.family("process_max_fds", "gauge", "Maximum number of open file descriptors.")
		p.sample("process_max_fds", maxFDs)
	}
	if in, out, ok := readNetstat(); ok {
		p.family("process_network_receive_bytes_total", "counter", "Number of bytes received by the process over the network.")
		p.sample("process_network_receive_bytes_total", in)
		p.family("process_network_transmit_bytes_total", "counter", "Number of bytes sent by the process over the network.")
		p.sample("process_network_transmit_bytes_total", out)
	}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		p.family("process_open_fds", "gauge", "Number of open file descriptors.")
		p.sample("process_open_fds", float64(len(fds)))
	}
	if statOK {
		p.family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.")
		p.sample("process_resident_memory_bytes", float64(stat.rss*uint64(os.Getpagesize())))
		if boot, ok := bootTime(); ok {
			p.family("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.")
			p.sample("process_start_time_seconds", boot+float64(stat.start)/userHZ)
		}
		p.family("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.")
		p.sample("process_virtual_memory_bytes", float64(stat.vsize))
	}
	if limitsOK {
		p.family("process_virtual_memory_max_bytes", "gauge", "Maximum amount of virtual memory available in bytes.")
		p.sample("process_virtual_memory_max_bytes", maxVsize)
	}
}

// procStat is what the page reads of /proc/self/stat.
type procStat struct{ utime, stime, start, vsize, rss uint64 }

func readStat() (procStat, bool) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return procStat{}, false
	}
	// The command name, in parentheses, may hold spaces: the fields
	// counted here start after its closing parenthesis, at the state
	// (field 3 of proc(5)).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 22 {
		return procStat{}, false
	}
	field := func(n int) uint64 { // n as proc(5) numbers them
		v, _ := strconv.ParseUint(f[n-3], 10, 64)
		return v
	}
	return procStat{utime: field(14), stime: field(15), start: field(22), vsize: field(23), rss: field(24)}, true
}

// readLimits reads the soft limits of open files and of the address
// space; unlimited is the largest uint64, as procfs gives it.
func readLimits() (fds, vsize float64, ok bool) {
	b, err := os.ReadFile("/proc/self/limits")
	if err != nil {
		return 0, 0, false
	}
	soft := func(line string) float64 {
		f := strings.Fields(line) // name, soft, hard, unit
		if len(f) < 4 {
			return math.NaN()
		}
		if f[len(f)-3] == "unlimited" {
			return math.MaxUint64
		}
		v, _ := strconv.ParseUint(f[len(f)-3], 10, 64)
		return float64(v)
	}
	var found int
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "Max open files "):
			fds, found = soft(line), found+1
		case strings.HasPrefix(line, "Max address space "):
			vsize, found = soft(line), found+1
		}
	}
	return fds, vsize, found == 2
}

// readNetstat reads IpExt's InOctets and OutOctets of
// /proc/self/net/netstat: the bytes of the process's network namespace.
func readNetstat() (in, out float64, ok bool) {
	b, err := os.ReadFile("/proc/self/net/netstat")
	if err != nil {
		return 0, 0, false
	}
	var names []string
	for _, line := range strings.Split(string(b), "\n") {
		rest, isIP := strings.CutPrefix(line, "IpExt: ")
		if !isIP {
			continue
		}
		if names == nil {
			names = strings.Fields(rest)
			continue
		}
		var foundIn, foundOut bool
		for i, v := range strings.Fields(rest) {
			if i >= len(names) {
				break
			}
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				continue
			}
			switch names[i] {
			case "InOctets":
				in, foundIn = x, true
			case "OutOctets":
				out, foundOut = x, true
			}
		}
		return in, out, foundIn && foundOut
	}
	return 0, 0, false
}

// bootTime is /proc/stat's btime: when the system booted, in Unix seconds.
func bootTime() (float64, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			t, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return float64(t), err == nil
		}
	}
	return 0, false
}
