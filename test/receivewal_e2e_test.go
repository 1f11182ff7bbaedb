package test

// A physical replication client that is no standby is no standby's own
// row (decisions.md rule 7, review 12b finding 2): pg_receivewal
// --synchronous given a standby's application name became the one row
// with that name, and the synchronous one, once the standby's own sender
// was gone; sync.replica then answered the standby, which had not received
// a synchronous_commit=on commit that had returned. pg_receivewal reports
// no apply position (replay_lsn NULL), which a standby's WAL receiver
// always does.

import (
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// TestReceivewalIsNoStandbysOwn: pg_receivewal --synchronous with the
// application name of standby n3, and synchronous_standby_names =
// 'FIRST 1 (n3)'. n3 streams from no slot ("application name"), or from
// slot n3_slot, which pg_receivewal -S takes once n3's sender is gone
// ("slot"). n3's WAL receiver freezes (SIGSTOP): its status stays
// "streaming" from n1, n1's sender for it times out, and pg_receivewal's
// row is the one row with n3's name (and slot), the synchronous one. A
// synchronous_commit=on commit returns that n3 has not received:
// sync.replica must not answer n3, and says why.
func TestReceivewalIsNoStandbysOwn(t *testing.T) {
	t.Parallel()
	for _, slot := range []bool{false, true} {
		name := "application name"
		if slot {
			name = "slot"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			receivewalNamedAsAStandby(t, slot)
		})
	}
}

func receivewalNamedAsAStandby(t *testing.T, slot bool) {
	ips := pgtest.Addrs(t).IPs(3)
	n3name := pgtestNodeName(2, ips[2])
	pg := pgtest.New(t, pgtest.Options{IPs: ips, Conf: []string{
		"wal_sender_timeout = 2s",
		"synchronous_standby_names = 'FIRST 1 (" + n3name + ")'",
	}})
	n1, n3 := pg.Nodes[0], pg.Nodes[2]
	var rows string
	senders := "SELECT coalesce(string_agg(application_name||':'||state||':'||sync_state||':'||coalesce(replay_lsn::text, 'no-replay')||':'||coalesce(s.slot_name, 'no-slot'), ' '), '') FROM pg_stat_replication r LEFT JOIN pg_replication_slots s ON s.active_pid = r.pid"
	recvArgs := []string{}
	if slot {
		n1.Exec(t, "SELECT pg_create_physical_replication_slot('n3_slot')")
		n3.Exec(t, "ALTER SYSTEM SET primary_slot_name = 'n3_slot'")
		n3.Exec(t, "SELECT pg_reload_conf()")
		testkit.Eventually(t, 30*time.Second, 100*time.Millisecond, "n3 to stream from its slot", func() (string, bool) {
			n1.Query(t, senders, &rows)
			return rows, strings.Contains(rows, n3name+":streaming:sync:") && strings.Contains(rows, ":n3_slot")
		})
		recvArgs = append(recvArgs, "-S", "n3_slot")
	}
	e := attach(t, pg, envOptions{})
	e.waitFor(t, "sync.replica.db.local.", []string{n3.IP})
	bin, err := pgtest.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	// pg_receivewal as the synchronous standby: a remote_apply commit would
	// wait for ever (it reports no apply position), so every wait below is
	// bounded, and the process is killed by its pid at cleanup.
	cmd := exec.Command(bin+"/pg_receivewal", append(recvArgs, "-D", t.TempDir(), "--synchronous", "-s", "1", "-d",
		"host="+n1.IP+" port=5432 user=postgres application_name="+n3name)...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	start := func() {
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); t.Logf("pg_receivewal: %s", out.String()) })
	}
	if !slot {
		start()
		testkit.Eventually(t, 30*time.Second, 100*time.Millisecond, "pg_receivewal to stream", func() (string, bool) {
			n1.Query(t, senders, &rows)
			return rows, strings.Count(rows, n3name+":streaming") == 2
		})
	}
	var pid int
	n3.Query(t, "SELECT pid FROM pg_stat_wal_receiver", &pid)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	if slot { // n3's slot is free once its sender is gone
		testkit.Eventually(t, 30*time.Second, 100*time.Millisecond, "n1's sender for n3 to time out", func() (string, bool) {
			n1.Query(t, senders, &rows)
			return rows, !strings.Contains(rows, n3name)
		})
		start()
	}
	want := n3name + ":streaming:sync:no-replay"
	if slot {
		want += ":n3_slot"
	}
	testkit.Eventually(t, 30*time.Second, 100*time.Millisecond, "pg_receivewal the one sender with n3's name", func() (string, bool) {
		n1.Query(t, senders, &rows)
		return rows, strings.Count(rows, n3name) == 1 && strings.Contains(rows, want)
	})
	conn := n1.Conn(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := conn.Exec(ctx, "SET synchronous_commit = on"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE acked_by_receivewal AS SELECT 1 AS x"); err != nil {
		t.Fatal(err)
	}
	var lsn string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	var onN3 int
	n3.Query(t, "SELECT coalesce((pg_last_wal_receive_lsn() >= '"+lsn+"'::pg_lsn)::int, 0)", &onN3)
	if onN3 != 0 {
		t.Fatalf("n3, its WAL receiver stopped, has received %s: the test proves nothing", lsn)
	}
	// Probed many times over (interval 100ms) since the commit returned.
	if passed, ok := testkit.Holds(2*time.Second, 50*time.Millisecond, func() bool {
		return len(e.ips(t, "sync.replica.db.local.")) == 0
	}); !ok {
		t.Errorf("after %d lookups sync.replica answered n3 by pg_receivewal's row (n1's senders %s): n3 lacks a synchronous_commit=on commit %s that returned; TXT %q resolve %s",
			passed, rows, lsn, e.txt(t, "sync.replica.db.local."), resolveBody(t, e, "sync.replica"))
	}
	if body := resolveBody(t, e, "sync.replica"); !strings.Contains(body, "sync unknown") {
		t.Errorf("/v1/resolve does not say why n3 is not answered: %s", body)
	}
	t.Logf("n1's senders %s; commit %s returned, n3 lacks it; resolve %s", rows, lsn, resolveBody(t, e, "sync.replica"))
}
