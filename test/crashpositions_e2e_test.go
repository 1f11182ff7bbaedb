package test

// The state file's "last" and "insert" of a timeline's writer (rule 12's
// check of a later run, rule 13's window) move with every probe of a
// writing primary. They were written only with another change or at a
// clean stop, so a pgdns killed -9 (the OOM killer, a reboot) left them as
// old as its first sight of the writer: a primary then restored in place
// from a base backup taken after that, started at a position between the
// file's "last" and the writes it lost, passed for the same server
// restarted with a window that ends below them, and a token of a lost
// write was answered by a replica cloned from the restored primary. Now
// they are written at most once a second while they move.

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/state"
	"github.com/pgdns/pgdns/internal/testkit"
	"github.com/pgdns/pgdns/zone"
)

func TestTokenOfAWriteLostToARestoreAfterPgdnsCrashed(t *testing.T) {
	t.Parallel()
	b := pgtest.Addrs(t)
	pg := pgtest.New(t, pgtest.Options{IPs: b.IPs(3)})
	n1, n2, n3 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	ctx := context.Background()
	statePath := filepath.Join(t.TempDir(), "state.json")
	listen := fmt.Sprintf("%s:%d", b.IP(53), b.Port())
	crashing := startProcess(t, processConfig(listen, statePath, pg), listen)

	// n3 stops first, so that it never has WAL the restore loses: a
	// replica read past the restored n1 is proven on another branch (rule
	// 1, review 7 H2), and stays aside across a re-clone, which pgdns
	// cannot tell from a restart (G7b). The re-clone below is of a replica
	// pgdns never saw on the dead branch.
	if err := n3.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	// The base backup, taken after pgdns first saw n1 writable (and wrote
	// the file); then a write the restore will lose, well past it.
	backup, err := n1.BaseBackup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lost := writeAndTakeLSN(t, n1.Conn(t), "CREATE TABLE lost AS SELECT repeat('x', 100) AS v FROM generate_series(1, 2000)")
	waitStreaming(t, n2, 1, lost)
	// pgdns probes n1 past the write; its positions reach the file within
	// a second (before: not until another change or a clean stop).
	filePast(t, statePath, lost)
	crashing.signal(t, syscall.SIGKILL)

	// The restore: n1 back from the backup, writable on timeline 1 at the
	// same address, below the write.
	if err := n1.RestoreInPlace(ctx, backup); err != nil {
		t.Fatal(err)
	}
	var has int
	n1.Query(t, "SELECT count(*) FROM pg_class WHERE relname = 'lost'", &has)
	var pos string
	n1.Query(t, "SELECT pg_current_wal_insert_lsn()::text", &pos)
	if has != 0 || parseLSN(t, pos) >= parseLSN(t, lost) {
		t.Fatalf("the restored n1 at %s has the table of the write at %s (%d): nothing to test", pos, lost, has)
	}
	// pgdns restarted from its file sees the restored run before it
	// writes past the token.
	e := attach(t, pg, envOptions{State: statePath})
	// A replica made anew from the restored primary, which writes on past
	// the token's position.
	recloneWritingPast(t, n3, n1, lost, 4000)
	testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "replica.db.local to answer n3", func() ([]string, bool) {
		got := e.ips(t, "replica.db.local.")
		return got, slices.Contains(got, n3.IP)
	})
	for _, name := range []string{"lsn-" + lost + ".replica.db.local.", "lsn-" + lost + "-t1.replica.db.local.",
		"lsn-" + lost + "-t1.prefer-replica.db.local."} {
		e.holds(t, name, time.Second, without(n3.IP), "n3, cloned from the restored n1, which lacks the write of the token (lost with the restore, after pgdns crashed)")
	}
}

// processConfig is the config of a pgdns process (startProcess) in front
// of pg's nodes, answering on listen, with its state file at statePath.
func processConfig(listen, statePath string, pg *pgtest.Cluster) string {
	var hosts []string
	for _, n := range pg.Nodes {
		hosts = append(hosts, n.Addr())
	}
	return fmt.Sprintf(`
dns: {listen: %q, ttl: 1, lsn_wait: 0s}
http: {listen: ""}
probe: {interval: 100ms, timeout: 1s, max_fails: 3, dsn: "user=postgres dbname=postgres sslmode=disable"}
clusters:
  main:
    hosts: [%s]
state: {path: %q}
`, listen, strings.Join(hosts, ", "), statePath)
}

