// Command pgdns-bench is `make bench`: it starts a real three-node cluster,
// measures pgdns beside CoreDNS (static zone file) and a minimal miekg/dns
// server (the library's floor), failover visibility, read-your-writes,
// scale, and the HTTP API, prints one markdown report and writes it to
// BENCHMARKS.md. Figures, not assertions: the machine decides them.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "floor" {
		runFloor(os.Args[2:])
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "echo" {
		runEcho(os.Args[2:])
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "fakepg" {
		runFakePG(os.Args[2:])
		return
	}
	cfg := parseFlags(flag.CommandLine, os.Args[1:])

	var err error
	switch cfg.only {
	case "":
		err = run(cfg)
	case "failover":
		err = runOnly(cfg, failoverHeading, false, failoverOnly)
	case "scale":
		err = runOnly(cfg, scaleHeading, true, scaleOnly)
	case "dns":
		err = runOnly(cfg, dnsHeading, true, dnsOnly)
	case "ha":
		err = runOnly(cfg, haHeading, false, haOnly)
	case "hostile":
		err = runOnly(cfg, hostileHeading, true, hostileOnly)
	case "dbcost":
		err = runOnly(cfg, dbCostHeading, true, dbCostOnly)
	case "srv":
		err = runOnly(cfg, srvHeading, true, srvOnly)
	default:
		err = fmt.Errorf("-only %q: the sections that run alone are dns, failover, scale, dbcost, ha, hostile and srv", cfg.only)
	}
	if err != nil {
		fatal(err)
	}
}

// run is the bench; its deferred cleanup stops every server it started,
// also when a step fails.
func run(cfg config) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b, err := newBench(cfg, true)
	if err != nil {
		return err
	}
	defer b.close()
	r := &report{machine: machine(), stamp: b.stampNow()}
	steps := []struct {
		name string
		run  func(context.Context, *report) error
	}{
		{"DNS throughput and latency", b.dnsComparison},
		{"read-your-writes", b.readYourWrites},
		{"HTTP", b.httpBench},
		{"failover", b.failover},
		{"scale", b.scale},
		{"what a probe costs the database", b.dbCostStep},
		{"hostile clients", func(ctx context.Context, r *report) (err error) { r.hostile, err = b.hostile(ctx); return err }},
	}
	for _, s := range steps {
		fmt.Fprintf(os.Stderr, "bench: %s ...\n", s.name)
		if err := s.run(ctx, r); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	if cfg.goBench != "" {
		if gb, err := os.ReadFile(cfg.goBench); err == nil {
			r.goBench = string(gb)
		}
	}
	md := r.markdown(filepath.Base(b.plotPath))
	fmt.Print(md)
	// Sections the bench does not write (make soak's, the end-to-end
	// tests' switchover figures) are not its to drop: keep them.
	if prev, err := os.ReadFile(cfg.out); err == nil {
		md += otherSections(string(prev), md)
	}
	if err := os.WriteFile(cfg.out, []byte(md), 0o644); err != nil {
		return err
	}
	return b.copyPlots()
}

// copyPlots copies the plots drawn (failover.png, scale.png) beside the
// report.
func (b *bench) copyPlots() error {
	for _, p := range []string{b.plotPath, b.scalePlot} {
		if p == "" {
			continue
		}
		if err := copyFile(p, filepath.Join(filepath.Dir(b.cfg.out), filepath.Base(p))); err != nil {
			return err
		}
	}
	return nil
}

// runOnly runs one section of the bench alone: it starts the cluster (with
// CoreDNS when withCoreDNS), lets measure fill the section, and replaces
// out's section under heading with it, keeping every other section as it
// was.
func runOnly(cfg config, heading string, withCoreDNS bool, measure func(ctx context.Context, b *bench) (string, error)) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b, err := newBench(cfg, withCoreDNS)
	if err != nil {
		return err
	}
	defer b.close()
	section, err := measure(ctx, b)
	if err != nil {
		return err
	}
	return writeSection(cfg.out, heading, section)
}

// failoverOnly measures failover and copies failover.png beside the
// report.
func failoverOnly(ctx context.Context, b *bench) (string, error) {
	r := &report{machine: machine()}
	fmt.Fprintln(os.Stderr, "bench: failover ...")
	if err := b.failover(ctx, r); err != nil {
		return "", fmt.Errorf("failover: %w", err)
	}
	if err := b.copyPlots(); err != nil {
		return "", err
	}
	return r.failover.markdown(filepath.Base(b.plotPath)), nil
}

