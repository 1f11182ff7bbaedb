package test

import (
	"net"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// newProxiedEnv starts a primary (the test block's .11) and replicas (.12
// on), runs setup on the primary, starts pgdns on the block's .53 at
// dnsPort and waits until it answers the primary and every replica: the
// common ground of the PgBouncer and HAProxy tests, whose proxies ask
// pgdns at an address of their own.
func newProxiedEnv(t *testing.T, replicas, dnsPort int, setup string) (*env, *pgtest.Block, []string) {
	t.Helper()
	b := pgtest.Addrs(t)
	e := newEnvIn(t, b, envOptions{Nodes: 1 + replicas, Listen: b.IP(53) + ":" + strconv.Itoa(dnsPort)})
	e.pg.Nodes[0].Exec(t, setup)
	ips := b.IPs(1 + replicas)
	if replicas > 0 {
		e.waitFor(t, "replica.db.local.", ips[1:])
	}
	return e, b, ips
}

// startProxy starts cmd, a proxy running in the foreground (its own
// process group) whose output goes to logs, and waits until every one of
// addrs accepts TCP connections, 10 s at most in all. When the test ends
// it is stopped with SIGTERM (SIGKILL 5 s later) and the last tail bytes
// of its output are logged if the test failed, or always with
// logVerbose under -v.
func startProxy(t *testing.T, name string, cmd *exec.Cmd, logs *testkit.Buffer, tail int, logVerbose bool, addrs ...string) {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() || (logVerbose && testing.Verbose()) {
			t.Logf("%s log:\n%s", name, logTail(logs.String(), tail))
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for _, addr := range addrs {
		var err error
		if !testkit.Poll(time.Until(deadline), 20*time.Millisecond, func() bool {
			var c net.Conn
			if c, err = net.DialTimeout("tcp", addr, time.Second); err == nil {
				c.Close()
				return true
			}
			select {
			case <-exited:
				t.Fatalf("%s exited: %s", name, logs.String())
			default:
			}
			return false
		}) {
			t.Fatalf("%s does not listen on %s: %v\n%s", name, addr, err, logs.String())
		}
	}
}

// logTail is the last n bytes of s.
func logTail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