// filePast waits until the state file's last of timeline 1 is at or past
// lsn (written at most a second after pgdns probed it; before, not until
// another change or a clean stop), and says so in the log if it never is:
// the answers that follow show what that costs.
func filePast(t *testing.T, statePath, lsn string) {
	t.Helper()
	var last zone.LSN
	if !testkit.Poll(10*time.Second, 50*time.Millisecond, func() bool {
		m, _, err := state.Load(statePath)
		last = m["main"].Branches[1].Last
		return err == nil && last >= zone.LSN(parseLSN(t, lsn))
	}) {
		t.Logf("the state file's last of timeline 1 stayed at %s, below the lost write's %s", last, lsn)
	}
}

// Review 7, H1: the same with the restore made while pgdns is down, from
// a snapshot of the stopped data directory taken after pgdns saw n1 (and
// wrote its restart window), and pgdns back before the restored n1 writes
// again. Killed, pgdns restarted from the insert position of that window
// and refused too few tokens: the lost write's token was answered by the
// restored n1 (any). Stopped cleanly (the control), its final write kept
// the position it saw.
func TestTokenOfAWriteLostToARestoreWhilePgdnsWasDown(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		sig  syscall.Signal
	}{{"killed", syscall.SIGKILL}, {"stopped", syscall.SIGTERM}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			restoreWhilePgdnsDown(t, c.sig)
		})
	}
}

func restoreWhilePgdnsDown(t *testing.T, sig syscall.Signal) {
	b := pgtest.Addrs(t)
	pg := pgtest.New(t, pgtest.Options{IPs: b.IPs(3)})
	n1, n2, n3 := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	ctx := context.Background()
	statePath := filepath.Join(t.TempDir(), "state.json")
	listen := fmt.Sprintf("%s:%d", b.IP(53), b.Port())
	cfg := processConfig(listen, statePath, pg)
	p := startProcess(t, cfg, listen)
	writeAndTakeLSN(t, n1.Conn(t), "CREATE TABLE t (id serial PRIMARY KEY, v text)")

	// n3 stops first, never to have WAL the restore loses (see
	// TestTokenOfAWriteLostToARestoreAfterPgdnsCrashed).
	if err := n3.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	// The snapshot, then n1 back: a new run, whose window the file holds.
	snap := snapshotDir(t, n1)
	p.waitAnswering(t, n1.IP)
	testkit.Eventually(t, 10*time.Second, 50*time.Millisecond, "the state file to hold n1's new run as timeline 1's writer", func() (string, bool) {
		m, _, err := state.Load(statePath)
		b := m["main"].Branches[1]
		return fmt.Sprintf("%+v %v", b, err), err == nil && b.Upto != 0
	})

	// The client's write, after the snapshot; pgdns probes n1 past it.
	conn := n1.Conn(t)
	writeAndTakeLSN(t, conn, "INSERT INTO t (v) SELECT repeat('w', 200) FROM generate_series(1, 500)")
	lost := writeAndTakeLSN(t, conn, "INSERT INTO t (v) VALUES ('lost to the restore')")
	waitStreaming(t, n2, 1, lost)
	filePast(t, statePath, lost)
	p.signal(t, sig)
	if sig != syscall.SIGKILL {
		<-p.done
	}

	// The restore while pgdns is away, and pgdns back with its file.
	restoreInPlace(t, n1, snap)
	var has int
	n1.Query(t, "SELECT count(*) FROM t WHERE v = 'lost to the restore'", &has)
	if has != 0 {
		t.Fatalf("the restored n1 has the write (%d rows)", has)
	}
	p = startProcess(t, cfg, listen)
	p.waitAnswering(t, n1.IP)

	// n3 made anew from the restored n1, which writes on past the token.
	recloneWritingPast(t, n3, n1, lost, 3000)
	ips := func(name string) []string { return answerIPs(t, query(t, "udp", listen, name, dns.TypeA)) }
	testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "replica.db.local to answer n3", func() ([]string, bool) {
		got := ips("replica.db.local.")
		return got, slices.Contains(got, n3.IP)
	})
	bad := map[string]string{n1.IP: "n1, restored from before the write", n3.IP: "n3, cloned from the restored n1"}
	var name, why string
	if n, held := testkit.Holds(2*time.Second, 50*time.Millisecond, func() bool {
		for _, name = range []string{"lsn-" + lost + ".any.db.local.", "lsn-" + lost + "-t1.any.db.local.",
			"lsn-" + lost + ".prefer-replica.db.local.", "lsn-" + lost + "-t1.replica.db.local."} {
			for _, ip := range ips(name) {
				if w, ok := bad[ip]; ok {
					why = ip + ": " + w
					return false
				}
			}
		}
		return true
	}); !held {
		t.Fatalf("after %d rounds %s answered %s, which lacks the write of the token", n, name, why)
	}
}
