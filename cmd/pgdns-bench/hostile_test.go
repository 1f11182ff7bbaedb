package main

import (
	"strings"
	"testing"
)

// The fresh sources stay outside every address block the tests and the
// bench listen in (127.100.0.0–127.250.255.255, and 127.1.x.y of the fake
// replicas), consecutive ones fall in different /24s, and none repeats
// within a run's worth of them.
func TestSpoofedSources(t *testing.T) {
	seen := map[string]bool{}
	for i := range 400_000 {
		ip := spoofed(i)
		if ip[0] != 127 || ip[1] < 2 || ip[1] > 63 || ip[3] == 0 {
			t.Fatalf("source %d is %v: outside 127.2.0.1–127.63.255.254", i, ip)
		}
		if next := spoofed(i + 1); next[1] == ip[1] && next[2] == ip[2] {
			t.Fatalf("sources %d and %d share a /24: %v, %v", i, i+1, ip, next)
		}
		if seen[ip.String()] {
			t.Fatalf("source %d (%v) repeats", i, ip)
		}
		seen[ip.String()] = true
	}
}

func TestHostileVerdict(t *testing.T) {
	rest := hostileRow{attack: "none (at rest)", udpQPS: 2000, tcpQPS: 50}
	row := func(attack string, udp, tcp float64) hostileRow {
		return hostileRow{attack: attack, udpQPS: udp, tcpQPS: tcp}
	}
	cases := []struct {
		rows []hostileRow
		want []string // substrings
	}{
		{[]hostileRow{rest, row("a", 1990, 50), row("b", 2000, 46)}, []string{": met."}},
		{[]hostileRow{rest, row("a", 1990, 0)}, []string{"**missed** under a."}},
		{[]hostileRow{rest, row(churnMaxName, 1100, 50), row(controlName, 1040, 50)}, []string{"met but under " + churnMaxName + ".", "(52% of rest)"}},
		{[]hostileRow{rest, row(churnMaxName, 600, 50), row(controlName, 1040, 50)}, []string{"**missed** under " + churnMaxName + "."}},
		{[]hostileRow{rest, row("churn, 25k/s", 1100, 50), row(controlName, 1040, 50)}, []string{"**missed** under churn, 25k/s."}},
		{[]hostileRow{rest, row(controlName, 1040, 50)}, []string{": met."}},
		{[]hostileRow{rest, row("hog", 2000, 0), row(controlName, 1040, 50)}, []string{"**missed** under hog."}},
	}
	for _, tc := range cases {
		got := hostileRun{rows: tc.rows}.verdict()
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%v: verdict %q lacks %q", tc.rows, got, w)
			}
		}
	}
}

// A repeated attack is one row: the clients' mean rate, each run's, the
// peaks over both.
func TestHostileRowsMerge(t *testing.T) {
	var run hostileRun
	run.add(hostileRow{attack: "none", udpQPS: 2000, tcpQPS: 50, rssKiB: 10})
	run.add(hostileRow{attack: "churn", udpQPS: 1000, tcpQPS: 50, rssKiB: 30, goroutines: 5, probesOK: 3, probeTries: 4})
	run.add(hostileRow{attack: "churn", udpQPS: 1400, tcpQPS: 40, rssKiB: 20, goroutines: 9, probesOK: 4, probeTries: 4})
	if len(run.rows) != 2 {
		t.Fatalf("%d rows, want 2", len(run.rows))
	}
	r := run.rows[1]
	if r.udpQPS != 1200 || r.tcpQPS != 45 || r.rssKiB != 30 || r.goroutines != 9 || r.probesOK != 7 || r.probeTries != 8 || each(r.udpEach) != " [1000, 1400]" {
		t.Errorf("merged row %+v", r)
	}
	if each(run.rows[0].udpEach) != "" {
		t.Errorf("a single run lists its runs: %q", each(run.rows[0].udpEach))
	}
}

func TestHostileWorstCase(t *testing.T) {
	run := hostileRun{rows: []hostileRow{
		{attack: "none (at rest)", rssKiB: 20 * 1024},
		{attack: "rate-limiter churn, 25k/s", rssKiB: 28 * 1024},
		{attack: "rate-limiter churn, 120k/s", rssKiB: 30 * 1024},
		{attack: controlName, rssKiB: 90 * 1024},
		{attack: "TCP slot hogging", rssKiB: 25 * 1024},
		{attack: "TCP slot hogging, 20 sources", rssKiB: 31 * 1024},
		{attack: "lsn- flood", rssKiB: 19 * 1024},
	}}
	want := "As if every attack ran at once: 20.0 MiB at rest + 10.0 rate-limiter churn + 11.0 TCP slot hogging + 0.0 lsn- flood = **41.0 MiB**"
	if got := run.worstCase(); !strings.HasPrefix(got, want) {
		t.Errorf("worstCase =\n%s\nwant\n%s", got, want)
	}
}
