package probe

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// pgdns.drain and pgdns.offline are the server's: postgresql.conf, a file
// it includes, or postgresql.auto.conf (ALTER SYSTEM). The probe reads
// them with current_setting, which is its own session's value, and a
// session's value may come from elsewhere: a role or database setting
// (ALTER ROLE pgdns SET pgdns.drain = on, ALTER DATABASE ... SET; stored
// in the catalog, so replicated to every host), or the client's startup
// options (options=-c ... in the probe DSN, PGOPTIONS). Any of those
// outranks the configuration file: every host would read as drained (or
// not) by what one role setting says, a reload would not change it, and
// two pgdns instances with different roles would disagree. Those sources
// are applied when a session starts and stay as they are until it ends,
// so the probe reads once per session whether any applies to it (the role
// and database settings, its own startup parameters) and, when one does, knows that it cannot see the server's value: the host is then
// counted as drained (zone, Host.SettingShadowed), the note says why, and
// the session is reopened every shadowReopen, so that removing the role
// or database setting undrains the host without a restart of pgdns.
//
// default_transaction_read_only is read with the same care, to another
// end: a writable server with it on refuses writes (zone does not answer
// it as primary), and what counts is what the applications' sessions get.
// A setting for every role (ALTER ROLE ALL SET) is theirs as much as
// pgdns's: the session's value is it, and a change of it has the session
// reopened (everyRoleSQL). One bound to pgdns's role or to its
// database (ALTER ROLE pgdns SET, ALTER DATABASE ... SET), or set by the
// probe's connection options, is pgdns's own: it says nothing of the
// applications' sessions and hides the server's value (a read-only probe
// role, a usual hardening, would otherwise take every write answer away:
// review 5 F16). The session's value is then not used, the host is not
// counted as refusing writes, and its note says that a fence of the
// server's cannot be seen; the session is reopened every shadowReopen, so
// that removing the setting shows the server's value again.

// shadowReopen is how often a session whose pgdns settings are shadowed
// is reopened, to see whether they still are.
const shadowReopen = 10 * time.Second

// sourcesSQL reads the role and database settings of pgdns.drain,
// pgdns.offline and default_transaction_read_only that apply to the probe's session (pg_db_role_setting,
// readable by any role). pg_settings would say a setting's source, but it
// does not list a placeholder (a custom setting no module defines, as
// pgdns's are): the catalog is read instead. Each row: whether it is
// bound to the database, whether to the role, and the setting.
const sourcesSQL = `SELECT d.setdatabase OPERATOR(pg_catalog.<>) 0::pg_catalog.oid, d.setrole OPERATOR(pg_catalog.<>) 0::pg_catalog.oid, c
  FROM pg_catalog.pg_db_role_setting d, pg_catalog.unnest(d.setconfig) c
  WHERE d.setdatabase OPERATOR(pg_catalog.=) ANY (ARRAY[0::pg_catalog.oid,
      (SELECT oid FROM pg_catalog.pg_database WHERE datname OPERATOR(pg_catalog.=) pg_catalog.current_database())])
    AND d.setrole OPERATOR(pg_catalog.=) ANY (ARRAY[0::pg_catalog.oid,
      (SELECT oid FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) session_user)])
    AND pg_catalog.lower(pg_catalog.split_part(c, '=', 1)) OPERATOR(pg_catalog.=) ANY (ARRAY['pgdns.drain', 'pgdns.offline', 'default_transaction_read_only'])
UNION ALL SELECT NULL, NULL, (` + everyRoleSQL + `)::pg_catalog.text
  ORDER BY 1, 2, 3`

// everyRoleSQL is a hash of the settings of every role in every database
// (ALTER ROLE ALL SET; pg_db_role_setting's row of no role and no
// database, readable by any role), 0 without any. PostgreSQL applies
// them when a session starts (process_settings: they outrank the
// configuration file, and are outranked by a database's, a role's and
// the client's), so the probe's session, open for hours, keeps the ones
// it started with: ALTER ROLE ALL SET default_transaction_read_only = on,
// a fence of every new session, would never be seen by it, nor its
// RESET, nor a pgdns.drain set so (review 8, R8-5). sourcesSQL reads the
// hash when the session starts, every probe statement reads it again
// (one index lookup of a catalog of a few rows), and a probe that finds
// another has the session reopened before the next probe, which then
// shows what a new session gets. Only the row of every role in every
// database is the applications' for sure: a database's or pgdns's role's
// is pgdns's own (see above), and is re-read every shadowReopen anyway.
const everyRoleSQL = `coalesce((SELECT pg_catalog.hashtext(d.setconfig::pg_catalog.text) FROM pg_catalog.pg_db_role_setting d
    WHERE d.setdatabase OPERATOR(pg_catalog.=) 0::pg_catalog.oid AND d.setrole OPERATOR(pg_catalog.=) 0::pg_catalog.oid), 0)::bigint`

