package main

import (
	"fmt"
	"strings"
	"time"
)

// failoverHeading starts the failover section of BENCHMARKS.md.
const failoverHeading = "## Failover visibility"

// row is one line of a p50/p99/max table.
func row(what string, ds []time.Duration, target string) string {
	return fmt.Sprintf("| %s | %s | %s | %s | %s |\n", what, ms(pct(ds, 0.5)), ms(pct(ds, 0.99)), ms(pct(ds, 1)), target)
}

func stopFigures(reps []stopRep) (last, returned, started, logged []time.Duration) {
	for _, r := range reps {
		last, returned, started = append(last, r.lastAnswered), append(returned, r.lastAnswered-r.stopReturned), append(started, r.lastAnswered-r.stopStarted)
		if r.loggedOK {
			logged = append(logged, r.logged)
		}
	}
	return
}

func within50(ds []time.Duration) string {
	p := pct(ds, 0.99)
	return "p99 ≤ 50 ms: " + verdict(p <= 50*time.Millisecond)
}

// markdown is the failover section, with its own date: make bench -only
// failover rewrites it alone.
func (f *failoverResult) markdown(plot string) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("%s\n\n", failoverHeading)
	w("%s\n\n", f.stamp)
	w("pgdns (`bin/pgdns`) runs at the **default probe settings** — `probe.interval` 250 ms, `max_fails` 3, `timeout` 1 s, `flux_interval` 10 ms, `flux_duration` 3 s — on a primary and a streaming replica (PostgreSQL, on loopback addresses from `pgtest.Reserve`). A poller asks `primary.db.local` over UDP, one query at a time, a millisecond after each answer (median gap between answers %s). %d rounds, each of: a crash, a clean stop, a switchover; after each the cluster is made whole again (the stopped primary is restarted; after a switchover the old primary is re-cloned from the new one (`pg_basebackup`) and follows it) and pgdns is let settle before the next. With %d repetitions the p99 (nearest rank) is the largest value, like max.\n\n",
		ms(f.pollGap), len(f.crash), len(f.crash))

	cl, cr, cs, clog := stopFigures(f.crash)
	w("**Crash** (`pg_ctl stop -m immediate` of the primary, no promotion). The postmaster's exit is taken from `/proc`, polled every 250 µs; `pg_ctl stop` itself notices it up to 100 ms later. Time until the stopped primary's last answer as `primary.db.local` (negative: it had left the answers before its postmaster exited — its backends report the shutdown to pgdns's watched connection first):\n\n")
	w("| from | p50 | p99 | max | target |\n|---|---:|---:|---:|---|\n")
	w("%s", row("the postmaster's exit", cl, within50(cl)))
	w("%s", row("`pg_ctl stop` returning", cr, ""))
	w("%s", row("`pg_ctl stop` starting", cs, ""))
	if len(clog) > 0 {
		w("%s", row("(pgdns logged the host down, from the postmaster's exit; ms resolution)", clog, ""))
	}
	fl, fr, fs, flog := stopFigures(f.fast)
	w("\n**Clean stop** (`pg_ctl stop -m fast`, no promotion), the same measures:\n\n")
	w("| from | p50 | p99 | max | target |\n|---|---:|---:|---:|---|\n")
	w("%s", row("the postmaster's exit", fl, within50(fl)))
	w("%s", row("`pg_ctl stop` returning", fr, ""))
	w("%s", row("`pg_ctl stop` starting", fs, ""))
	if len(flog) > 0 {
		w("%s", row("(pgdns logged the host down, from the postmaster's exit; ms resolution)", flog, ""))
	}

	var first, fromWritable, started, logged, oldLeft []time.Duration
	for _, s := range f.switchover {
		first, fromWritable, started, oldLeft = append(first, s.firstAnswered), append(fromWritable, s.firstAnswered-s.writable), append(started, s.firstAnswered-s.promoteStarted), append(oldLeft, s.oldLeft)
		if s.loggedOK {
			logged = append(logged, s.logged)
		}
	}
	w("\n**Switchover** (`pg_ctl stop -m fast` of the primary, then `pg_ctl promote` of the replica). Time until `primary.db.local` first answers the new primary (negative: before `pg_ctl promote` returned — it polls the server every 100 ms; \"writable\" is when a connection asking `pg_is_in_recovery()` every millisecond first got false):\n\n")
	w("| from | p50 | p99 | max | target |\n|---|---:|---:|---:|---|\n")
	w("%s", row("`pg_ctl promote` returning", first, within50(first)))
	w("%s", row("the server becoming writable", fromWritable, ""))
	w("%s", row("`pg_ctl promote` starting", started, ""))
	if len(logged) > 0 {
		w("%s", row("(pgdns logged the new primary, from `pg_ctl promote` returning; ms resolution)", logged, ""))
	}
	w("%s", row("(the old primary's last answer, from `pg_ctl promote` returning)", oldLeft, ""))

	if len(f.wrong) == 0 {
		w("\nNo answer in any repetition was a SERVFAIL, named two primaries, or named a host that was not the primary then (or, during a switchover, the old or the new one): between the old primary leaving and the new one arriving `primary.db.local` answers no address, never a wrong one.")
	} else {
		w("\n**%d wrong answers** (SERVFAIL, two primaries, or a host that was not primary), first: %s.", len(f.wrong), strings.Join(f.wrong[:min(3, len(f.wrong))], "; "))
	}
	if f.fluxProbes == f.fluxProbes { // not NaN
		w(" The flux re-probing cost %.0f extra probes in all (`pgdns_flux_probes_total`), about %.0f per fault.", f.fluxProbes, f.fluxProbes/float64(max(1, f.episodes)))
	}
	w("\n\n")
	if f.before != nil {
		b.WriteString(f.comparison())
	}
	if plot != "" {
		w("![what primary.db.local answered: the median crash and the median switchover](%s)\n\n", plot)
	}
	if p := f.patroni; p != nil {
		w("### Patroni\n\n")
		if p.skipped != "" || len(p.reps) == 0 {
			w("Not measured in this run: %s.\n\n", p.skipped)
		} else {
			var ret, api, dnsT, diff, wr, fromWr, logd []time.Duration
			for _, r := range p.reps {
				ret, api, dnsT, diff = append(ret, r.returned), append(api, r.api), append(dnsT, r.dns), append(diff, r.dns-r.api)
				wr, fromWr = append(wr, r.writable), append(fromWr, r.dns-r.writable)
				if r.loggedOK {
					logd = append(logd, r.logged)
				}
			}
			w("The same run, then etcd and three Patroni nodes (Debian's `patroni`, `ttl: 10`, `loop_wait: 1`), pgdns reading the members from Patroni's REST API at the default probe settings, and %d `patronictl switchover --force` to a replica. Time from `patronictl switchover` starting until:\n\n", len(p.reps))
			w("| event | p50 | p99 | max |\n|---|---:|---:|---:|\n")
			for _, x := range []struct {
				what string
				ds   []time.Duration
			}{
				{"Patroni's own `/primary` on the new leader answers 200 (polled every 2 ms)", api},
				{"the new leader is writable (`pg_is_in_recovery()` false, polled every 1 ms)", wr},
				{"`primary.db.local` answers the new leader", dnsT},
				{"`patronictl switchover` returns", ret},
				{"pgdns's answer, minus `/primary`'s", diff},
				{"pgdns's answer, minus the new leader becoming writable", fromWr},
			} {
				w("| %s | %s | %s | %s |\n", x.what, ms(pct(x.ds, 0.5)), ms(pct(x.ds, 0.99)), ms(pct(x.ds, 1)))
			}
			if len(logd) > 0 {
				w("| (pgdns logged the new leader primary; ms resolution) | %s | %s | %s |\n", ms(pct(logd, 0.5)), ms(pct(logd, 0.99)), ms(pct(logd, 1)))
			}
			if pct(api, 0.5) > 4*pct(diff, 0.5) {
				w("\nMost of the time is Patroni's (%s of the median %s until pgdns answered): it stops the old leader, waits for the candidate to catch up, promotes it and takes the leader key.", ms(pct(api, 0.5)), ms(pct(dnsT, 0.5)))
			}
			if len(p.wrong) == 0 {
				w(" No SERVFAIL, no second primary and no other host was ever answered.\n\n")
			} else {
				w(" **%d wrong answers**, first: %s.\n\n", len(p.wrong), strings.Join(p.wrong[:min(3, len(p.wrong))], "; "))
			}
		}
	}
	return b.String()
}

