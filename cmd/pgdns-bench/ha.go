package main

// No single point of failure: two pgdns instances serve the
// zone, and the first one is frozen (SIGSTOP: no answer, no ICMP, only
// timeouts) or killed (SIGKILL: queries refused). Measured with real
// resolvers: libpq through glibc's resolv.conf, CoreDNS forwarding to
// both; and how far apart the two instances see a switchover.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/dnspoll"
	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// Repetitions of the -only ha steps.
const (
	haConvergeReps = 8 // switchovers watched on both instances
	haPsqlReps     = 8 // psql connections per resolv.conf and state
	haLoad         = 8 * time.Second
)

// Instance states the clients are measured in.
const (
	haUp     = "both up"
	haFrozen = "first frozen (SIGSTOP)"
	haKilled = "first killed (SIGKILL)"
)

// haWorld is the cluster and the two instances the steps share.
type haWorld struct {
	b       *bench
	pg      *pgtest.Cluster
	block   *pgtest.Block
	primary *pgtest.Node
	replica *pgtest.Node
	conf    [2]string // config files
	addr    [2]string // ip:53
	cmd     [2]*exec.Cmd
}

// haResult is what the ha steps measured.
type haResult struct {
	stamp    stamp
	gap      []time.Duration // between the two instances' first answers of a new primary
	later    []time.Duration // the later of the two, from pg_ctl promote returning
	glibc    []glibcRun
	coredns  []corednsRun
	interval time.Duration
}

// glibcRun is one resolv.conf in one state: how long glibc's lookup took
// (getent ahosts, the getaddrinfo call libpq makes) and the whole psql
// connection.
type glibcRun struct {
	conf, state string
	lookup      []time.Duration
	psql        []time.Duration
	failed      int
}

// corednsRun is one Corefile in one state, under a steady lookup load.
type corednsRun struct {
	settings, state string
	took            []time.Duration
	failed          int
	lastSlow        time.Duration // start of the last lookup over 1 s, from the fault
}

func (b *bench) ha(ctx context.Context) (*haResult, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("-only ha needs root: pgdns on port 53 and psql in a mount namespace")
	}
	began := time.Now()
	block, release, err := pgtest.Reserve()
	if err != nil {
		return nil, err
	}
	defer release()
	pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	pg, err := pgtest.Start(pctx, pgtest.Options{IPs: block.IPs(2)})
	cancel()
	if err != nil {
		return nil, err
	}
	defer pg.Close()
	w := &haWorld{b: b, pg: pg, block: block, primary: pg.Nodes[0], replica: pg.Nodes[1]}
	for i := range w.addr {
		w.addr[i] = block.Addr(53+i, 53)
		w.conf[i] = filepath.Join(b.dir, fmt.Sprintf("pgdns-ha%d.yaml", i+1))
		// Default probe settings, as in production; the same file but for
		// the listen address.
		text := fmt.Sprintf("dns: {listen: %q, zone: db.local, ttl: 1, nameservers: [ns1=%s, ns2=%s]}\nhttp: {listen: \"\"}\nprobe: {dsn: \"user=postgres dbname=postgres sslmode=disable\"}\nclusters:\n  main:\n    hosts: [%s, %s]\n",
			w.addr[i], block.IP(53), block.IP(54), w.primary.Addr(), w.replica.Addr())
		if err := writeFile(w.conf[i], text); err != nil {
			return nil, err
		}
		if err := w.start(i); err != nil {
			return nil, err
		}
	}
	defer func() {
		for _, c := range w.cmd {
			_ = c.Process.Signal(syscall.SIGCONT)
		}
	}()
	res := &haResult{stamp: b.stampNow(), interval: 250 * time.Millisecond}
	res.stamp.began, res.stamp.asRoot = began.UTC(), true // ha refuses to run otherwise
	steps := []struct {
		name string
		run  func(context.Context, *haResult) error
	}{{"convergence", w.converge}, {"glibc", w.glibc}, {"CoreDNS", w.coredns}}
	for _, s := range steps {
		fmt.Fprintf(os.Stderr, "bench: ha: %s ...\n", s.name)
		if err := s.run(ctx, res); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	res.stamp.took = time.Since(began)
	return res, nil
}

// start runs instance i and waits until it answers the primary.
func (w *haWorld) start(i int) error {
	cmd, err := w.b.startLogged(filepath.Join(w.b.dir, fmt.Sprintf("pgdns-ha%d.log", i+1)), w.b.pgdns, "-config", w.conf[i])
	if err != nil {
		return err
	}
	w.cmd[i] = cmd
	return w.waitPrimary(i, w.primary.IP)
}

// waitPrimary waits (30 s at most) until instance i answers ip as the
// primary.
func (w *haWorld) waitPrimary(i int, ip string) error {
	if testkit.Poll(30*time.Second, 20*time.Millisecond, func() bool {
		return slices.Equal(ask(w.addr[i], "primary.db.local."), []string{ip})
	}) {
		return nil
	}
	return fmt.Errorf("pgdns at %s never answered the primary %s", w.addr[i], ip)
}

