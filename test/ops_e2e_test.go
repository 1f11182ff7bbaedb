package test

// Operating pgdns: faults under load, reload, secrets.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/app/apptest"
	"github.com/pgdns/pgdns/internal/config"
	"github.com/pgdns/pgdns/internal/pgtest"
)

// TestFaultsUnderLoad: while a load loop queries steadily, the primary is
// stopped and a replica promoted, another replica frozen and thawed, and
// one restarted. Once ready there is no SERVFAIL, and no answer names a
// host in a role it did not have.
func TestFaultsUnderLoad(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	p, r1, r2 := e.ip(0), e.ip(1), e.ip(2)
	e.waitFor(t, "replica.db.local.", []string{r1, r2})
	ctx := context.Background()

	var (
		mu        sync.Mutex
		problems  []string
		promoted  atomic.Bool // set once primary.db.local has answered r1
		queries   atomic.Int64
		stopLoad  = make(chan struct{})
		loadDone  = make(chan struct{})
		sawNewPri atomic.Bool
	)
	report := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	go func() {
		defer close(loadDone)
		c := &dns.Client{Timeout: time.Second}
		for i := 0; i < 100_000; i++ { // bounded; stopped long before
			select {
			case <-stopLoad:
				return
			default:
			}
			for _, name := range []string{"primary.db.local.", "replica.db.local.", "lag-1s.replica.db.local."} {
				req := new(dns.Msg)
				req.SetQuestion(name, dns.TypeA)
				m, _, err := c.Exchange(req, e.app.DNSAddr())
				queries.Add(1)
				if err != nil {
					report("%s: %v", name, err)
					continue
				}
				if m.Rcode != dns.RcodeSuccess {
					report("%s: %s", name, dns.RcodeToString[m.Rcode])
					continue
				}
				for _, rr := range m.Answer {
					ip := rr.(*dns.A).A.String()
					switch {
					case name == "primary.db.local." && ip == r1:
						sawNewPri.Store(true)
						promoted.Store(true)
					case name == "primary.db.local." && ip == p && promoted.Load():
						report("the old primary answered as primary after the new one")
					case name == "primary.db.local." && ip != p:
						report("%s answered as primary", ip)
					case name != "primary.db.local." && ip == p:
						report("the primary %s answered as a replica", ip)
					case name != "primary.db.local." && ip == r1 && promoted.Load():
						report("the promoted %s answered as a replica", ip)
					}
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()

	time.Sleep(500 * time.Millisecond)
	frozen := e.pg.Nodes[2]
	if err := frozen.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if err := frozen.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "replica.db.local.", []string{r1, r2})
	if err := frozen.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	if err := frozen.Start(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "replica.db.local.", []string{r1, r2})

	if err := e.pg.Nodes[0].Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	if err := e.pg.Nodes[1].Promote(ctx); err != nil {
		t.Fatal(err)
	}
	took := e.waitFor(t, "primary.db.local.", []string{r1})
	time.Sleep(500 * time.Millisecond)
	close(stopLoad)
	<-loadDone
	t.Logf("%d queries under faults; the promoted replica was primary %v after the promote", queries.Load(), took)
	if !sawNewPri.Load() {
		t.Error("the load loop never saw the new primary")
	}
	for _, pr := range problems {
		t.Error(pr)
	}
}

// TestReload: a new host list takes effect without dropping a query; a bad
// file is rejected and the old configuration stays.
func TestReload(t *testing.T) {
	t.Parallel()
	ips := pgtest.Addrs(t).IPs(3)
	p, r1, r2 := ips[0], ips[1], ips[2]
	pg := pgtest.New(t, pgtest.Options{IPs: []string{p, r1, r2}})
	yaml := func(hosts ...string) string {
		return fmt.Sprintf("dns: {listen: \"127.0.0.1:0\"}\nhttp: {listen: \"\"}\nprobe: {interval: 100ms, dsn: \"user=postgres sslmode=disable\"}\nclusters:\n  main:\n    hosts: [%s]\n",
			strings.Join(hosts, ", "))
	}
	a, _, logs := apptest.Start(t, yaml(p+":5432", r1+":5432"))
	e := &env{pg: pg, app: a, logs: logs}
	e.waitFor(t, "replica.db.local.", []string{r1})

	var failures atomic.Int64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		c := &dns.Client{Timeout: time.Second}
		for i := 0; i < 100_000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			req := new(dns.Msg)
			req.SetQuestion("primary.db.local.", dns.TypeA)
			if m, _, err := c.Exchange(req, a.DNSAddr()); err != nil || m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 {
				failures.Add(1)
			}
			time.Sleep(time.Millisecond)
		}
	}()

	load := func(text string) *config.Config {
		path := filepath.Join(t.TempDir(), "pgdns.yaml")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	if err := a.Reload(load(yaml(p+":5432", r1+":5432", r2+":5432"))); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "replica.db.local.", []string{r1, r2})
	// A configuration that fails validation is rejected; the old one stays.
	bad := load(yaml(p + ":5432"))
	bad.Probe.DSN = "sslmode=sometimes"
	if err := a.Reload(bad); err == nil {
		t.Fatal("a configuration Check rejects was applied")
	}
	e.waitFor(t, "replica.db.local.", []string{r1, r2})
	close(stop)
	<-done
	if n := failures.Load(); n != 0 {
		t.Fatalf("%d queries failed during reloads", n)
	}
	if !strings.Contains(logs.String(), "configuration reloaded") {
		t.Errorf("reload not logged:\n%s", logs)
	}
}

// TestSecretsNeverLeak: the probe password appears nowhere pgdns writes:
// logs, /v1/hosts, /v1/resolve, the pg-status endpoints, metrics, DNS.
func TestSecretsNeverLeak(t *testing.T) {
	t.Parallel()
	const canary = "canary-7f3a9c"
	b := pgtest.Addrs(t)
	pg := pgtest.New(t, pgtest.Options{IPs: b.IPs(2),
		HBA: []string{"host all watcher 127.0.0.0/8 scram-sha-256"}})
	pg.Nodes[0].Exec(t, "CREATE ROLE watcher LOGIN PASSWORD 'the-right-one' IN ROLE pg_monitor")
	a, _, logs := apptest.Start(t, fmt.Sprintf(`
dns: {listen: "127.0.0.1:0"}
http: {listen: "127.0.0.1:0"}
probe: {interval: 100ms, dsn: "user=watcher password=%s dbname=postgres sslmode=disable"}
clusters:
  main:
    hosts: [%s, %s, %s]
`, canary, pg.Nodes[0].Addr(), pg.Nodes[1].Addr(), b.Addr(3, 5432)))
	e := &env{pg: pg, app: a, logs: logs}
	e.eventually(t, "/v1/hosts", "", func(_ int, body string) bool {
		return strings.Count(body, `"role":"down"`) == 3 && strings.Contains(body, "password authentication failed")
	})
	var seen []string
	for _, path := range []string{"/v1/hosts", "/v1/resolve?name=any", "/master", "/hosts", "/metrics", "/readyz"} {
		_, body := e.get(t, http.DefaultClient, path, "application/json")
		seen = append(seen, body)
	}
	seen = append(seen, e.txt(t, "any.db.local.")...)
	seen = append(seen, logs.String())
	for i, text := range seen {
		if strings.Contains(text, canary) {
			t.Errorf("the password leaked (output %d): %s", i, text)
		}
	}
	if !strings.Contains(logs.String(), "password authentication failed") {
		t.Errorf("the failure itself was not logged:\n%s", logs)
	}
}
