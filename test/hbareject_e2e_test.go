package test

// A replica whose pg_hba.conf is reloaded to refuse every connection
// (review 8, R8-2): a "reject" line first, or no line that lets a TCP
// connection in, then SIGHUP, what an operator does to fence or retire a
// host, or a config-management run gone wrong. Every new session is
// refused with 28000, pgdns's own included, while pgdns's open session
// works. Before the fix the host stayed in replica.db.local for as long
// as that session lived, with a probe role that reads postmaster.pid
// ("ready": pgdns never sent a startup packet, and the bare connect ends
// before pg_hba.conf is read) and with one that may not (its admission
// attempt was refused with 28000, which proved nothing); a pgdns started
// then marked the host down at once (rule 3).

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"
)

// One cluster, two pgdns in front of it (twoRoles): one probing as postgres (which
// reads postmaster.pid: reach, every third of which sends the startup
// packet, is what checks), one as a role in pg_monitor only (a new
// session every admission interval).
func TestHostRefusedByItsHBALeaves(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	pg, pgdns := twoRoles(t, ctx)
	n2 := pg.Nodes[1]
	both := []string{pg.Nodes[1].IP, pg.Nodes[2].IP}
	hba, err := os.ReadFile(n2.Dir + "/pg_hba.conf")
	if err != nil {
		t.Fatal(err)
	}
	reload := func(t *testing.T, conf []byte) {
		t.Helper()
		if err := n2.WriteFile("pg_hba.conf", conf); err != nil {
			t.Fatal(err)
		}
		if err := n2.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	// leaves reloads n2 with conf and checks that a client's connect to
	// n2 is refused with why, that every pgdns takes n2 out of
	// replica.db.local with why in /v1/resolve's reason, and that n2 comes
	// back once the old file is reloaded.
	leaves := func(t *testing.T, why string, conf []byte) {
		t.Helper()
		reload(t, conf)
		restored := false
		defer func() {
			if !restored {
				reload(t, hba)
			}
		}()
		refusesNewSessions(t, ctx, n2.DSN()+" connect_timeout=2", why)
		for name, e := range pgdns {
			t.Run(name, func(t *testing.T) {
				// The status role sees it at the third reach at the latest:
				// 12 s at the default admission interval, more under load.
				took := e.takesOut(t, n2, []string{pg.Nodes[2].IP}, why)
				t.Logf("pgdns probing for %s took n2 out after %v", name, took)
			})
		}
		reload(t, hba)
		restored = true
		for _, e := range pgdns {
			e.waitWithin(t, 60*time.Second, "replica.db.local.", both)
		}
	}

	t.Run("a reject line for every connection", func(t *testing.T) {
		leaves(t, "pg_hba.conf rejects connection", append([]byte("host all all 0.0.0.0/0 reject\n"), hba...))
	})
	t.Run("no line for a TCP connection", func(t *testing.T) {
		leaves(t, "no pg_hba.conf entry", []byte("local all all trust\n"))
	})
}