// waitRoles waits (60 s at most) until instance i answers the primary
// and the replica as they now are.
func (w *haWorld) waitRoles(i int) error {
	if testkit.Poll(60*time.Second, 20*time.Millisecond, func() bool {
		return slices.Equal(ask(w.addr[i], "primary.db.local."), []string{w.primary.IP}) &&
			slices.Equal(ask(w.addr[i], "replica.db.local."), []string{w.replica.IP})
	}) {
		return nil
	}
	return fmt.Errorf("pgdns at %s never answered primary %s and replica %s", w.addr[i], w.primary.IP, w.replica.IP)
}

// fault puts the first instance in state; restore brings it back.
func (w *haWorld) fault(state string) error {
	switch state {
	case haFrozen:
		return w.cmd[0].Process.Signal(syscall.SIGSTOP)
	case haKilled:
		if err := w.cmd[0].Process.Kill(); err != nil {
			return err
		}
		_, _ = w.cmd[0].Process.Wait()
	}
	return nil
}

func (w *haWorld) restore(state string) error {
	switch state {
	case haFrozen:
		if err := w.cmd[0].Process.Signal(syscall.SIGCONT); err != nil {
			return err
		}
		return w.waitPrimary(0, w.primary.IP)
	case haKilled:
		return w.start(0)
	}
	return nil
}

// converge runs switchovers with a poller on each instance and takes when
// each first answered the new primary.
func (w *haWorld) converge(ctx context.Context, res *haResult) error {
	for i := range w.addr {
		if err := w.waitRoles(i); err != nil {
			return err
		}
	}
	for rep := range haConvergeReps {
		old, next := w.primary, w.replica
		pls := [2]*dnspoll.Poller{
			dnspoll.Start(w.addr[0], "primary.db.local.", time.Millisecond, 200*time.Millisecond),
			dnspoll.Start(w.addr[1], "primary.db.local.", time.Millisecond, 200*time.Millisecond),
		}
		finish := func() [2][]dnspoll.Answer { return [2][]dnspoll.Answer{pls[0].Finish(), pls[1].Finish()} }
		time.Sleep(150 * time.Millisecond)
		if err := old.Stop(ctx, "fast"); err != nil {
			finish()
			return err
		}
		if err := next.Promote(ctx); err != nil {
			finish()
			return err
		}
		promoted := time.Now()
		// Not answered within 30 s is reported from the polls below.
		testkit.Poll(30*time.Second, 20*time.Millisecond, func() bool {
			l0, ok0 := pls[0].Latest()
			l1, ok1 := pls[1].Latest()
			return ok0 && ok1 && slices.Contains(l0.IPs, next.IP) && slices.Contains(l1.IPs, next.IP)
		})
		polls := finish()
		// The replica is never answered as primary before this switchover,
		// and is often answered before pg_ctl promote returns.
		f0, f1 := dnspoll.FirstWith(polls[0], next.IP, time.Time{}), dnspoll.FirstWith(polls[1], next.IP, time.Time{})
		if f0.IsZero() || f1.IsZero() {
			return fmt.Errorf("switchover %d: an instance never answered the new primary %s within 30 s:\n%s\n%s", rep+1, next.IP,
				tailFile(filepath.Join(w.b.dir, "pgdns-ha1.log"), 2000), tailFile(filepath.Join(w.b.dir, "pgdns-ha2.log"), 2000))
		}
		res.gap = append(res.gap, max(f0.Sub(f1), f1.Sub(f0)))
		res.later = append(res.later, max(f0.Sub(promoted), f1.Sub(promoted)))
		if err := old.Reclone(ctx, next); err != nil {
			return err
		}
		w.primary, w.replica = next, old
		for i := range w.addr {
			if err := w.waitRoles(i); err != nil {
				return err
			}
		}
		// Let the flux episode of this switchover end, so that it cannot
		// speed up or delay the next (see failoverWorld.settle).
		time.Sleep(6 * time.Second)
	}
	return nil
}

// haResolvConfs are the resolv.conf variants measured, by their options
// line.
var haResolvConfs = []string{"", "options timeout:1 attempts:2", "options timeout:1 attempts:2 rotate"}

// glibc resolves primary.db.local and connects with psql through each
// resolv.conf, with both instances up, the first frozen, the first
// killed. The variants take turns, so that the machine's noise falls on
// all of them alike.
func (w *haWorld) glibc(ctx context.Context, res *haResult) error {
	psqlBin, err := exec.LookPath("psql")
	if err != nil {
		return err
	}
	var confs []string
	for i, opts := range haResolvConfs {
		path := filepath.Join(w.b.dir, fmt.Sprintf("resolv%d.conf", i))
		if err := writeFile(path, fmt.Sprintf("nameserver %s\nnameserver %s\n%s\n", w.block.IP(53), w.block.IP(54), opts)); err != nil {
			return err
		}
		confs = append(confs, path)
	}
	for _, state := range []string{haUp, haFrozen, haKilled} {
		if err := w.fault(state); err != nil {
			return err
		}
		runs := make([]glibcRun, len(confs))
		for range haPsqlReps {
			for i, conf := range confs {
				runs[i].conf, runs[i].state = haResolvConfs[i], state
				lookup, err := inNamespace(ctx, conf, "getent", "ahosts", "primary.db.local")
				if err == nil {
					runs[i].lookup = append(runs[i].lookup, lookup)
				}
				took, err2 := inNamespace(ctx, conf, psqlBin, "-XAtqc", "SELECT 1", "host=primary.db.local")
				if err2 == nil {
					runs[i].psql = append(runs[i].psql, took)
				}
				if err := errors.Join(err, err2); err != nil {
					runs[i].failed++
					fmt.Fprintln(os.Stderr, "bench: ha:", err)
				}
			}
		}
		res.glibc = append(res.glibc, runs...)
		if err := w.restore(state); err != nil {
			return err
		}
	}
	return nil
}

