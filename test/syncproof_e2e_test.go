package test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// TestSyncProof: how pgdns ties a replica to the primary's WAL sender row,
// which both the sync filter and "replicas: async" rest on (review 2, R16,
// R2, R7). A replica is proven synchronous, or asynchronous, only when its
// own WAL receiver streams from the primary and exactly one row of the
// primary's pg_stat_replication is attributable to it by an application
// name read whole or by slot; anything else is unknown, which neither
// sync names nor "replicas: async" answer. One cluster for all three:
// the primary, r1 and r2 configured, r3 a standby pgdns is not told about.
func TestSyncProof(t *testing.T) {
	t.Parallel()
	b := pgtest.Addrs(t)
	pg := pgtest.New(t, pgtest.Options{IPs: b.IPs(4)})
	p, r1, r2, r3 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2], pg.Nodes[3]
	hosts := []string{p.Addr(), r1.Addr(), r2.Addr()}
	all := attach(t, pg, envOptions{Hosts: hosts})
	async := attach(t, pg, envOptions{Hosts: hosts, Replicas: "async"})
	all.waitFor(t, "replica.db.local.", []string{r1.IP, r2.IP})

	setConninfo := func(t *testing.T, n *pgtest.Node, conninfo string) {
		t.Helper()
		n.Exec(t, "ALTER SYSTEM SET primary_conninfo = '"+strings.ReplaceAll(conninfo, "'", "''")+"'")
		n.Exec(t, "SELECT pg_reload_conf()")
	}
	syncNames := func(t *testing.T, names string, want ...string) {
		t.Helper()
		p.Exec(t, "ALTER SYSTEM SET synchronous_standby_names = '"+strings.ReplaceAll(names, "'", "''")+"'")
		p.Exec(t, "SELECT pg_reload_conf()")
		testkit.Eventually(t, 30*time.Second, 20*time.Millisecond, "the primary's synchronous standbys", func() (string, bool) {
			var got string
			p.Query(t, "SELECT coalesce(string_agg(application_name, ',' ORDER BY application_name), '') FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum')", &got)
			return got, got == strings.Join(want, ",")
		})
	}
	streaming := func(t *testing.T, n *pgtest.Node, host string) {
		t.Helper()
		testkit.Eventually(t, 30*time.Second, 20*time.Millisecond, n.Name+"'s WAL receiver", func() (string, bool) {
			var got string
			n.Query(t, "SELECT coalesce((SELECT status || ' ' || sender_host FROM pg_stat_wal_receiver), '')", &got)
			return got, got == "streaming "+host
		})
	}
	// reason waits until /v1/resolve of name excludes addr for a reason
	// holding each of want.
	reason := func(t *testing.T, e *env, name, addr string, want ...string) {
		t.Helper()
		testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "/v1/resolve?name="+name+" on "+addr, func() (string, bool) {
			_, body := e.get(t, http.DefaultClient, "/v1/resolve?name="+url.QueryEscape(name), "")
			i := strings.Index(body, `{"addr":"`+addr+`","reason":"`)
			if i < 0 {
				return body, false
			}
			return body[i:], containsAll(body[i:i+strings.Index(body[i:], "}")], want)
		})
	}
	// note waits until /v1/hosts shows addr with a note holding each of want.
	note := func(t *testing.T, e *env, addr string, want ...string) {
		t.Helper()
		testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "/v1/hosts on "+addr, func() (string, bool) {
			_, body := e.get(t, http.DefaultClient, "/v1/hosts", "")
			i := strings.Index(body, `"addr":"`+addr+`"`)
			if i < 0 {
				return body, false
			}
			h := body[i : i+strings.Index(body[i:], "}")]
			return h, containsAll(h, want)
		})
	}

	t.Run("R16: an application name with a space is read whole", func(t *testing.T) {
		setConninfo(t, r1, "host="+p.IP+" port="+strconv.Itoa(p.Port)+" user=postgres application_name='my standby'")
		streaming(t, r1, p.IP)
		syncNames(t, `FIRST 1 ("my standby")`, "my standby")
		// Before: the name read as "my", no row had it, and "replicas:
		// async" was sure r1 was not synchronous: it answered r1.
		async.waitFor(t, "replica.db.local.", []string{r2.IP})
		reason(t, async, "replica", r1.Addr(), "synchronous standby (replicas: async)")
		// And the sync filter proves it by its own row (before: empty).
		all.waitFor(t, "sync.replica.db.local.", []string{r1.IP})
	})

	t.Run("R2: a cascading standby is not proven by another standby's row with its name", func(t *testing.T) {
		// r3, which pgdns is not told about, streams from the primary as
		// "s3"; r2 cascades from r1 under the same name, then from r3.
		setConninfo(t, r3, "host="+p.IP+" port="+strconv.Itoa(p.Port)+" user=postgres application_name=s3")
		setConninfo(t, r2, "host="+r1.IP+" port="+strconv.Itoa(r1.Port)+" user=postgres application_name=s3")
		streaming(t, r2, r1.IP)
		streaming(t, r3, p.IP)
		syncNames(t, "FIRST 1 (s3)", "s3")
		// Before: sync.replica answered r2 (sync=true).
		all.waitFor(t, "sync.replica.db.local.", nil)
		// r1 is listed and in recovery: a standby's WAL senders are never
		// synchronous, so r2 is provably async (review 5, F8; before, sync
		// unknown, and "replicas: async" answered r1 alone).
		reason(t, all, "sync.replica", r2.Addr(),
			"not a synchronous standby: its WAL receiver streams from "+r1.Addr()+", a standby")
		async.waitFor(t, "replica.db.local.", []string{r1.IP, r2.IP})
		// Cascading from r3, which pgdns is not told about: unknown, which
		// fails closed for "replicas: async" too, and /v1/resolve says so
		// (before: "synchronous standby").
		setConninfo(t, r2, "host="+r3.IP+" port="+strconv.Itoa(r3.Port)+" user=postgres application_name=s3")
		streaming(t, r2, r3.IP)
		reason(t, all, "sync.replica", r2.Addr(),
			"sync unknown: its WAL receiver streams from "+r3.IP+":"+strconv.Itoa(r3.Port)+", not from the primary "+p.Addr())
		async.waitFor(t, "replica.db.local.", []string{r1.IP})
		note(t, async, r2.Addr(), `"sync_standby":true`, "sync unknown: its WAL receiver streams from", "counted as synchronous")
		reason(t, async, "replica", r2.Addr(), "sync unknown: its WAL receiver streams from "+r3.IP, "counted as synchronous (replicas: async)")
		r2.Follow(t, p)
		streaming(t, r2, p.IP)
	})

	t.Run("R7: a replica without a WAL receiver is not proven by pg_receivewal from its address", func(t *testing.T) {
		bin, err := pgtest.BinDir()
		if err != nil {
			t.Fatal(err)
		}
		// r1's receiver stops: it is pointed at a port nobody listens on.
		setConninfo(t, r1, "host="+p.IP+" port=1 user=postgres application_name='my standby'")
		testkit.Eventually(t, 30*time.Second, 20*time.Millisecond, "r1 without a WAL receiver", func() (string, bool) {
			var got string
			r1.Query(t, "SELECT coalesce((SELECT status FROM pg_stat_wal_receiver WHERE status = 'streaming'), '')", &got)
			return got, got == ""
		})
		// pg_receivewal reaches the primary from r1's address, through a
		// proxy that dials from there (as on r1's own machine).
		proxy := sourceProxy(t, b.IP(10)+":0", r1.IP, p.Addr())
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		host, port, _ := net.SplitHostPort(proxy)
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "pg_receivewal"), "-D", t.TempDir(), "--synchronous", "-n",
			"-d", "host="+host+" port="+port+" user=postgres")
		var logs testkit.Buffer
		cmd.Stdout, cmd.Stderr = &logs, &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cancel(); _ = cmd.Wait() }()
		syncNames(t, "FIRST 1 (pg_receivewal)", "pg_receivewal")
		var addr string
		p.Query(t, "SELECT host(client_addr) FROM pg_stat_replication WHERE application_name = 'pg_receivewal'", &addr)
		if addr != r1.IP {
			t.Fatalf("pg_receivewal's row comes from %s, want %s (%s)", addr, r1.IP, logs.String())
		}
		// Before: sync.replica answered r1 (its "own" row: pg_receivewal's).
		all.waitFor(t, "sync.replica.db.local.", nil)
		reason(t, all, "sync.replica", r1.Addr(), "sync unknown: it")
		note(t, all, r1.Addr(), `"sync_standby":true`, `"note":"sync unknown: it`)
		// "replicas: async" leaves r1 out (it might be synchronous); r2's
		// own row says async.
		async.waitFor(t, "replica.db.local.", []string{r2.IP})
		note(t, async, r1.Addr(), "sync unknown: ", "counted as synchronous")
	})
}

// sourceProxy listens on listen and forwards each connection to target,
// dialled from the address source: the server sees its client at source.
// It closes when the test ends.
func sourceProxy(t *testing.T, listen, source, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}, Timeout: 5 * time.Second}
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := d.Dial("tcp", target)
			if err != nil {
				client.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, client, server)
			mu.Unlock()
			go func() { _, _ = io.Copy(server, client); server.Close() }()
			go func() { _, _ = io.Copy(client, server); client.Close() }()
		}
	}()
	return ln.Addr().String()
}
