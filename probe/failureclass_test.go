package probe

import (
	"context"
	"errors"
	"fmt"
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
