package main

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
	r := &Report{Seed: h.opts.Seed, Elapsed: end.Sub(h.ready)}
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
	fmt.Fprintf(&b, "soak seed %d: %s of checks after %s of setup, %d faults, %d clients; pgdns probe interval %s, timeout %s, max_fails %d → stale bound %s, grace %s\n",
		h.opts.Seed, r.Elapsed.Round(100*time.Millisecond), h.ready.Sub(h.start).Round(100*time.Millisecond), len(faults), h.opts.Workers, probeInterval, probeTimeout, probeMaxFails, Stale, Grace)
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
	fmt.Fprintf(&b, "filter checks not made because the host had been restarted or re-cloned since the question's grace began (its replay position may go back): %d\n", l.restarted)
	fmt.Fprintf(&b, "lsn- tokens without a timeline for such lost writes, answered by a replica without the row (documented; not violations): %d\n", l.lostNoTL)
	fmt.Fprintf(&b, "answered hosts that refused the client's session (57P03: shutting down or starting up; unavailability): %d, the latest %s after a smart shutdown of the host began\n",
		l.refused, l.refusedLongest.Round(time.Millisecond))
	combos := map[string]int{}
	for _, f := range faults {
		if len(f.with) > 0 {
			k := append(append([]string(nil), f.with...), f.Kind)
			sort.Strings(k)
			combos[strings.Join(k, " + ")]++
		}
	}
	fmt.Fprintf(&b, "\nfaults that ran at once (up to %d; the later one started while the others ran): %d combinations\n", h.opts.MaxFaults, len(combos))
	keys := make([]string, 0, len(combos))
	for k := range combos {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "  %-60s %d\n", k, combos[k])
	}

	fmt.Fprintf(&b, "\nper fault: healed = cluster streaming again; then per class, the time after the fault's start until answers were available and right again (\"-\" never unavailable in the fault's window; \"never\" not again before the next fault), with the empty answers in the window\n")
	fmt.Fprintf(&b, "%-3s %-19s %-8s %-9s", "#", "kind", "at", "healed")
	for _, c := range Classes {
		fmt.Fprintf(&b, " %-18s", c)
	}
	b.WriteString("\n")
	for i, f := range faults {
		until := end
		if i+1 < len(faults) {
			until = faults[i+1].start
		}
		fmt.Fprintf(&b, "%-3d %-19s %-8s %-9s", f.N, f.Kind, fmt.Sprintf("%.1fs", f.start.Sub(h.start).Seconds()), since(f.start, f.healed))
		for _, c := range Classes {
			d, state, empties := l.recovery(c, f.start, until)
			fmt.Fprintf(&b, " %-18s", fmt.Sprintf("%s (%d empty)", recoveryText(d, state), empties))
		}
		b.WriteString("\n")
		if f.err != nil {
			fmt.Fprintf(&b, "    error: %v\n", f.err)
		}
		if len(f.with) > 0 {
			fmt.Fprintf(&b, "    started while %s ran\n", strings.Join(f.with, " and "))
		}
		fmt.Fprintf(&b, "    %s\n", f.detail)
	}
	h.kindSummary(&b, faults, end)
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

// Recovery states of one class in one fault's window.
const (
	neverDown = iota // no empty, unavailable or wrong answer
	backAgain        // right again after the returned time
	notBack          // not right again before the window ended
)

// recovery is, for one class in [from, until), how long after from the
// answers were available and right again: the first good answer after the
// last empty, unavailable or wrong one. It also returns the number of
// empty answers.
func (l *ledger) recovery(class string, from, until time.Time) (time.Duration, int, int) {
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
		return 0, neverDown, empties
	case firstGoodAfter.IsZero():
		return 0, notBack, empties
	}
	return firstGoodAfter.Sub(from), backAgain, empties
}

func recoveryText(d time.Duration, state int) string {
	switch state {
	case neverDown:
		return "-"
	case notBack:
		return "never"
	}
	return d.Round(time.Millisecond).String()
}

// kindSummary renders, per fault kind, how often it was played, how long
// the cluster took to heal, and per class the median and worst time until
// answers were right again (over the faults that interrupted that class).
func (h *harness) kindSummary(b *strings.Builder, faults []*faultRecord, end time.Time) {
	fmt.Fprintf(b, "\nper fault kind: n, healed median/max; per class: median/max time until available and right again over the faults that interrupted it, and how many did\n")
	fmt.Fprintf(b, "%-19s %3s %-17s", "kind", "n", "healed")
	for _, c := range Classes {
		fmt.Fprintf(b, " %-22s", c)
	}
	b.WriteString("\n")
	for _, kind := range Kinds {
		var healed []time.Duration
		backs := map[string][]time.Duration{}
		nots := map[string]int{}
		n := 0
		for i, f := range faults {
			if f.Kind != kind {
				continue
			}
			n++
			if !f.healed.IsZero() {
				healed = append(healed, f.healed.Sub(f.start))
			}
			until := end
			if i+1 < len(faults) {
				until = faults[i+1].start
			}
			for _, c := range Classes {
				d, state, _ := h.checks.recovery(c, f.start, until)
				switch state {
				case backAgain:
					backs[c] = append(backs[c], d)
				case notBack:
					nots[c]++
				}
			}
		}
		if n == 0 {
			continue
		}
		fmt.Fprintf(b, "%-19s %3d %-17s", kind, n, medMax(healed))
		for _, c := range Classes {
			cell := medMax(backs[c]) + fmt.Sprintf(" (%d)", len(backs[c])+nots[c])
			if nots[c] > 0 {
				cell += fmt.Sprintf(" %d never", nots[c])
			}
			fmt.Fprintf(b, " %-22s", cell)
		}
		b.WriteString("\n")
	}
}

// medMax renders the median and the maximum of ds, "-" when empty.
func medMax(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	sorted := append([]time.Duration(nil), ds...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	r := func(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }
	return r(sorted[len(sorted)/2]) + "/" + r(sorted[len(sorted)-1])
}
