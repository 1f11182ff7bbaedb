package probe

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgdns/pgdns/internal/pgtest"
)

// pgCheckerOf is the checker of addr with dsn, closed when the test ends.
func pgCheckerOf(t testing.TB, dsn, addr string) *pgChecker {
	t.Helper()
	newChecker, err := PostgresCheckers(dsn)
	if err != nil {
		t.Fatal(err)
	}
	c, err := newChecker(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.(*pgChecker)
}

// probedNode starts one PostgreSQL server for t and a checker of it that
// has probed it once, so the checker holds an open connection, as between
// two probes. The checker is closed, and ctx (which ends after within)
// cancelled, when the test ends: after the test's own deferred calls, so a
// Watch the test started is stopped before its checker closes. within
// starts once that first probe is done: the first session to a server just
// started is setup, not the test, and under load (a run queue of 40 on two
// cores) it once took all of TestHistoryReadOnTheSession's 30 s ("probe
// query: timed out"); it has a minute of its own.
func probedNode(t *testing.T, within time.Duration) (*pgtest.Node, Checker, context.Context) {
	t.Helper()
	cl := pgtest.New(t, pgtest.Options{IPs: pgtest.Addrs(t).IPs(1)})
	node := cl.Nodes[0]
	c := pgCheckerOf(t, "user=postgres dbname=postgres sslmode=disable", node.Addr())
	first, cancelFirst := context.WithTimeout(context.Background(), time.Minute)
	_, err := c.Check(first)
	cancelFirst()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	t.Cleanup(cancel)
	return node, c, ctx
}

// lockProbedView holds the probe in its query (and a new session in its
// startup) until the session it returns rolls back or the test ends: see
// holdProbes.
func lockProbedView(t *testing.T, ctx context.Context, node *pgtest.Node) *pgx.Conn {
	t.Helper()
	locker, err := pgx.Connect(ctx, node.DSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { locker.Close(context.Background()) })
	holdProbes(t, ctx, locker)
	return locker
}

// holdProbes makes the next probe of a session as postgres wait on a lock,
// in a transaction of locker's that it leaves open. The probe's statements
// read functions only, no relation a test could lock (a primary whose
// senders pgdns knows reads pg_stat_get_wal_senders() alone, 7e0cf12), but
// each probe asks pg_has_role, whose check of the session's role reads
// pg_authid when its cached row was invalidated: an ALTER ROLE of that role
// that changes nothing invalidates it in every session, and pg_authid
// locked exclusively then holds the probe (wait_event_type 'Lock') and any
// new session's authentication.
func holdProbes(t *testing.T, ctx context.Context, locker *pgx.Conn) {
	t.Helper()
	if _, err := locker.Exec(ctx, "ALTER ROLE postgres CONNECTION LIMIT -1"); err != nil {
		t.Fatal(err)
	}
	if _, err := locker.Exec(ctx, "BEGIN; LOCK TABLE pg_catalog.pg_authid IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
}

// wantNotServing waits up to within for the error of a Check or Watch on
// done and fails t unless it is definitive (ErrNotServing): wrong is the
// failure's format, given the error; late says what did not happen in time.
func wantNotServing(t *testing.T, done <-chan error, within time.Duration, wrong, late string) {
	t.Helper()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotServing) {
			t.Fatalf(wrong, err)
		}
	case <-time.After(within):
		t.Fatal(late)
	}
}

// sessionQuery runs sql, a simple query, on c's own session, as the next
// probe would see it, and returns the first row's columns as text (none
// when it has no row; "" for NULL).
func sessionQuery(ctx context.Context, c *pgChecker, sql string) ([]string, error) {
	if c.sess == nil {
		return nil, errors.New("no session")
	}
	// A probe ends by sending its bare connect's CancelRequest for this
	// session's backend (reachcancel.go): wait for it as the next probe
	// would, and run the statement again if it still caught the cancel.
	c.settleCancel(time.Time{})
	var r reply
	var err error
	for try := 0; ; try++ {
		r, err = c.sess.exchange(ctx, &c.alarm, encode(&pgproto3.Query{String: sql}), time.Time{})
		if err == nil {
			err = r.err
		}
		if try == cancelReruns || !c.cancelledByUs(err) {
			break
		}
		c.settleCancelled(time.Time{})
	}
	if err != nil || r.rows == 0 {
		return nil, err
	}
	var values [64][]byte
	var null [64]bool
	n, err := dataRowColumns(r.row, values[:], null[:])
	if err != nil || n > len(values) {
		return nil, fmt.Errorf("a row of %d columns: %v", n, err)
	}
	row := make([]string, n)
	for i := range n {
		row[i] = string(values[i])
	}
	return row, nil
}
