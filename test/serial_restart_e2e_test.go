package test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/state"
	"github.com/pgdns/pgdns/internal/testkit"
)

// A burst of changes runs the SOA serial ahead of the clock (each change
// is the clock's second or the serial before plus one), and a restart
// started from the clock again: the serial went back (review 5, F5: by 33
// after 30 resets of the primary's connections). With state.path the
// serial is kept, and a restart starts after it. The burst here is a
// replica drained and undrained as fast as pgdns sees it.
func TestSerialNotLowerAfterRestart(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.json")
	e := newEnv(t, envOptions{State: path, Nodes: 2})
	replica := e.pg.Nodes[1]
	e.waitFor(t, "replica.db.local.", []string{replica.IP})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := replica.Conn(t)
	if _, err := conn.Exec(ctx, "SET pgdns.drain = off"); err != nil { // ALTER SYSTEM's placeholder
		t.Fatal(err)
	}
	addr := e.app.DNSAddr()
	serial := soaSerial(t, addr, "main.db.local.")
	// Bounded: at most 200 changes or 60 s, until the serial is 8 s
	// ahead of the clock (more than the restart below takes).
	ahead := func() int64 { return int64(serial) - time.Now().Unix() }
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; i < 200 && ahead() < 8 && time.Now().Before(deadline); i++ {
		on := []string{"off", "on"}[(i+1)%2]
		if _, err := conn.Exec(ctx, "ALTER SYSTEM SET pgdns.drain = "+on); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
			t.Fatal(err)
		}
		was := serial
		serial = testkit.Eventually(t, 20*time.Second, 10*time.Millisecond, "the serial to move after pgdns.drain = "+on, func() (uint32, bool) {
			s := soaSerial(t, addr, "main.db.local.")
			return s, s != was
		})
	}
	if ahead() < 8 {
		t.Fatalf("the burst left the serial %d only %d s ahead of the clock: the test proves nothing", serial, ahead())
	}
	// The state file holds it (a serial ahead of the clock is written).
	testkit.Eventually(t, 20*time.Second, 20*time.Millisecond, "the state file to hold the serial", func() (uint32, bool) {
		m, _, err := state.Load(path)
		return m["main"].Serial, err == nil && m["main"].Serial == serial
	})
	if err := e.app.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	again := attach(t, e.pg, envOptions{State: path})
	// Before the fix: the clock, seconds below.
	for _, name := range []string{"main.db.local.", "db.local."} {
		if got := soaSerial(t, again.app.DNSAddr(), name); got <= serial {
			t.Errorf("after the restart the serial at %s is %d, not above %d before it (clock %d)", name, got, serial, time.Now().Unix())
		}
	}
}
