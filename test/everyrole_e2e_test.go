package test

// Settings of every role (ALTER ROLE ALL SET) apply to the sessions that
// start after them (review 8, R8-5): pgdns's probe session, open for
// hours, must still answer what a new client session gets (rule 11).

import (
	"strings"
	"testing"
	"time"

	"github.com/pgdns/pgdns/internal/pgtest"
	"github.com/pgdns/pgdns/internal/testkit"
)

// A fence of every role set while pgdns runs takes the primary out of
// primary.db.local; a drain of every role set so drains the replica; both
// lifted, both are answered again.
func TestFenceOfEveryRoleIsSeen(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(2)})
	e := attach(t, pg, envOptions{})
	p, r := pg.Nodes[0], pg.Nodes[1]
	e.waitFor(t, "replica.db.local.", []string{r.IP})

	p.Exec(t, "ALTER ROLE ALL SET default_transaction_read_only = on")
	if err := inNewSession(t, p, "CREATE TABLE fenced (id int)"); err == nil || !strings.Contains(err.Error(), "read-only transaction") {
		t.Fatalf("a new session's write on the fenced primary: %v, want a read-only transaction error", err)
	}
	// Before the fix: the running pgdns kept answering the primary.
	e.waitFor(t, "primary.db.local.", []string{})
	if txt := strings.Join(e.txt(t, "any.db.local."), " "); !strings.Contains(txt, "read_only=true") {
		t.Errorf("the fenced primary's evidence does not say read_only=true: %s", txt)
	}

	p.Exec(t, "BEGIN READ WRITE; ALTER ROLE ALL SET pgdns.drain = on; COMMIT")
	// Before the fix: never (nothing shadowed at the session's start, so no reopen).
	e.waitFor(t, "replica.db.local.", []string{})
	// The primary's session reopened too, before the next change: a change
	// committed while a session starts is not seen by it (left: R8-5).
	if !testkit.Poll(20*time.Second, 20*time.Millisecond, func() bool {
		for _, line := range e.txt(t, "any.db.local.") {
			if strings.HasPrefix(line, "host="+p.Addr()+" ") && strings.Contains(line, " drained=true") {
				return true
			}
		}
		return false
	}) {
		t.Fatalf("the primary's drain was not seen: %q", e.txt(t, "any.db.local."))
	}

	p.Exec(t, "BEGIN READ WRITE; ALTER ROLE ALL RESET default_transaction_read_only; ALTER ROLE ALL RESET pgdns.drain; COMMIT")
	e.waitFor(t, "primary.db.local.", []string{p.IP})
	e.waitFor(t, "replica.db.local.", []string{r.IP})
}

// The mirror: pgdns's session opened while every role was fenced; the
// fence lifted, primary.db.local answers the primary again.
func TestUnfenceOfEveryRoleIsSeen(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(2)})
	p, r := pg.Nodes[0], pg.Nodes[1]
	p.Exec(t, "ALTER ROLE ALL SET default_transaction_read_only = on")
	e := launch(t, pg, envOptions{})
	e.waitFor(t, "replica.db.local.", []string{r.IP})
	e.waitFor(t, "primary.db.local.", []string{})

	p.Exec(t, "BEGIN READ WRITE; ALTER ROLE ALL RESET default_transaction_read_only; COMMIT")
	if err := inNewSession(t, p, "CREATE TABLE unfenced (id int)"); err != nil {
		t.Fatalf("a new session's write on the unfenced primary: %v", err)
	}
	// Before the fix: [] for as long as pgdns's session lived.
	e.waitFor(t, "primary.db.local.", []string{p.IP})
}