// inNamespace runs a program with /etc/resolv.conf bind-mounted from conf
// in a mount namespace of its own and returns how long it took. libpq's
// connect_timeout is unset: a lookup takes what it takes.
func inNamespace(ctx context.Context, conf string, argv ...string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	args := append([]string{"-m", "sh", "-c", `mount --bind "$1" /etc/resolv.conf && shift && exec "$@"`, "sh", conf}, argv...)
	cmd := exec.CommandContext(ctx, "unshare", args...)
	cmd.Env = append(os.Environ(), "PGUSER=postgres", "PGDATABASE=postgres", "PGSSLMODE=disable")
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(t0)
	if err != nil {
		return took, fmt.Errorf("%s: %w: %s", argv[0], err, out)
	}
	return took, nil
}

// haCorefiles are configs/Corefile as shipped and with health checks off
// (max_fails 0, what it had before two instances were measured).
func haCorefiles() (map[string]string, error) {
	b, err := os.ReadFile("configs/Corefile")
	if err != nil {
		return nil, err
	}
	shipped := string(b)
	// The directive, not the comments that name it.
	const directive = "\n        max_fails 1\n"
	if strings.Count(shipped, directive) != 1 {
		return nil, errors.New("configs/Corefile has no max_fails 1 directive")
	}
	return map[string]string{
		"configs/Corefile (`max_fails 1`, `health_check 100ms`)": shipped,
		"`max_fails 0` (no health checks)":                       strings.Replace(shipped, directive, "\n        max_fails 0\n", 1),
	}, nil
}

// coredns runs CoreDNS with each Corefile forwarding to both instances and
// a steady lookup load, the first instance frozen, then killed.
func (w *haWorld) coredns(ctx context.Context, res *haResult) error {
	bin, err := exec.LookPath("coredns")
	if err != nil {
		return err
	}
	files, err := haCorefiles()
	if err != nil {
		return err
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range files {
			if !yield(k) {
				return
			}
		}
	})
	for _, state := range []string{haFrozen, haKilled} {
		for _, name := range names {
			run, err := w.corednsRun(ctx, bin, files[name], state)
			if err != nil {
				return err
			}
			run.settings = name
			res.coredns = append(res.coredns, run)
		}
	}
	return nil
}

// corednsRun starts a fresh CoreDNS, faults the first instance, and sends
// a lookup every 20 ms for haLoad, each with a 5 s timeout (glibc's
// default).
func (w *haWorld) corednsRun(ctx context.Context, bin, corefile, state string) (corednsRun, error) {
	run := corednsRun{state: state}
	addr := w.block.Addr(55, 53)
	path := filepath.Join(w.b.dir, "Corefile-ha")
	text := strings.Replace(corefile, "forward . {$PGDNS_ADDR}", "forward . "+w.addr[0]+" "+w.addr[1], 1)
	if err := writeFile(path, text); err != nil {
		return run, err
	}
	cmd := exec.Command(bin, "-conf", path)
	cmd.Env = append(os.Environ(), "COREDNS_BIND="+w.block.IP(55), "COREDNS_PORT=53")
	if err := cmd.Start(); err != nil {
		return run, err
	}
	defer func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() }()
	if err := waitDNS(addr, "primary.db.local.", 1, 15*time.Second); err != nil {
		return run, err
	}
	if err := w.fault(state); err != nil {
		return run, err
	}
	fault := time.Now()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for time.Since(fault) < haLoad && ctx.Err() == nil {
		wg.Add(1)
		go func(start time.Time) {
			defer wg.Done()
			req := new(dns.Msg)
			req.SetQuestion("primary.db.local.", dns.TypeA)
			m, _, err := (&dns.Client{Timeout: 5 * time.Second}).Exchange(req, addr)
			took := time.Since(start)
			ok := err == nil && m.Rcode == dns.RcodeSuccess && len(m.Answer) == 1 && m.Answer[0].(*dns.A).A.String() == w.primary.IP
			mu.Lock()
			defer mu.Unlock()
			if !ok {
				run.failed++
				return
			}
			run.took = append(run.took, took)
			if took > time.Second {
				run.lastSlow = max(run.lastSlow, start.Sub(fault))
			}
		}(time.Now())
		time.Sleep(20 * time.Millisecond)
	}
	wg.Wait()
	return run, w.restore(state)
}
