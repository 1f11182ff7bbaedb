package main

import (
	"strings"
	"testing"
	"time"
)

// With -failover-before the section sets the two builds' figures side by
// side, case by case, each p99 against the target.
func TestFailoverComparison(t *testing.T) {
	msd := func(v ...int) (out []stopRep) {
		for _, m := range v {
			out = append(out, stopRep{lastAnswered: time.Duration(m) * time.Millisecond})
		}
		return out
	}
	sw := func(v ...int) (out []switchRep) {
		for _, m := range v {
			out = append(out, switchRep{firstAnswered: time.Duration(m) * time.Millisecond})
		}
		return out
	}
	old := &failoverResult{label: "pgdns built from c1fc5c0", crash: msd(-2, 5, 60), fast: msd(-1, 1, 2), switchover: sw(10, 20, 30),
		wrong: []string{"x"}, load: "1.50", done: "1.70"}
	cur := &failoverResult{label: "pgdns at abc1234", crash: msd(-3, 4, 40), fast: msd(0, 1, 3), switchover: sw(5, 6, 7),
		load: "1.80", done: "1.90", before: old}
	got := cur.comparison()
	for _, want := range []string{
		"**pgdns built from c1fc5c0, the same run**: the cases above, 3 rounds of each, run first with pgdns built from c1fc5c0 on the same cluster (load average 1.50 at its start, 1.70 at its end), then with pgdns at abc1234 (1.80, 1.90)",
		"| case, from | pgdns built from c1fc5c0 p50 | p99 | max | pgdns at abc1234 p50 | p99 | max | p99 ≤ 50 ms |",
		"| crash: the stopped primary's last answer, from the postmaster's exit | 5.00 ms | 60.00 ms | 60.00 ms | 4.00 ms | 40.00 ms | 40.00 ms | **missed**, met |",
		"| clean stop: the same | 1.00 ms | 2.00 ms | 2.00 ms | 1.00 ms | 3.00 ms | 3.00 ms | met, met |",
		"| switchover: the new primary's first answer, from `pg_ctl promote` returning | 20.00 ms | 30.00 ms | 30.00 ms | 6.00 ms | 7.00 ms | 7.00 ms | met, met |",
		"| wrong answers (SERVFAIL, two primaries, another host) | 1 | | | 0 | | | |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in\n%s", want, got)
		}
	}
	if md := cur.markdown(""); !strings.Contains(md, got) {
		t.Errorf("the section does not hold the comparison:\n%s", md)
	}
	cur.before = nil
	if md := cur.markdown(""); strings.Contains(md, "c1fc5c0") {
		t.Errorf("a run without -failover-before names one:\n%s", md)
	}
}
