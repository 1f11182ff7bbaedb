package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/app"
	"github.com/pgdns/pgdns/internal/config"
	"github.com/pgdns/pgdns/internal/pgtest"
)

// failoverResult: how long after a promotion primary.db.local names the
// new primary, at probe.interval 100ms.
type failoverResult struct {
	fromStart  []time.Duration // from the promote command starting
	fromReturn []time.Duration // from pg_ctl promote returning
}

// sample is what primary.db.local answered at t (relative to the promote).
type sample struct {
	t     time.Duration
	state int // 2 old primary, 0 nobody, 1 new primary
}

// failover promotes a replica 10 times, each time on a fresh primary and
// replica, and records one timeline for the plot.
func (b *bench) failover(ctx context.Context, r *report) error {
	const reps = 10
	res := &failoverResult{}
	var timeline []sample
	for rep := range reps {
		fmt.Fprintf(os.Stderr, "bench: failover %d/%d\n", rep+1, reps)
		start, ret, tl, err := b.oneFailover(ctx, rep == 0)
		if err != nil {
			return err
		}
		res.fromStart, res.fromReturn = append(res.fromStart, start), append(res.fromReturn, ret)
		if rep == 0 {
			timeline = tl
		}
	}
	r.failover = res
	png, err := plotTimeline(b.dir, timeline)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: no plot:", err)
		return nil
	}
	b.plotPath = png
	return nil
}

func (b *bench) oneFailover(ctx context.Context, record bool) (fromStart, fromReturn time.Duration, tl []sample, err error) {
	const oldIP, newIP = "127.0.31.11", "127.0.31.12"
	pg, err := pgtest.Start(ctx, pgtest.Options{IPs: []string{oldIP, newIP}})
	if err != nil {
		return 0, 0, nil, err
	}
	defer pg.Close()
	path := filepath.Join(b.dir, "failover.yaml")
	if err := writeFile(path, fmt.Sprintf("dns: {listen: \"127.0.31.53:0\"}\nhttp: {listen: \"\"}\nprobe: {interval: 100ms, timeout: 1s, dsn: \"user=postgres dbname=postgres sslmode=disable\"}\nclusters:\n  main:\n    hosts: [%s, %s]\n",
		pg.Nodes[0].Addr(), pg.Nodes[1].Addr())); err != nil {
		return 0, 0, nil, err
	}
	cfg, err := config.Load(path, nil)
	if err != nil {
		return 0, 0, nil, err
	}
	a, err := app.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return 0, 0, nil, err
	}
	if err := a.Start(); err != nil {
		return 0, 0, nil, err
	}
	defer a.Stop(context.Background())
	if err := waitDNS(a.DNSAddr(), "replica.db.local.", 1, 15*time.Second); err != nil {
		return 0, 0, nil, err
	}

	client := &dns.Client{Timeout: 200 * time.Millisecond}
	ask := func() int {
		req := new(dns.Msg)
		req.SetQuestion("primary.db.local.", dns.TypeA)
		m, _, err := client.Exchange(req, a.DNSAddr())
		if err != nil || len(m.Answer) == 0 {
			return 0
		}
		if m.Answer[0].(*dns.A).A.String() == newIP {
			return 1
		}
		return 2
	}
	// The old primary dies; after 300 ms the replica is promoted, as a
	// failover manager would do.
	stopAt := time.Now()
	if err := pg.Nodes[0].Stop(ctx, "immediate"); err != nil {
		return 0, 0, nil, err
	}
	var promoteStart time.Time
	promoted := make(chan error, 1)
	returned := make(chan time.Time, 1)
	go func() {
		time.Sleep(300*time.Millisecond - time.Since(stopAt))
		promoteStart = time.Now()
		err := pg.Nodes[1].Promote(ctx)
		returned <- time.Now()
		promoted <- err
	}()
	var seenAt time.Time
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		st := ask()
		if record {
			tl = append(tl, sample{t: time.Since(stopAt), state: st})
		}
		if st == 1 && seenAt.IsZero() && !promoteStart.IsZero() {
			seenAt = time.Now()
		}
		if !seenAt.IsZero() && time.Since(seenAt) > 500*time.Millisecond {
			break
		}
	}
	if err := <-promoted; err != nil {
		return 0, 0, nil, err
	}
	ret := <-returned
	if seenAt.IsZero() {
		return 0, 0, nil, fmt.Errorf("the promoted replica was never answered")
	}
	// Shift the timeline so 0 is the promote command.
	for i := range tl {
		tl[i].t -= promoteStart.Sub(stopAt)
	}
	return seenAt.Sub(promoteStart), max(0, seenAt.Sub(ret)), tl, nil
}

// plotTimeline draws what primary.db.local answered around the promote
// with gnuplot.
func plotTimeline(dir string, tl []sample) (string, error) {
	if _, err := exec.LookPath("gnuplot"); err != nil {
		return "", err
	}
	data := filepath.Join(dir, "failover.dat")
	var d strings.Builder
	for _, s := range tl {
		fmt.Fprintf(&d, "%.1f %d\n", float64(s.t.Microseconds())/1000, s.state)
	}
	if err := writeFile(data, d.String()); err != nil {
		return "", err
	}
	png := filepath.Join(dir, "failover.png")
	script := fmt.Sprintf(`set terminal pngcairo size 900,360 font "sans,10"
set output %q
set title "primary.db.local during a failover (probe.interval 100ms)" noenhanced
set xlabel "ms since pg_ctl promote started (the old primary was stopped 300 ms before)" noenhanced
set ytics ("nobody" 0, "new primary 127.0.31.12" 1, "old primary 127.0.31.11" 2)
set yrange [-0.5:2.5]
set grid xtics
set arrow from 0, graph 0 to 0, graph 1 nohead lc rgb "red" dt 2
set label "promote" at 5, 2.3 tc rgb "red"
plot %q using 1:2 with steps lw 2 lc rgb "#1f77b4" notitle
`, png, data)
	sp := filepath.Join(dir, "failover.gp")
	if err := writeFile(sp, script); err != nil {
		return "", err
	}
	if out, err := exec.Command("gnuplot", sp).CombinedOutput(); err != nil {
		return "", fmt.Errorf("gnuplot: %w: %s", err, out)
	}
	return png, nil
}

func durations(ds []time.Duration) (p50, maxD time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2], s[len(s)-1]
}