// comparison is the -failover-before run beside this one: each case's
// p50, p99 and max, the wrong answers, the load.
func (f *failoverResult) comparison() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	o := f.before
	w("**%s, the same run**: the cases above, %d rounds of each, run first with %s on the same cluster (load average %s at its start, %s at its end), then with %s (%s, %s), each pgdns started for its cases and stopped after them:\n\n",
		o.label, len(o.crash), o.label, o.load, o.done, f.label, f.load, f.done)
	w("| case, from | %s p50 | p99 | max | %s p50 | p99 | max | p99 ≤ 50 ms |\n|---|---:|---:|---:|---:|---:|---:|---|\n", o.label, f.label)
	ol, _, _, _ := stopFigures(o.crash)
	nl, _, _, _ := stopFigures(f.crash)
	of, _, _, _ := stopFigures(o.fast)
	nf, _, _, _ := stopFigures(f.fast)
	first := func(r *failoverResult) (ds []time.Duration) {
		for _, s := range r.switchover {
			ds = append(ds, s.firstAnswered)
		}
		return ds
	}
	for _, c := range []struct {
		what     string
		old, new []time.Duration
	}{
		{"crash: the stopped primary's last answer, from the postmaster's exit", ol, nl},
		{"clean stop: the same", of, nf},
		{"switchover: the new primary's first answer, from `pg_ctl promote` returning", first(o), first(f)},
	} {
		w("| %s | %s | %s | %s | %s | %s | %s | %s, %s |\n", c.what, ms(pct(c.old, 0.5)), ms(pct(c.old, 0.99)), ms(pct(c.old, 1)),
			ms(pct(c.new, 0.5)), ms(pct(c.new, 0.99)), ms(pct(c.new, 1)), verdict(pct(c.old, 0.99) <= 50*time.Millisecond), verdict(pct(c.new, 0.99) <= 50*time.Millisecond))
	}
	w("| wrong answers (SERVFAIL, two primaries, another host) | %d | | | %d | | | |\n\n", len(o.wrong), len(f.wrong))
	return b.String()
}
