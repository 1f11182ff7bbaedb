package main

import (
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// notifyMsg is one datagram pgdns sent to NOTIFY_SOCKET and when it came.
type notifyMsg struct {
	state string
	at    time.Time
}

// notifySocket plays systemd's end of sd_notify: a unixgram socket whose
// datagrams are delivered on the channel.
func notifySocket(t *testing.T) (string, <-chan notifyMsg) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	msgs := make(chan notifyMsg, 16)
	go func() {
		defer close(msgs)
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			msgs <- notifyMsg{state: string(buf[:n]), at: time.Now()}
		}
	}()
	t.Cleanup(func() { conn.Close() })
	return path, msgs
}

// next waits for the next notification.
func next(t *testing.T, msgs <-chan notifyMsg, what string) notifyMsg {
	t.Helper()
	select {
	case m := <-msgs:
		return m
	case <-time.After(20 * time.Second):
		t.Fatalf("no sd_notify message while waiting for %s", what)
		return notifyMsg{}
	}
}

// TestSdNotify runs pgdns as systemd would with Type=notify: READY=1 comes
// only once the first probe round has finished (/readyz is 200, DNS
// answers), never while /readyz still said 503; SIGHUP brings RELOADING=1
// with MONOTONIC_USEC, then READY=1 again; SIGTERM brings STOPPING=1 and a
// clean exit. A host that accepts connections and never answers holds the
// first round up for probe.timeout, so that the not-ready window is seen.
func TestSdNotify(t *testing.T) {
	t.Parallel()
	b := pgtest.Addrs(t)
	pg := pgtest.New(t, pgtest.Options{IPs: b.IPs(1)})
	hung := b.Addr(2, 5432)
	testkit.SilentListener(t, hung)

	// One live host of two is no majority: pin the cluster's identity.
	var sysID string
	pg.Nodes[0].Query(t, "SELECT system_identifier::text FROM pg_control_system()", &sysID)

	dnsAddr, httpAddr := b.Addr(53, 5353), b.Addr(53, 8080)
	path := writeConfig(t, fmt.Sprintf("dns: {listen: %q}\nhttp: {listen: %q}\n"+
		"probe: {interval: 100ms, timeout: 2s, dsn: \"user=postgres dbname=postgres sslmode=disable\"}\n"+
		"clusters:\n  main:\n    hosts: [%s, %s]\n    system_identifier: %q\n", dnsAddr, httpAddr, pg.Nodes[0].Addr(), hung, sysID))
	sock, msgs := notifySocket(t)
	cmd, logs := startProcess(t, path, "NOTIFY_SOCKET="+sock)

	// Poll /readyz until READY=1 arrives; remember when the last 503 was
	// asked for. READY=1 received before that request went out would be a
	// lie to systemd.
	client := &http.Client{Timeout: time.Second}
	var lastNotReady time.Time
	var ready notifyMsg
	if !testkit.Poll(20*time.Second, 10*time.Millisecond, func() bool {
		select {
		case ready = <-msgs:
			return true
		default:
		}
		sent := time.Now()
		if resp, err := client.Get("http://" + httpAddr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable {
				lastNotReady = sent
			}
		}
		return false
	}) {
		t.Fatal("no READY=1 within 20 s")
	}
	if ready.state != "READY=1" {
		t.Fatalf("first message %q, want READY=1", ready.state)
	}
	if lastNotReady.IsZero() {
		t.Fatal("/readyz was never seen 503: the test did not watch the not-ready window")
	}
	if ready.at.Before(lastNotReady) {
		t.Fatalf("READY=1 came %v before a /readyz request that got 503", lastNotReady.Sub(ready.at))
	}
	resp, err := client.Get("http://" + httpAddr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("after READY=1 /readyz is %d", resp.StatusCode)
	}
	req := new(dns.Msg)
	req.SetQuestion("primary.db.local.", dns.TypeA)
	m, _, err := (&dns.Client{Timeout: time.Second}).Exchange(req, dnsAddr)
	if err != nil || m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 {
		t.Fatalf("after READY=1 primary.db.local: %v %v", m, err)
	}
	t.Logf("READY=1 %v after the last 503 from /readyz", ready.at.Sub(lastNotReady).Round(time.Millisecond))

	// Reload: RELOADING=1 with the monotonic time systemd (≥ 253,
	// Type=notify-reload) asks for, then READY=1 once the new hosts are
	// probed.
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if m := next(t, msgs, "RELOADING=1"); !strings.HasPrefix(m.state, "RELOADING=1\nMONOTONIC_USEC=") {
		t.Fatalf("on SIGHUP: %q", m.state)
	}
	reloaded := next(t, msgs, "READY=1 after the reload")
	if reloaded.state != "READY=1" {
		t.Fatalf("after the reload: %q", reloaded.state)
	}
	// The log line reaches us through a pipe, maybe after the datagram;
	// its timestamp, taken in pgdns before READY=1 was sent, tells the order.
	if at := logTime(t, logs, "configuration reloaded"); reloaded.at.Before(at) {
		t.Fatalf("READY=1 came %v before the reload finished", at.Sub(reloaded.at))
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if m := next(t, msgs, "STOPPING=1"); m.state != "STOPPING=1" {
		t.Fatalf("on SIGTERM: %q", m.state)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
}

// logTime waits for a log line with msg and returns its time.
func logTime(t *testing.T, logs *testkit.Buffer, msg string) time.Time {
	t.Helper()
	line := testkit.Eventually(t, 10*time.Second, 20*time.Millisecond, "log line "+msg, func() (string, bool) {
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, `msg="`+msg+`"`) {
				return line, true
			}
		}
		return "", false
	})
	stamp, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
	at, err := time.Parse(time.RFC3339Nano, stamp)
	if err != nil {
		t.Fatalf("log line %q: %v", line, err)
	}
	return at
}