// dnsOnly measures DNS throughput and latency: pgdns, CoreDNS, the
// miekg/dns floor and the UDP echo, on a real cluster.
func dnsOnly(ctx context.Context, b *bench) (string, error) {
	r := &report{machine: machine()}
	fmt.Fprintln(os.Stderr, "bench: DNS throughput and latency ...")
	if err := b.dnsComparison(ctx, r); err != nil {
		return "", fmt.Errorf("DNS throughput and latency: %w", err)
	}
	return r.dnsMarkdown(), nil
}

// haOnly measures two instances with one frozen or killed. The
// full bench does not run it (it needs root) and keeps the section as it
// was.
func haOnly(ctx context.Context, b *bench) (string, error) {
	res, err := b.ha(ctx)
	if err != nil {
		return "", fmt.Errorf("ha: %w", err)
	}
	return res.markdown(), nil
}

// writeSection prints section and puts it in place of out's section under
// heading, keeping every other section as it was.
func writeSection(out, heading, section string) error {
	fmt.Print(section)
	prev, err := os.ReadFile(out)
	if err != nil {
		return err
	}
	return os.WriteFile(out, []byte(replaceSection(string(prev), heading, section)), 0o644)
}

// replaceSection puts section in place of md's section under heading (up
// to the next heading of the same level), or at the end if md has none.
func replaceSection(md, heading, section string) string {
	i := strings.Index(md, "\n"+heading+"\n")
	if i < 0 {
		return strings.TrimRight(md, "\n") + "\n\n" + section
	}
	rest := md[i+1:]
	end := len(rest)
	if j := strings.Index(rest[len(heading):], "\n## "); j >= 0 {
		end = len(heading) + j + 1
	}
	return md[:i+1] + section + rest[end:]
}

// otherSections returns prev's "## " sections whose headings md has not,
// in prev's order.
func otherSections(prev, md string) string {
	var kept string
	for _, l := range strings.Split(prev, "\n") {
		if strings.HasPrefix(l, "## ") && !strings.Contains(md, "\n"+l+"\n") {
			kept += keptSection(prev, l)
		}
	}
	return kept
}

// keptSection returns the section of md that starts with the heading
// line, up to the next heading of the same level, or "".
func keptSection(md, heading string) string {
	i := strings.Index(md, "\n"+heading+"\n")
	if i < 0 {
		return ""
	}
	rest := md[i+1:]
	if j := strings.Index(rest[len(heading):], "\n## "); j >= 0 {
		rest = rest[:len(heading)+j+1]
	}
	return "\n" + strings.TrimRight(rest, "\n") + "\n"
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}

// loadAverage is the machine's one-minute load average as /proc/loadavg
// gives it, so a reader can tell a quiet run from one beside other work.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "unknown"
}

// machine describes where the figures were taken.
func machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				_, cpu, _ = strings.Cut(l, ": ")
				break
			}
		}
	}
	return cpu
}

// dbCostOnly measures what a probe costs the database, with pgdns
// probing the three real servers.
func dbCostOnly(ctx context.Context, b *bench) (string, error) {
	var hosts []string
	for _, n := range b.pg.Nodes {
		hosts = append(hosts, n.Addr())
	}
	if _, err := b.startPGDNS(hosts, "250ms"); err != nil {
		return "", err
	}
	fmt.Fprintln(os.Stderr, "bench: what a probe costs the database ...")
	d, err := b.dbCost(ctx)
	if err != nil {
		return "", fmt.Errorf("what a probe costs the database: %w", err)
	}
	return d.markdown(), nil
}

// scaleOnly measures pgdns on the three real servers at rest, then the
// series of fleet sizes.
func scaleOnly(ctx context.Context, b *bench) (string, error) {
	var hosts []string
	for _, n := range b.pg.Nodes {
		hosts = append(hosts, n.Addr())
	}
	if _, err := b.startPGDNS(hosts, "250ms"); err != nil {
		return "", err
	}
	time.Sleep(3 * time.Second) // settle, then the idle footprint
	var err error
	if b.rssIdle, err = rssKiB(b.pgdnsPID); err != nil {
		return "", err
	}
	r := &report{machine: machine()}
	fmt.Fprintln(os.Stderr, "bench: scale ...")
	if err := b.scale(ctx, r); err != nil {
		return "", fmt.Errorf("scale: %w", err)
	}
	r.scale.rss3 = 0 // no load steps ran before
	if err := b.copyPlots(); err != nil {
		return "", err
	}
	return r.scale.markdown(), nil
}
