package main

import (
	"flag"
	"time"
)

// config is what one run of the bench was asked to do, from its flags.
// It is passed down (bench.cfg) rather than kept in package variables, so
// that each step reads its settings from one place.
type config struct {
	out     string        // the report, BENCHMARKS.md
	pgdns   string        // the pgdns binary measured
	goBench string        // `go test -bench` output to include, or ""
	only    string        // one section alone (dns, failover, scale, dbcost, ha, hostile), or "" for all
	rounds  int           // interleaved rounds of the DNS comparison
	dnsTime time.Duration // length of one dnsperf throughput run

	failoverReps int // repetitions of each failover case
	patroniReps  int // Patroni switchovers in the failover step (0: none)

	pprofDir   string // scale: where pgdns's CPU and heap profiles go, or ""
	scaleHosts string // scale: the series' sizes (parseScaleSizes)
	// scaleAdmission, when not "", is the scale step's pgdns's
	// probe.admission_interval (a duration; 0 never asks): what the
	// admission check costs pgdns is the difference to a run without it.
	scaleAdmission string

	failoverBefore string // failover: also measure pgdns built from this commit, first, or ""

	hostileAttack string // hostile: only the attacks whose names contain one of these comma-separated words
	hostileBefore string // hostile: also measure pgdns built from this commit, or ""

	commit string // the commit measured, as the report names it

	// tuned are the flags set beyond what the Makefile passes
	// ("-rounds 1", say): a run with them is not `make bench`'s.
	tuned []string
}

// makeFlags are the flags `make bench` passes; the others tune a run.
var makeFlags = map[string]bool{"out": true, "pgdns": true, "gobench": true, "only": true, "pprof": true, "commit": true}

// parseFlags reads the bench's flags from args into a config.
func parseFlags(fs *flag.FlagSet, args []string) config {
	var c config
	fs.StringVar(&c.out, "out", "BENCHMARKS.md", "where to write the report")
	fs.StringVar(&c.pgdns, "pgdns", "bin/pgdns", "the pgdns binary to measure")
	fs.StringVar(&c.goBench, "gobench", "", "file with `go test -bench` output to include")
	fs.IntVar(&c.rounds, "rounds", 3, "interleaved rounds of the DNS comparison")
	fs.DurationVar(&c.dnsTime, "duration", 8*time.Second, "length of one dnsperf throughput run")
	fs.StringVar(&c.only, "only", "", "run only this section (dns, failover, scale, dbcost, ha, hostile, srv) and rewrite only it in the report")
	fs.StringVar(&c.hostileAttack, "hostile-attack", "", "hostile: run only the attacks whose names contain one of these comma-separated words")
	fs.StringVar(&c.hostileBefore, "hostile-before", "", "hostile: also measure pgdns built from this commit (git archive), before the binary under test")
	fs.StringVar(&c.pprofDir, "pprof", "", "scale: save pgdns's CPU and heap profiles with 1,000 hosts (or, without 1,000 in -scale-hosts, the largest size) in this directory and summarize them in the report")
	fs.StringVar(&c.scaleHosts, "scale-hosts", defaultScaleSizes, "scale: the series' numbers of hosts, comma-separated, each with @interval when not 250ms")
	fs.StringVar(&c.scaleAdmission, "scale-admission", "", "scale: the probe.admission_interval of the scale step's pgdns (default: pgdns's own)")
	fs.StringVar(&c.failoverBefore, "failover-before", "", "failover: also measure pgdns built from this commit (git archive), first, on the same cluster")
	fs.IntVar(&c.failoverReps, "failover-reps", 20, "repetitions of each failover case")
	fs.IntVar(&c.patroniReps, "patroni-reps", 10, "Patroni switchovers in the failover step (0: none)")
	fs.StringVar(&c.commit, "commit", "", "the commit measured, as the report names it (default: git describe --always --dirty here)")
	_ = fs.Parse(args) // flag.ExitOnError: a bad flag exits
	fs.Visit(func(f *flag.Flag) {
		if !makeFlags[f.Name] {
			c.tuned = append(c.tuned, "-"+f.Name+" "+f.Value.String())
		}
	})
	if c.commit == "" {
		c.commit = describe()
	}
	return c
}
