package main

import (
	"fmt"
	"strings"
	"time"
)

// haHeading starts the section of BENCHMARKS.md that -only ha writes.
const haHeading = "## Two instances: one frozen or killed"

// secs writes a duration as seconds with two decimals.
func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// markdown is the ha section, with its own date: make bench BENCH_ONLY=ha
// rewrites it alone.
func (h *haResult) markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("%s\n\n", haHeading)
	w("%s\n\n", h.stamp)
	w("Two `bin/pgdns` with the same config (default probe settings, `dns.nameservers: [ns1=…, ns2=…]`) on a primary and a streaming replica; the first instance is frozen (`SIGSTOP`: its socket stays open and nothing answers, no ICMP — the worse case) or killed (`SIGKILL`: queries are refused at once).\n\n")

	w("**The two instances during a switchover** (`pg_ctl stop -m fast`, `pg_ctl promote`; %d times, a poller on each instance every millisecond). Each instance probes on its own clock, so they see the new primary at different moments; the target is one probe round (`probe.interval`, %v):\n\n", len(h.gap), h.interval)
	w("| | p50 | max | target |\n|---|---:|---:|---|\n")
	w("| between the two instances' first answers of the new primary | %s | %s | ≤ %v: %s |\n", ms(pct(h.gap, 0.5)), ms(pct(h.gap, 1)), h.interval, verdict(pct(h.gap, 1) <= h.interval))
	w("| the later of the two, from `pg_ctl promote` returning (negative: before it returned) | %s | %s | |\n\n", ms(pct(h.later, 0.5)), ms(pct(h.later, 1)))

	w("**libpq through glibc**: `/etc/resolv.conf` bind-mounted in a mount namespace of its own, with `nameserver` lines for both instances. Each cell: the lookup alone — `getent ahosts primary.db.local`, the `getaddrinfo` call libpq makes — median / max of %d, then the median of the whole `psql host=primary.db.local -c 'SELECT 1'` (`connect_timeout` unset) with what it adds to the same resolv.conf with both instances up. The variants take turns, so the machine's noise falls on all alike:\n\n", haPsqlReps)
	w("| resolv.conf options | %s | %s | %s |\n|---|---:|---:|---:|\n", haUp, haFrozen, haKilled)
	for _, conf := range haResolvConfs {
		var base time.Duration
		cells := []string{}
		for _, state := range []string{haUp, haFrozen, haKilled} {
			r := h.glibcRun(conf, state)
			if r == nil || len(r.lookup) == 0 || len(r.psql) == 0 {
				cells = append(cells, "–")
				continue
			}
			cell := ms(median(r.lookup)) + " / " + ms(pct(r.lookup, 1)) + "; psql " + secs(median(r.psql))
			if state == haUp {
				base = median(r.psql)
			} else {
				cell += fmt.Sprintf(" (+%s)", secs(max(0, median(r.psql)-base)))
			}
			if r.failed > 0 {
				cell += fmt.Sprintf(", %d failed", r.failed)
			}
			cells = append(cells, cell)
		}
		label := "(none: timeout 5 s, attempts 2)"
		if conf != "" {
			label = "`" + conf + "`"
		}
		w("| %s | %s |\n", label, strings.Join(cells, " | "))
	}
	w("\nglibc asks the servers in order, and remembers nothing between lookups: with the first instance frozen every lookup waits the full `timeout` before it asks the second, so `timeout:1` bounds the cost at about a second; `rotate` starts each lookup at the next server, so about half the lookups pay it. A killed instance's port is refused at once (ICMP port unreachable), which sends glibc to the next server without waiting. The states are measured one after the other, so the psql column also moves with the machine's load between them; the lookup column is the resolver's own cost.\n\n")

	w("**CoreDNS forwarding to both instances** (`forward . ns1 ns2`, CoreDNS v1.11.3, a fresh CoreDNS per row): a lookup of `primary.db.local` every 20 ms for %v after the fault, each with a 5 s client timeout (glibc's default). A lookup that goes to a frozen instance waits CoreDNS's fixed 2 s read timeout before it is sent to the other; only health checks take the frozen instance out of rotation. They run only with `max_fails` above 0, start only once a query to the instance has failed, and each waits 1 s for an answer; `max_fails 1` takes two failures in a row:\n\n", haLoad)
	w("| forward settings | first instance | lookups | failed | over 1 s | p50 | p99 | max | last slow lookup, from the fault |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range h.coredns {
		slow := 0
		for _, d := range r.took {
			if d > time.Second {
				slow++
			}
		}
		last := "–"
		if slow > 0 {
			last = secs(r.lastSlow)
		}
		if len(r.took) == 0 {
			w("| %s | %s | %d | %d | – | – | – | – | – |\n", r.settings, r.state, r.failed, r.failed)
			continue
		}
		w("| %s | %s | %d | %d | %d | %s | %s | %s | %s |\n", r.settings, r.state, len(r.took)+r.failed, r.failed, slow,
			ms(pct(r.took, 0.5)), ms(pct(r.took, 0.99)), ms(pct(r.took, 1)), last)
	}
	w("\n")
	return b.String()
}

func (h *haResult) glibcRun(conf, state string) *glibcRun {
	for i := range h.glibc {
		if h.glibc[i].conf == conf && h.glibc[i].state == state {
			return &h.glibc[i]
		}
	}
	return nil
}
