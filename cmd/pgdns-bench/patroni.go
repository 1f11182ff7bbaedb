package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pgdns/pgdns/internal/dnspoll"
	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// patroniRep is one `patronictl switchover`; times are from its start.
type patroniRep struct {
	returned time.Duration // patronictl returned
	api      time.Duration // the candidate's /primary first answered 200
	writable time.Duration // the candidate first answered pg_is_in_recovery() = false (polled every ms)
	dns      time.Duration // primary.db.local first answered the candidate
	logged   time.Duration // pgdns logged the candidate primary (ms resolution)
	loggedOK bool
}

type patroniResult struct {
	skipped string // why there are no figures
	reps    []patroniRep
	wrong   []string
}

// patroniSwitchovers starts etcd and three Patroni nodes (ttl 10,
// loop_wait 1) on addresses of block, a pgdns that reads the members from
// Patroni's REST API at the default probe settings, and switches the
// leader over -patroni-reps times.
func (b *bench) patroniSwitchovers(ctx context.Context, block *pgtest.Block) (*patroniResult, error) {
	if b.cfg.patroniReps == 0 {
		return nil, errors.New("skipped with -patroni-reps 0")
	}
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	pc, err := pgtest.StartPatroni(sctx, block.IP(20), []string{block.IP(21), block.IP(22), block.IP(23)})
	cancel()
	if err != nil {
		return nil, err
	}
	defer pc.Close()
	var urls []string
	for _, n := range pc.Nodes {
		urls = append(urls, n.APIURL)
	}
	dnsAddr, logPath := block.Addr(54, 5353), filepath.Join(b.dir, "pgdns-patroni.log")
	conf := filepath.Join(b.dir, "pgdns-patroni.yaml")
	if err := writeFile(conf, fmt.Sprintf("dns: {listen: %q, zone: db.local, ttl: 1}\nhttp: {listen: \"\"}\nprobe: {dsn: \"user=postgres dbname=postgres sslmode=disable\"}\nclusters:\n  main:\n    patroni: [%s]\n",
		dnsAddr, strings.Join(urls, ", "))); err != nil {
		return nil, err
	}
	cmd, err := b.startLogged(logPath, b.pgdns, "-config", conf)
	if err != nil {
		return nil, err
	}
	defer b.stopProc(cmd)

	res := &patroniResult{}
	var marks []repMarks
	for rep := range b.cfg.patroniReps {
		fmt.Fprintf(os.Stderr, "bench: patroni switchover %d/%d\n", rep+1, b.cfg.patroniReps)
		leader := pc.Leader(ctx)
		if leader == nil {
			return nil, fmt.Errorf("no leader\n%s", pc.Logs())
		}
		if err := waitPatroniAnswers(ctx, dnsAddr, leader.IP, 2); err != nil {
			return nil, fmt.Errorf("%w\n%s", err, tailFile(logPath, 3000))
		}
		var cand *pgtest.PatroniNode
		for _, n := range pc.Nodes {
			if n != leader {
				cand = n
				break
			}
		}
		pl := dnspoll.Start(dnsAddr, "primary.db.local.", time.Millisecond, 200*time.Millisecond)
		api := watchPatroniPrimary(cand.APIURL)
		wctx, wcancel := context.WithCancel(ctx)
		writable := watchWritable(wctx, "host="+cand.IP+" port=5432 user=postgres dbname=postgres sslmode=disable")
		time.Sleep(150 * time.Millisecond)
		t0 := time.Now()
		if err := pc.Switchover(ctx, cand); err != nil {
			pl.Finish()
			api.finish()
			wcancel()
			return nil, err
		}
		t1 := time.Now()
		// Not answered within 30 s is reported from the polls below.
		testkit.Poll(30*time.Second, 20*time.Millisecond, func() bool {
			last, ok := pl.Latest()
			return ok && slices.Equal(last.IPs, []string{cand.IP}) && !api.first().IsZero()
		})
		time.Sleep(200 * time.Millisecond)
		polls := pl.Finish()
		apiAt := api.finish()
		wcancel()
		wr := <-writable
		for _, p := range polls {
			if p.Rcode != 0 || len(p.IPs) > 1 || (len(p.IPs) == 1 && p.IPs[0] != leader.IP && p.IPs[0] != cand.IP) {
				res.wrong = append(res.wrong, fmt.Sprintf("patroni switchover at %s: rcode %d, %v", p.At.UTC().Format("15:04:05.000000"), p.Rcode, p.IPs))
			}
		}
		first := dnspoll.FirstWith(polls, cand.IP, t0)
		if first.IsZero() || apiAt.IsZero() {
			return nil, fmt.Errorf("switchover to %s: pgdns answered it at %v, /primary at %v\n%s", cand.Name, first, apiAt, tailFile(logPath, 3000))
		}
		pr := patroniRep{returned: t1.Sub(t0), api: apiAt.Sub(t0), dns: first.Sub(t0)}
		if !wr.IsZero() {
			pr.writable = wr.Sub(t0)
		}
		res.reps = append(res.reps, pr)
		marks = append(marks, repMarks{host: cand.Addr(), t0: t0, ref: t0})
		if err := pc.WaitHealthy(ctx, len(pc.Nodes)); err != nil {
			return nil, err
		}
		if err := waitPatroniAnswers(ctx, dnsAddr, cand.IP, 2); err != nil {
			return nil, fmt.Errorf("%w\n%s", err, tailFile(logPath, 3000))
		}
		if time.Since(t0) < 6300*time.Millisecond {
			time.Sleep(time.Until(t0.Add(6300 * time.Millisecond)))
		}
	}
	b.stopProc(cmd)
	keepLog(logPath)
	evs := readEvents(logPath)
	for i, m := range marks {
		if at, ok := firstEvent(evs, m.host, "", "primary", m.t0); ok {
			res.reps[i].logged, res.reps[i].loggedOK = at.Sub(m.ref), true
		}
	}
	return res, nil
}

// waitPatroniAnswers waits (60s at most) until primary.db.local answers
// primaryIP and replica.db.local has replicas addresses.
func waitPatroniAnswers(ctx context.Context, dnsAddr, primaryIP string, replicas int) error {
	if testkit.Poll(60*time.Second, 20*time.Millisecond, func() bool {
		return ctx.Err() != nil ||
			slices.Equal(ask(dnsAddr, "primary.db.local."), []string{primaryIP}) && len(ask(dnsAddr, "replica.db.local.")) == replicas
	}) {
		return ctx.Err()
	}
	return fmt.Errorf("pgdns never answered primary %s with %d replicas", primaryIP, replicas)
}

// apiWatch asks a Patroni node's /primary every 2ms until it answers 200.
type apiWatch struct {
	stop, done chan struct{}
	mu         sync.Mutex
	at         time.Time
}

func watchPatroniPrimary(url string) *apiWatch {
	w := &apiWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		c := &http.Client{Timeout: 500 * time.Millisecond}
		for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
			select {
			case <-w.stop:
				return
			default:
			}
			resp, err := c.Get(url + "/primary")
			if err != nil {
				continue
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				w.mu.Lock()
				w.at = time.Now()
				w.mu.Unlock()
				return
			}
		}
	}()
	return w
}

func (w *apiWatch) first() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.at
}

func (w *apiWatch) finish() time.Time {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
	return w.first()
}
