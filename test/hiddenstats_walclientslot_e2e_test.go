package test

// A probe role without pg_monitor, a failover, and a WAL client that is
// no standby on the slot of the orphan (found in review 13a).

import (
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// TestWALClientOnTheOrphansSlotProvesNoFollower: a WAL client that is no
// standby proves no standby its follower by its slot (decisions.md rules 1
// and 7). n3 streams from n1 on slot n3; n1 freezes (n3's WAL receiver
// stays connected to it until wal_receiver_timeout), n2 is promoted to
// timeline 2 and writes; on n2 a slot is named n3 and a WAL client streams
// from it: pg_recvlogical on a logical slot, or pg_receivewal -S (as
// pg_basebackup -S -X stream does, rebuilding n3 into a new directory
// while the old one serves). The probe role, without pg_monitor, reads no
// WAL receiver's timeline nor any sender's positions, so n3, its lower
// bound on timeline 1, is answered only when one of n2's WAL senders is
// provably its own, by its slot: the client's must not be. Before (review
// 13a), replica, prefer-replica and any answered n3, the orphan of
// timeline 1 without n2's writes, from about a second after the client
// started, every lookup.
func TestWALClientOnTheOrphansSlotProvesNoFollower(t *testing.T) {
	t.Parallel()
	for _, client := range []string{"pg_recvlogical", "pg_receivewal"} {
		t.Run(client, func(t *testing.T) {
			t.Parallel()
			borrowedSlot(t, client, "")
		})
	}
}

// borrowedSlot is that case with client on the slot: "pg_recvlogical"
// on a logical one, "pg_receivewal" on a physical one, or a
// pg_receivewal given another application name than its own; the probe
// role has grant ("" none, else a GRANT's object and role, such as
// "EXECUTE ON FUNCTION pg_read_file(text, bigint, bigint, boolean)").
func borrowedSlot(t *testing.T, client, grant string) {
	bin, err := pgtest.BinDir()
	testkit.Require(t, err)
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(3), Conf: []string{"wal_level = logical"}})
	old, promoted, orphan := pg.Nodes[0], pg.Nodes[1], pg.Nodes[2]
	old.Exec(t, "CREATE ROLE pgdns LOGIN")
	if grant != "" {
		old.Exec(t, "GRANT "+grant+" TO pgdns")
	}
	old.Exec(t, "SELECT pg_create_physical_replication_slot('"+orphan.Name+"')")
	orphan.Exec(t, "ALTER SYSTEM SET primary_slot_name = '"+orphan.Name+"'")
	orphan.Exec(t, "SELECT pg_reload_conf()")
	testkit.Eventually(t, 30*time.Second, 50*time.Millisecond, "the orphan streaming from its slot on n1", func() (int, bool) {
		var n int
		old.Query(t, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '"+orphan.Name+"' AND active", &n)
		return n, n == 1
	})
	e := attach(t, pg, envOptions{DSN: leastPrivilege})
	if strings.Contains(grant, "pg_read_all_stats") {
		e.waitFor(t, "replica.db.local.", []string{promoted.IP, orphan.IP})
	} else {
		// Without pg_read_all_stats no replica is proven to follow the
		// primary (decisions.md rule 1).
		e.waitFor(t, "primary.db.local.", []string{old.IP})
		waitHiddenAside(t, e, promoted, orphan)
	}
	ctx := context.Background()

	frozenAndPromoted(t, e, old, promoted)

	var recv *exec.Cmd
	switch client {
	case "pg_recvlogical":
		promoted.Exec(t, "SELECT pg_create_logical_replication_slot('"+orphan.Name+"', 'test_decoding')")
		recv = exec.CommandContext(ctx, filepath.Join(bin, "pg_recvlogical"), "-h", promoted.IP, "-p", strconv.Itoa(promoted.Port),
			"-U", "postgres", "-d", "postgres", "-S", orphan.Name, "--start", "-f", "/dev/null", "-n")
	case "pg_receivewal":
		promoted.Exec(t, "SELECT pg_create_physical_replication_slot('"+orphan.Name+"')")
		recv = exec.CommandContext(ctx, filepath.Join(bin, "pg_receivewal"), "-h", promoted.IP, "-p", strconv.Itoa(promoted.Port),
			"-U", "postgres", "-S", orphan.Name, "-D", t.TempDir(), "-n")
	default: // pg_receivewal under the name client
		promoted.Exec(t, "SELECT pg_create_physical_replication_slot('"+orphan.Name+"')")
		recv = exec.CommandContext(ctx, filepath.Join(bin, "pg_receivewal"), "-d",
			"host="+promoted.IP+" port="+strconv.Itoa(promoted.Port)+" user=postgres application_name="+client,
			"-S", orphan.Name, "-D", t.TempDir(), "-n")
	}
	out := startWALClient(t, recv)
	testkit.Eventually(t, 20*time.Second, 50*time.Millisecond, "a WAL client on slot "+orphan.Name+" of the new primary", func() (int, bool) {
		var n int
		promoted.Query(t, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '"+orphan.Name+"' AND active", &n)
		return n, n == 1
	})
	var receiver string
	orphan.Query(t, "SELECT coalesce((SELECT status||' '||sender_host FROM pg_stat_wal_receiver), 'none')", &receiver)
	t.Logf("the orphan's WAL receiver: %s", receiver)
	var hasTL2 bool
	orphan.Query(t, "SELECT to_regclass('tl2') IS NOT NULL", &hasTL2)
	if hasTL2 {
		t.Fatalf("the orphan has timeline 2's table: the case needs it on timeline 1")
	}
	// pgdns reads a WAL sender's slot when it first sees its pid (at
	// times before the sender took it) and every 10 s again: ask for 12 s,
	// and count.
	names := []string{"replica.db.local.", "prefer-replica.db.local.", "any.db.local."}
	asked, wrong := 0, map[string]int{}
	var first time.Time
	start := time.Now()
	for time.Since(start) < 12*time.Second {
		for _, name := range names {
			asked++
			if slices.Contains(e.ips(t, name), orphan.IP) {
				if first.IsZero() {
					first = time.Now()
				}
				wrong[name]++
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(wrong) > 0 {
		_, hosts := e.get(t, http.DefaultClient, "/v1/hosts", "")
		t.Fatalf("of %d lookups, %v answered the orphan %s of timeline 1, which lacks timeline 2's writes (first %v after the WAL client took its slot on the new primary; its WAL receiver: %s); /v1/hosts: %s; the client: %s",
			asked, wrong, orphan.IP, first.Sub(start).Round(time.Millisecond), receiver, hosts, out.String())
	}
}
