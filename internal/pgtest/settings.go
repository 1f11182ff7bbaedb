package pgtest

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
)

// customName is what SetCustom accepts as a setting's name: a custom
// (dotted) setting, so that it can be written into SQL as it is.
var customName = regexp.MustCompile(`^[a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*$`)

// SetCustom sets the custom setting name (such as pgdns.drain) to value on
// the node the way an operator does on PostgreSQL 15, where ALTER SYSTEM
// refuses a custom setting no session has a placeholder for: in one
// session, SET name (the placeholder), ALTER SYSTEM SET name, then
// pg_reload_conf(). Sessions already open see the value after the reload.
// value "" resets it instead (ALTER SYSTEM RESET).
func (n *Node) SetCustom(ctx context.Context, name, value string) error {
	if !customName.MatchString(name) {
		return fmt.Errorf("pgtest: %q is not a custom setting's name", name)
	}
	conn, err := pgx.Connect(ctx, n.DSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	// A string literal (standard_conforming_strings is on by default):
	// ALTER SYSTEM takes no parameters.
	lit := "'" + strings.ReplaceAll(value, "'", "''") + "'"
	stmts := []string{"SET " + name + " = off", "ALTER SYSTEM SET " + name + " = " + lit, "SELECT pg_reload_conf()"}
	if value == "" {
		stmts[1] = "ALTER SYSTEM RESET " + name
	}
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s, pgx.QueryExecModeSimpleProtocol); err != nil {
			return fmt.Errorf("pgtest: %s: %w", s, err)
		}
	}
	return nil
}
