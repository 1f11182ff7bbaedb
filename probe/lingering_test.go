package probe

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// A server shutting down is seen by its status or by the shutdown's
// 57P03 refusal; other refusals (crash recovery, startup, a translated
// message) and other failures are no shutdown, and the session is closed
// as before.
func TestShuttingDown(t *testing.T) {
	refused := func(msg string) error {
		return classify(fmt.Errorf("a new session was refused (the open one still works): %w", &pgconn.PgError{Severity: "FATAL", Code: "57P03", Message: msg}))
	}
	for err, want := range map[error]bool{
		errStopping:              true,
		refused(shutdownRefusal): true,
		refused("the database system is in recovery mode"):      false,
		refused("the database system is starting up"):           false,
		refused("el sistema de bases de datos está apagándose"): false,
		errDropsNew:                  false,
		errors.New("probe query: x"): false,
	} {
		if got := shuttingDown(err); got != want {
			t.Errorf("shuttingDown(%v) = %v, want %v", err, got, want)
		}
	}
}