// settingOrigins names a role/database setting by where it is bound
// (database, role), as an operator sets it.
var settingOrigins = [2][2]string{
	{"ALTER ROLE ALL SET", "ALTER ROLE ... SET"},
	{"ALTER DATABASE ... SET", "ALTER ROLE ... IN DATABASE ... SET"},
}

// clientShadow says which of settings the probe's own startup parameters
// set (a key of the DSN, options=-c ..., PGOPTIONS), or "".
func clientShadow(params map[string]string, settings ...string) string {
	var set []string
	for _, name := range settings {
		_, direct := params[name]
		if direct || strings.Contains(strings.ToLower(params["options"]), name) {
			set = append(set, name+" is set by the probe's connection options (probe.dsn, PGOPTIONS)")
		}
	}
	return strings.Join(set, ", ")
}

// readSources sets c.shadow: "" when the session's pgdns settings are the
// server's, else the note that says which are not and why the host
// counts as drained; and c.roShadow the same for
// default_transaction_read_only. Called once per session with the result
// of sourcesSQL, pipelined with the probe statement's preparation.
func (c *pgChecker) readSources(rr *pgconn.ResultReader) error {
	var shadowed, readOnly []string
	if cs := clientShadow(c.configs.base.RuntimeParams, "pgdns.drain", "pgdns.offline"); cs != "" {
		shadowed = append(shadowed, cs)
	}
	if cs := clientShadow(c.configs.base.RuntimeParams, readOnlySetting); cs != "" {
		readOnly = append(readOnly, cs)
	}
	c.everyRoleKnown, c.everyRoleMoved = false, false
	for rr.NextRow() {
		v := rr.Values()
		if len(v) != 3 {
			continue
		}
		if v[0] == nil { // everyRoleSQL's row
			c.everyRoleSeen(v[2])
			continue
		}
		db, role := string(v[0]) == "t", string(v[1]) == "t"
		note := fmt.Sprintf("%q is set by %s", v[2], settingOrigins[b2i(db)][b2i(role)])
		if name, _, _ := strings.Cut(string(v[2]), "="); strings.EqualFold(strings.TrimSpace(name), readOnlySetting) {
			if db || role { // ALTER ROLE ALL's is every session's: not pgdns's own
				readOnly = append(readOnly, note)
			}
		} else {
			shadowed = append(shadowed, note)
		}
	}
	if _, err := rr.Close(); err != nil {
		return fmt.Errorf("reading pg_db_role_setting: %w", err)
	}
	c.shadow, c.roShadow = "", ""
	if len(shadowed) > 0 {
		c.shadow = strings.Join(shadowed, ", ") + " for pgdns's session, which hides the server's value: counted as drained" +
			fmt.Sprintf(" (the session is reopened every %s)", shadowReopen)
	}
	if len(readOnly) > 0 {
		c.roShadow = strings.Join(readOnly, ", ") + " for pgdns's session, which hides the server's value: a fence of the server's (ALTER SYSTEM SET default_transaction_read_only = on) cannot be seen" +
			fmt.Sprintf(" (the session is reopened every %s)", shadowReopen)
	}
	return nil
}

// readOnlySetting is the setting that makes a new session's transactions
// read-only.
const readOnlySetting = "default_transaction_read_only"

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// everyRoleSeen takes v, everyRoleSQL's hash as a statement of c's
// session read it: the first read of the session is what its start saw;
// another, once read, has the session reopened before the next probe.
func (c *pgChecker) everyRoleSeen(v []byte) {
	h, err := strconv.ParseInt(string(v), 10, 64)
	switch {
	case err != nil:
	case !c.everyRoleKnown:
		c.everyRole, c.everyRoleKnown = h, true
	case h != c.everyRole:
		c.everyRoleMoved = true
	}
}
