package soak

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// durability is the final check of the clients' writes.
type durability struct {
	final        string
	acked        int
	present      int
	lostWithKill int
	missing      []ack
}

// Report is the outcome of a run.
type Report struct {
	Seed       uint64
	Elapsed    time.Duration // faults and checks, without setup
	Violations []Violation   // a run fails on any
	Notes      []string      // harness problems (faults that could not be played fully)
	text       string
}

func (r *Report) String() string { return r.text }

// classFigures sums one class over the run or a fault's window.
type classFigures struct {
	checked, hosts, empty, unavail, violations int
}

// report builds the report: per class, per fault, the writes.
func (h *harness) report(faults []*faultRecord, d durability, end time.Time) *Report {
	l := h.checks
	l.mu.Lock()
	defer l.mu.Unlock()
	r := &Report{Seed: h.opts.Seed, Elapsed: end.Sub(h.start)}
	sort.SliceStable(l.events, func(i, j int) bool { return l.events[i].at.Before(l.events[j].at) })
	for _, a := range d.missing {
		l.violations = append(l.violations, Violation{Class: ClassPrimary, Name: "primary.db.local.", At: a.at.Sub(h.start),
			Rule: "every acknowledged write is on the final primary",
			Evidence: fmt.Sprintf("row %d committed on %s (timeline %d, position after %s) at %.3fs is not on the final primary %s",
				a.id, a.node, a.tl, a.lsn, a.at.Sub(h.start).Seconds(), d.final)})
	}
	r.Violations = append(r.Violations, l.violations...)
	h.notesMu.Lock()
	r.Notes = append(r.Notes, h.notes...)
	h.notesMu.Unlock()

	var b strings.Builder
	fmt.Fprintf(&b, "soak seed %d: %s checked (setup excluded), %d faults, %d clients; pgdns probe interval %s, timeout %s, max_fails %d → stale bound %s, grace %s\n",
		h.opts.Seed, r.Elapsed.Round(100*time.Millisecond), len(faults), h.opts.Workers, probeInterval, probeTimeout, probeMaxFails, Stale, Grace)
	viol := map[string]int{}
	for _, v := range r.Violations {
		viol[v.Class]++
	}
	fmt.Fprintf(&b, "\n%-20s %8s %8s %8s %12s %10s\n", "name class", "checked", "hosts", "empty", "unavailable", "violations")
	for _, c := range Classes {
		fmt.Fprintf(&b, "%-20s %8d %8d %8d %12d %10d\n", c, l.checked[c], l.hosts[c], l.empty[c], l.unavail[c], viol[c])
	}
	fmt.Fprintf(&b, "\nwrites: %d acknowledged through primary.db.local; on the final primary %s: %d present, %d missing, %d lost with a killed primary before they replicated (async replication; excused)\n",
		d.acked, d.final, d.present, len(d.missing), d.lostWithKill)
	fmt.Fprintf(&b, "lsn- tokens without a timeline for such lost writes, answered by a replica without the row (documented; not violations): %d\n", l.lostNoTL)

	fmt.Fprintf(&b, "\nper fault: healed = cluster streaming again; then per class, the time after the fault's start until answers were available and right again (\"-\" never unavailable in the fault's window; \"never\" not again before the next fault), with the empty answers in the window\n")
	fmt.Fprintf(&b, "%-3s %-16s %-8s %-9s", "#", "kind", "at", "healed")
	for _, c := range Classes {
		fmt.Fprintf(&b, " %-18s", c)
	}
	b.WriteString("\n")
	for i, f := range faults {
		until := end
		if i+1 < len(faults) {
			until = faults[i+1].start
		}
		fmt.Fprintf(&b, "%-3d %-16s %-8s %-9s", f.N, f.Kind, fmt.Sprintf("%.1fs", f.start.Sub(h.start).Seconds()), since(f.start, f.healed))
		for _, c := range Classes {
			back, empties := l.recovery(c, f.start, until)
			fmt.Fprintf(&b, " %-18s", fmt.Sprintf("%s (%d empty)", back, empties))
		}
		b.WriteString("\n")
		if f.err != nil {
			fmt.Fprintf(&b, "    error: %v\n", f.err)
		}
		fmt.Fprintf(&b, "    %s\n", f.detail)
	}
	if len(r.Notes) > 0 {
		b.WriteString("\nharness notes:\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "  %s\n", n)
		}
	}
	fmt.Fprintf(&b, "\nviolations: %d\n", len(r.Violations))
	// Grouped by class and rule: the count, the first and last time, and
	// the full evidence of the first three.
	type group struct {
		n           int
		first, last time.Duration
		shown       []Violation
	}
	groups, order := map[string]*group{}, []string{}
	for _, v := range r.Violations {
		k := v.Class + " — " + v.Rule
		g := groups[k]
		if g == nil {
			g = &group{first: v.At, last: v.At}
			groups[k] = g
			order = append(order, k)
		}
		g.n++
		g.first, g.last = min(g.first, v.At), max(g.last, v.At)
		if len(g.shown) < 3 {
			g.shown = append(g.shown, v)
		}
	}
	for _, k := range order {
		g := groups[k]
		fmt.Fprintf(&b, "  %s: %d, from %.3fs to %.3fs\n", k, g.n, g.first.Seconds(), g.last.Seconds())
		for _, v := range g.shown {
			fmt.Fprintf(&b, "    %.3fs %s: %s\n", v.At.Seconds(), v.Name, v.Evidence)
		}
	}
	r.text = b.String()
	return r
}

// recovery is, for one class in [from, until), how long after from the
// answers were available and right again: the first good answer after the
// last empty, unavailable or wrong one. It returns "-" when there was none
// of those, and the number of empty answers.
func (l *ledger) recovery(class string, from, until time.Time) (string, int) {
	var lastBad, firstGoodAfter time.Time
	empties := 0
	for _, e := range l.events {
		if e.class != class || e.at.Before(from) || !e.at.Before(until) {
			continue
		}
		switch e.out {
		case ok:
			if !lastBad.IsZero() && firstGoodAfter.IsZero() {
				firstGoodAfter = e.at
			}
		default:
			if e.out == empty {
				empties++
			}
			lastBad, firstGoodAfter = e.at, time.Time{}
		}
	}
	switch {
	case lastBad.IsZero():
		return "-", empties
	case firstGoodAfter.IsZero():
		return "never", empties
	}
	return firstGoodAfter.Sub(from).Round(time.Millisecond).String(), empties
}
