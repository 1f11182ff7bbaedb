package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
)

func main() {
	duration := flag.Duration("duration", 5*time.Minute, "how long faults are injected")
	seed := flag.Uint64("seed", 0, "seed of the fault schedule (0: from the clock)")
	short := flag.Bool("short", false, "play every fault kind once in the seed's order, as make test does")
	workers := flag.Int("workers", 3, "checking clients")
	foreign := flag.Bool("foreign", true, "list a server of another cluster among the hosts")
	plain := flag.Bool("plain-probe", false, "pgdns probes as a role without pg_monitor (nor superuser) all the run, but during probe-role faults")
	kinds := flag.String("kinds", "", "play only these fault kinds (comma-separated; default all)")
	overlap := flag.Int("overlap", 2, "how many faults may run at once (1: one after another)")
	partitions := flag.Bool("partitions", os.Geteuid() == 0, "drop packets between chosen pairs with nftables, in a network namespace of the soak's own (root only)")
	pgdnsLog := flag.String("pgdns-log", "", "write pgdns's own log to this file")
	flag.Parse()
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	if *partitions && !InNetns() {
		// The whole run, servers and pgdns included, happens in a
		// network namespace of its own: run again there, with the seed
		// now fixed.
		if os.Geteuid() != 0 {
			fmt.Fprintln(os.Stderr, "soak: -partitions needs root (a network namespace of its own); use -partitions=false")
			os.Exit(2)
		}
		args := append(os.Args[1:], fmt.Sprintf("-seed=%d", *seed))
		code, err := Reexec(args, os.Stdout)
		if err != nil {
			fmt.Fprintln(os.Stderr, "soak:", err)
		}
		os.Exit(code)
	}
	fmt.Printf("soak: seed %d (make soak SEED=%d reproduces the schedule)\n", *seed, *seed)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	block, release, err := pgtest.Reserve()
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	defer release()
	opts := Options{Seed: *seed, Duration: *duration, Short: *short, Workers: *workers,
		Addrs: block, Foreign: *foreign, Log: os.Stdout, MaxFaults: *overlap, Partitions: *partitions, PlainProbe: *plain}
	if *kinds != "" {
		opts.Kinds = strings.Split(*kinds, ",")
		for _, k := range opts.Kinds {
			if !slices.Contains(Kinds, k) {
				fmt.Fprintf(os.Stderr, "soak: -kinds: no fault kind %q (kinds: %s)\n", k, strings.Join(Kinds, ", "))
				os.Exit(2)
			}
		}
	}
	if *pgdnsLog != "" {
		f, err := os.Create(*pgdnsLog)
		if err != nil {
			fmt.Fprintln(os.Stderr, "soak:", err)
			os.Exit(2)
		}
		defer f.Close()
		opts.PGDNS = f
	}
	rep, err := Run(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	fmt.Println()
	fmt.Print(rep)
	if len(rep.Violations) > 0 {
		fmt.Printf("FAIL: %d violations with seed %d\n", len(rep.Violations), *seed)
		os.Exit(1)
	}
	fmt.Printf("PASS: no violations with seed %d\n", *seed)
}
