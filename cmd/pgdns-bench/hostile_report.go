package main

import (
	"fmt"
	"strings"
)

// keptShare is pgdns's target under attack: a well-behaved client keeps
// at least this share of its rate at rest.
const keptShare = 0.90

func (h *hostileResult) markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("%s\n\n%s\n\n", hostileHeading, h.stamp)
	w("What a well-behaved client is served while an attacker on the same machine does each thing below, next to the same figure at rest, and what pgdns holds meanwhile. pgdns runs with `dns.rate_limit: %d`, `dns.lsn_wait: %s` and every other key at its default, on the real primary and two replicas. The well-behaved clients, each from an address of its own, for %v per attack after a %v ramp-up: UDP, `replica` A at a steady %d queries/s (answered = NOERROR with records, not TC); TCP, %d connections/s with one query each (a resolver retrying after TC); HTTP, `GET /readyz` on a new connection every %v (the kubelet's probe). Peak RSS from `/proc`, peak goroutines from `/metrics`.\n\n",
		hostileRate, hostileWait, hostileWin, attackRampUp, wellUDPRate, wellTCPRate, probeEvery)
	w("The attacks: **rate-limiter churn**, %d and (asked for) %d queries/s, each from a fresh source address (127.2.0.0–127.63.255.255, consecutive sources in different /24s, set per datagram with `IP_PKTINFO`: spoofed, as they never see the answers); the control beside it, **%s**, is the larger churn's volume from 4,096 sources used again and again, each in a /24 of its own and far under the limit: what the volume alone costs on these cores; **TCP slot hogging**, %d connections from one address, each asking a query every %v, then the same from %d addresses (fewer each than the per-source cap, together more than the cap of all); **HTTP idle flood**, %d connections each sending one request and then idling; **lsn- flood**, %d queries/s for `lsn-<LSN>.replica` from 4,096 sources in as many /24s, where the LSN is a fresh write's, replay is paused on both replicas so that none reaches it, and each probe backend of pgdns on the primary is stopped (SIGSTOP) as soon as it connects, so that refresh rounds hang until `probe.timeout` and each such lookup may wait up to its `lsn_wait` (until pgdns counts the primary down and its rounds skip it). \"attacker\" says what each achieved.\n\n",
		churnRate, churnMax, controlName, hogConns, hogEvery, hogSources, httpIdle, lsnRate)
	for _, run := range h.runs {
		w("**%s** (load average %s at the start, %s at the end)\n\n", run.label, run.load, run.done)
		w("| attack | UDP q/s [each run] (of rest) | TCP q/s (of rest) | /readyz answered | peak RSS | peak goroutines | attacker |\n|---|---:|---:|---:|---:|---:|---|\n")
		var rest hostileRow
		for i, r := range run.rows {
			if i == 0 {
				rest = r
			}
			g := "not scraped"
			if r.goroutines >= 0 {
				g = fmt.Sprintf("%.0f", r.goroutines)
			}
			w("| %s | %.0f%s (%s) | %.0f (%s) | %d of %d | %.1f MiB | %s | %s |\n", r.attack, r.udpQPS, each(r.udpEach), share(r.udpQPS, rest.udpQPS), r.tcpQPS, share(r.tcpQPS, rest.tcpQPS),
				r.probesOK, r.probeTries, float64(r.rssKiB)/1024, g, r.attacker)
		}
		w("\n%s\n\n", run.verdict())
		if len(run.rows) > 1 {
			w("%s\n\n", run.worstCase())
		}
	}
	return b.String()
}

// worstCase adds up the memory each kind of attack took beyond rest, at
// its peak, as if all ran at once: what deploy/kubernetes's memory limit
// is derived from (docs/production.md, Kubernetes).
func (run hostileRun) worstCase() string {
	rest := run.rows[0].rssKiB
	peak := map[string]int64{}
	var kinds []string
	for _, r := range run.rows[1:] {
		if r.attack == controlName {
			continue
		}
		kind, _, _ := strings.Cut(r.attack, ",")
		if _, ok := peak[kind]; !ok {
			kinds = append(kinds, kind)
		}
		peak[kind] = max(peak[kind], r.rssKiB-rest)
	}
	total := rest
	parts := []string{fmt.Sprintf("%.1f MiB at rest", float64(rest)/1024)}
	for _, k := range kinds {
		total += max(0, peak[k])
		parts = append(parts, fmt.Sprintf("%.1f %s", float64(max(0, peak[k]))/1024, k))
	}
	return fmt.Sprintf("As if every attack ran at once: %s = **%.1f MiB** (each kind at its largest peak beyond rest).", strings.Join(parts, " + "), float64(total)/1024)
}

// each lists the runs of a repeated attack, "" for one run.
func each(v []float64) string {
	if len(v) < 2 {
		return ""
	}
	var s []string
	for _, x := range v {
		s = append(s, fmt.Sprintf("%.0f", x))
	}
	return " [" + strings.Join(s, ", ") + "]"
}

// share is v as a percentage of rest.
func share(v, rest float64) string {
	if rest <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f%%", v/rest*100)
}

// verdict says, for each attack, whether both well-behaved DNS clients
// kept keptShare of their rate at rest. The larger churn, when it missed
// no worse than the control (the same volume from known sources), is
// named as such: the volume took the cores, not the fresh sources.
func (run hostileRun) verdict() string {
	if len(run.rows) < 2 {
		return ""
	}
	rest := run.rows[0]
	kept := func(r hostileRow) bool { return r.udpQPS >= keptShare*rest.udpQPS && r.tcpQPS >= keptShare*rest.tcpQPS }
	var control *hostileRow
	for i := range run.rows {
		if run.rows[i].attack == controlName {
			control = &run.rows[i]
		}
	}
	var missed, volume []string
	for _, r := range run.rows[1:] {
		switch {
		case r.attack == controlName || kept(r):
		case r.attack == churnMaxName && control != nil && !kept(*control) && r.tcpQPS >= keptShare*rest.tcpQPS && r.udpQPS >= control.udpQPS*keptShare:
			volume = append(volume, r.attack)
		default:
			missed = append(missed, r.attack)
		}
	}
	target := fmt.Sprintf("Target (a well-behaved client keeps ≥ %.0f%% of its rate at rest, UDP and TCP, under each attack): ", keptShare*100)
	switch {
	case len(missed) > 0:
		target += "**missed** under " + strings.Join(missed, ", ") + "."
	default:
		target += "met"
		if len(volume) > 0 {
			target += " but under " + strings.Join(volume, ", ")
		}
		target += "."
	}
	if len(volume) > 0 {
		target += fmt.Sprintf(" Under %s the client kept no less than under the control, the same volume from sources the limiter knows (%s of rest): what is lost there is the volume these shared cores can answer, not the fresh sources.",
			strings.Join(volume, ", "), share(control.udpQPS, rest.udpQPS))
	}
	return target
}
