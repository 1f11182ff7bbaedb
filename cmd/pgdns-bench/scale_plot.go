package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// scalePlotData is the plot's data, one line per size, by hosts: hosts,
// CPU µs per probe, RSS in MiB, percent of one core, and the point's
// label: its probe interval when that is not the default 250ms.
func scalePlotData(points []scalePoint) string {
	ps := slices.Clone(points)
	slices.SortFunc(ps, func(a, b scalePoint) int { return a.hosts - b.hosts })
	var d strings.Builder
	d.WriteString("# hosts cpu_us_per_probe rss_mib core_pct interval\n")
	for _, p := range ps {
		label := ""
		if p.interval != 250*time.Millisecond {
			label = "every " + p.interval.String()
		}
		fmt.Fprintf(&d, "%d %.2f %.2f %.2f %q\n", p.hosts, float64(p.perProbe().Nanoseconds())/1000, float64(p.rss)/1024, p.share(), label)
	}
	return d.String()
}

// scaleTargetData is the targets the plot marks: hosts, CPU µs per probe
// (or "NaN" where none), RSS in MiB.
func scaleTargetData() string {
	var d strings.Builder
	d.WriteString("# hosts cpu_us_per_probe rss_mib\n")
	for _, t := range scaleTargets {
		cpu := "NaN"
		if t.perProbe > 0 {
			cpu = fmt.Sprintf("%.2f", float64(t.perProbe.Nanoseconds())/1000)
		}
		fmt.Fprintf(&d, "%d %s %.2f\n", t.hosts, cpu, float64(t.rssKiB)/1024)
	}
	return d.String()
}

// scalePlotScript draws two panels side by side, both against hosts on
// linear axes (a straight line through the RSS points is linear growth,
// a flat CPU-per-probe line a constant cost per host): pgdns's CPU time
// per probe and its resident set, each with its targets marked.
func scalePlotScript(png, data, targets, title string) string {
	return fmt.Sprintf(`set terminal pngcairo size 1000,420 font "sans,10"
set output %q
set multiplot layout 1,2 title %q noenhanced
set grid
set key top left noenhanced
set xlabel "hosts probed (every 250 ms unless marked)" noenhanced
set xrange [0:*]
set yrange [0:*]
set offsets 0, graph 0.05, graph 0.12, 0
set title "pgdns's CPU time per probe" noenhanced
set ylabel "µs per probe" noenhanced
plot %q using 1:2 with linespoints lw 2 pt 7 lc rgb "#1f77b4" title "measured", \
     %q using 1:2:5 with labels offset 0,1 font ",8" notitle, \
     %q using 1:2 with points pt 9 ps 1.6 lc rgb "red" title "target (at most)"
set title "pgdns's resident set" noenhanced
set ylabel "RSS, MiB" noenhanced
plot %q using 1:3 with linespoints lw 2 pt 7 lc rgb "#1f77b4" title "measured", \
     %q using 1:3:5 with labels offset 0,1 font ",8" notitle, \
     %q using 1:3 with points pt 9 ps 1.6 lc rgb "red" title "target (at most)"
unset multiplot
`, png, title, data, data, targets, data, data, targets)
}

// plotScale draws scale.png with gnuplot, as failover.png is drawn.
func plotScale(dir string, res *scaleResult) (string, error) {
	if _, err := exec.LookPath("gnuplot"); err != nil {
		return "", err
	}
	data, targets := filepath.Join(dir, "scale.dat"), filepath.Join(dir, "scale-targets.dat")
	if err := writeFile(data, scalePlotData(res.points)); err != nil {
		return "", err
	}
	if err := writeFile(targets, scaleTargetData()); err != nil {
		return "", err
	}
	png := filepath.Join(dir, "scale.png")
	title := fmt.Sprintf("pgdns at %s, probing the 3 real servers and fakes (%s)", res.stamp.commit, res.stamp.began.Format("2006-01-02 15:04 UTC"))
	sp := filepath.Join(dir, "scale.gp")
	if err := writeFile(sp, scalePlotScript(png, data, targets, title)); err != nil {
		return "", err
	}
	if out, err := exec.Command("gnuplot", sp).CombinedOutput(); err != nil {
		return "", fmt.Errorf("gnuplot: %w: %s", err, out)
	}
	return png, nil
}
