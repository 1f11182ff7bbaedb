package test

// A logical WAL sender is no standby's own row (decisions.md rule 7, review
// 12b): a subscription named as a standby that streams from no slot
// carries the standby's application name, and became the one row with
// that name, and the synchronous one, once the standby's own sender was
// gone; sync.replica then answered the standby, which lacked a
// remote_apply commit that had returned.

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// pgtestNodeName is the cluster_name pgtest gives the i-th node (0-based)
// at ip: the application name of its WAL receiver.
func pgtestNodeName(i int, ip string) string {
	return fmt.Sprintf("node%d_%s", i+1, strings.ReplaceAll(ip, ".", "_"))
}

// resolveBody returns the body of /v1/resolve for name.
func resolveBody(t *testing.T, e *env, name string) string {
	t.Helper()
	_, body := e.get(t, http.DefaultClient, "/v1/resolve?name="+name, "")
	return body
}

// TestLogicalSenderIsNoStandbysOwn: wal_level=logical, a logical
// subscription (on a cluster of its own) whose walsender carries the
// application name of the physical standby n3, which streams from no slot,
// and synchronous_standby_names naming that name. Then n3's WAL receiver
// freezes (SIGSTOP): its status stays "streaming" from n1, n1's sender for
// it times out (wal_sender_timeout 2s) and the logical sender is the one
// row with the name, and the synchronous one. A remote_apply commit
// returns (the subscriber applied it), n3 lacks it, and sync.replica must
// not answer n3: the logical row is not its own.
func TestLogicalSenderIsNoStandbysOwn(t *testing.T) {
	t.Parallel()
	b := pgtest.Addrs(t)
	ips := b.IPs(4)
	n3name := pgtestNodeName(2, ips[2])
	pg := pgtest.New(t, pgtest.Options{IPs: ips[:3], Conf: []string{
		"wal_level = logical",
		"max_replication_slots = 10",
		"wal_sender_timeout = 2s",
		fmt.Sprintf("synchronous_standby_names = 'FIRST 1 (%s)'", n3name),
	}})
	sub := pgtest.New(t, pgtest.Options{IPs: ips[3:4]})
	n1, n3 := pg.Nodes[0], pg.Nodes[2]
	e := attach(t, pg, envOptions{})
	e.waitFor(t, "replica.db.local.", []string{pg.Nodes[1].IP, n3.IP})
	e.waitFor(t, "sync.replica.db.local.", []string{n3.IP})
	t.Logf("before the subscription: sync.replica TXT %q", e.txt(t, "sync.replica.db.local."))

	n1.Exec(t, "CREATE TABLE lt (id int PRIMARY KEY, v text)")
	n1.Exec(t, "CREATE PUBLICATION lp FOR TABLE lt")
	sub.Nodes[0].Exec(t, "CREATE TABLE lt (id int PRIMARY KEY, v text)")
	sub.Nodes[0].Exec(t, fmt.Sprintf("CREATE SUBSCRIPTION %s CONNECTION 'host=%s port=%d user=postgres dbname=postgres application_name=%s' PUBLICATION lp",
		n3name, n1.IP, n1.Port, n3name))
	// Both senders named n3name stream: n3's and the subscription's.
	testkit.Eventually(t, 30*time.Second, 100*time.Millisecond, "the logical sender to stream", func() (string, bool) {
		var rows string
		n1.Query(t, "SELECT coalesce(string_agg(application_name||':'||state||':'||sync_state||':'||coalesce(slot_name,'-'), ' '), '') FROM pg_stat_replication r LEFT JOIN pg_replication_slots s ON s.active_pid = r.pid", &rows)
		return rows, strings.Count(rows, n3name+":streaming") == 2
	})
	// Which of the two is synchronous is PostgreSQL's pick (the first
	// in its WAL sender array): sync.replica answers n3 only when its
	// physical sender (no database) is the synchronous one.
	var rows, physical string
	n1.Query(t, "SELECT string_agg(r.application_name||':'||r.state||':'||r.sync_state||':'||coalesce(a.datname, 'physical'), ' ') FROM pg_stat_replication r JOIN pg_stat_activity a USING (pid)", &rows)
	n1.Query(t, "SELECT r.sync_state FROM pg_stat_replication r JOIN pg_stat_activity a USING (pid) WHERE a.datname IS NULL AND r.application_name = '"+n3name+"'", &physical)
	t.Logf("n1's senders with the subscription: %s", rows)
	if physical != "sync" {
		e.waitFor(t, "sync.replica.db.local.", nil)
	}
	t.Logf("two senders named %s: sync.replica TXT %q resolve %s", n3name, e.txt(t, "sync.replica.db.local."), resolveBody(t, e, "sync.replica"))

	// Freeze n3's WAL receiver.
	var pid int
	n3.Query(t, "SELECT pid FROM pg_stat_wal_receiver", &pid)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	testkit.Eventually(t, 30*time.Second, 100*time.Millisecond, "n1's sender for n3 to time out", func() (string, bool) {
		n1.Query(t, "SELECT coalesce(string_agg(application_name||':'||state||':'||sync_state, ' '), '') FROM pg_stat_replication", &rows)
		return rows, strings.Count(rows, n3name) == 1
	})
	var status, sender string
	n3.Query(t, "SELECT status, sender_host FROM pg_stat_wal_receiver", &status, &sender)
	t.Logf("n3's receiver frozen: n1's senders %s; n3's pg_stat_wal_receiver status %s from %s", rows, status, sender)

	// A remote_apply commit: the subscriber applies it, n3 cannot.
	conn := n1.Conn(t)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, "SET synchronous_commit = remote_apply"); err != nil {
		t.Fatal(err)
	}
	token := writeAndTakeLSN(t, conn, "INSERT INTO lt VALUES (1, 'acked by the subscriber')")
	var onN3 int
	n3.Query(t, "SELECT count(*) FROM lt", &onN3)
	t.Logf("remote_apply commit at %s returned; rows on n3: %d", token, onN3)

	// pgdns answers from its last probe of the primary (rule 10: the set
	// as of that probe): give it ten intervals to see the sender gone.
	time.Sleep(time.Second)
	wrong := 0
	for i := range 30 {
		got := e.ips(t, "sync.replica.db.local.")
		if len(got) > 0 {
			wrong++
			if wrong == 1 {
				t.Logf("lookup %d: sync.replica answered %v, TXT %q", i, got, e.txt(t, "sync.replica.db.local."))
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("after: resolve sync.replica %s", resolveBody(t, e, "sync.replica"))
	if onN3 != 0 {
		t.Fatalf("n3 has the remote_apply commit although its WAL receiver is frozen: nothing to test")
	}
	if why := resolveReason(t, e, "sync.replica", n3.Addr()); !strings.Contains(why, "no WAL sender with its application name") {
		t.Errorf("/v1/resolve leaves n3 out of sync.replica with %q, want that the primary has no WAL sender with its application name", why)
	}
	if wrong > 0 {
		t.Errorf("sync.replica answered n3 %s in %d of 30 lookups while its WAL receiver was frozen and its own WAL sender gone: the row taken for its own is the logical subscription's (same application name), and n3 lacks a remote_apply commit that returned", n3.IP, wrong)
	}
}
