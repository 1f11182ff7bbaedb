package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestFailureClass(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{classify(fmt.Errorf("connect: %w", syscall.ECONNREFUSED)), "not_serving"},
		{classify(&pgconn.PgError{Code: "57P01"}), "not_serving"},
		{&pgconn.PgError{Code: "28P01"}, "auth"},
		{&pgconn.PgError{Code: "42501"}, "server_error"},
		{fmt.Errorf("probe query: %w", context.DeadlineExceeded), "timeout"},
		{&net.DNSError{Err: "no such host", Name: "db1"}, "dns"},
		{errors.New("something else"), "other"},
	}
	for _, c := range cases {
		if got := FailureClass(c.err); got != c.want {
			t.Errorf("FailureClass(%v) = %q, want %q", c.err, got, c.want)
		}
		if !slices.Contains(FailureClasses, c.want) {
			t.Errorf("%q is not in FailureClasses", c.want)
		}
	}
}

// Review 7, H5: a new session refused with 57P03 by a server in crash
// recovery ("in recovery mode", or a message in another language) shows
// it, directly or as the refusal that made a session's end definitive;
// the other refusals with that code, the server's end of one session
// (57P01, 57P02, a reset) and other connect failures do not.
func TestCrashRecoveryIsTheRefusalInRecoveryMode(t *testing.T) {
	recovering := &pgconn.PgError{Severity: "FATAL", Code: "57P03", Message: "the database system is in recovery mode"}
	translated := &pgconn.PgError{Severity: "FATAL", Code: "57P03", Message: "das Datenbanksystem ist im Wiederherstellungsmodus"}
	refused := func(oerr error) error {
		return reopenFailed(fmt.Errorf("probe query: %w", io.ErrUnexpectedEOF), connectFailure{oerr})
	}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{classify(connectError(recovering)), true},
		{classify(connectError(translated)), true},
		{classify(fmt.Errorf("a new session was refused (the open one still works): %w", connectError(recovering))), true},
		{refused(recovering), true},
		{classify(connectError(&pgconn.PgError{Code: "57P03", Message: "the database system is starting up"})), false},
		{classify(connectError(&pgconn.PgError{Code: "57P03", Message: "the database system is shutting down"})), false},
		{classify(connectError(&pgconn.PgError{Code: "57P03", Message: "the database system is not yet accepting connections"})), false},
		{refused(&pgconn.PgError{Code: "57P03", Message: "the database system is shutting down"}), false},
		{refused(syscall.ECONNREFUSED), false},
		{classify(&pgconn.PgError{Code: "57P02", Message: "terminating connection because of crash of another server process"}), false},
		{classify(&pgconn.PgError{Code: "57P01"}), false},
		{classify(fmt.Errorf("probe query: %w", io.ErrUnexpectedEOF)), false},
		{classify(fmt.Errorf("connect: %w", syscall.ECONNREFUSED)), false},
		{fmt.Errorf("probe query: %w", context.DeadlineExceeded), false},
	} {
		if got := crashRecovery(c.err); got != c.want {
			t.Errorf("crashRecovery(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	// The session's end stays what is said and classified.
	err := refused(recovering)
	if !errors.Is(err, ErrNotServing) || err.Error() != "probe query: unexpected EOF" {
		t.Errorf("a session's end, then a refusal in crash recovery: %q (not serving: %v), want the end, definitive", err, errors.Is(err, ErrNotServing))
	}
}
