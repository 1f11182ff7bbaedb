package test

// pgdns as a process of its own, for the tests that must SIGKILL or
// SIGSTOP one instance: the test binary runs itself as pgdns (TestMain),
// through the same config loader and App.Run as cmd/pgdns.

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/app"
	"github.com/pgdns/pgdns/internal/config"
	"github.com/pgdns/pgdns/internal/testkit"
)

// childConfig names, in a child's environment, the config file it serves
// (not PGDNS_...: the config loader would take it for a key).
const childConfig = "APP_TEST_PGDNS_CONFIG"

func TestMain(m *testing.M) {
	if path := os.Getenv(childConfig); path != "" {
		os.Exit(runChild(path))
	}
	os.Exit(m.Run())
}

// runChild is pgdns serving the config at path until SIGTERM or SIGINT.
func runChild(path string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := config.Load(path, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgdns child:", err)
		return 1
	}
	a, err := app.New(cfg, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgdns child:", err)
		return 1
	}
	if err := a.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "pgdns child:", err)
		return 1
	}
	return 0
}

// pgdnsProcess is pgdns running as a child process, answering on addr.
type pgdnsProcess struct {
	addr string
	cmd  *exec.Cmd
	logs *testkit.Buffer
	done chan struct{}
}

// startProcess runs pgdns with yaml as its config file and waits until it
// answers primary.db.local with an address. The process is killed when
// the test ends (continued first, if it was stopped).
func startProcess(t *testing.T, yaml, addr string) *pgdnsProcess {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pgdns.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &pgdnsProcess{addr: addr, cmd: exec.Command(os.Args[0]), logs: &testkit.Buffer{}, done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), childConfig+"="+path)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("pgdns at %s:\n%s", addr, logTail(p.logs.String(), 4000))
		}
	})
	p.waitAnswering(t, "")
	return p
}

// waitAnswering polls until the process answers primary.db.local with
// one address (want, unless want is ""), for at most 20 s.
func (p *pgdnsProcess) waitAnswering(t *testing.T, want string) {
	t.Helper()
	req := new(dns.Msg)
	req.SetQuestion("primary.db.local.", dns.TypeA)
	var m *dns.Msg
	var err error
	if !testkit.Poll(20*time.Second, 20*time.Millisecond, func() bool {
		m, _, err = (&dns.Client{Timeout: 300 * time.Millisecond}).Exchange(req, p.addr)
		if err == nil && m.Rcode == dns.RcodeSuccess && len(m.Answer) == 1 {
			if a, ok := m.Answer[0].(*dns.A); ok && (want == "" || a.A.String() == want) {
				return true
			}
		}
		select {
		case <-p.done:
			t.Fatalf("pgdns at %s exited:\n%s", p.addr, p.logs.String())
		default:
		}
		return false
	}) {
		t.Fatalf("pgdns at %s does not answer primary.db.local with %q (%v, %v):\n%s", p.addr, want, m, err, logTail(p.logs.String(), 4000))
	}
}

// signal sends sig to the process: SIGSTOP freezes it (its sockets stay
// open, queries go unanswered), SIGKILL ends it (queries are refused).
func (p *pgdnsProcess) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%v to pgdns at %s: %v", sig, p.addr, err)
	}
	if sig == syscall.SIGKILL {
		<-p.done
	}
}
