package probe

import (
	"github.com/pgdns/pgdns/zone"

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
    AND pg_catalog.lower(pg_catalog.split_part(c, '=', 1)) OPERATOR(pg_catalog.=) ANY (ARRAY['pgdns.drain', 'pgdns.offline', 'default_transaction_read_only', 'default_transaction_isolation'])
  ORDER BY 1, 2, 3`

// sessionSQL reads, beside sourcesSQL, what the session's start saw of
// what can change under it: everyRoleSQL's hash, confLoadedSQL's time, and
// the value of default_transaction_isolation a new session gets
// (pg_settings' reset_val: pgdns's SET, isolationSetSQL, is the session's
// value, not its reset value, which the configuration, every role's and
// the database's settings give, and a reload changes), in one row, by
// spaces (sessionValue). One statement, so that no reload falls between
// the time and the value. Its filter also sets the session's
// stats_fetch_consistency (statsFetchSQL).
const sessionSQL = `SELECT pg_catalog.concat_ws(' ', ` + everyRoleSQL + `, ` + confLoadedSQL + `, s.reset_val)
  FROM pg_catalog.pg_settings s WHERE s.name OPERATOR(pg_catalog.=) 'default_transaction_isolation'
    AND ` + statsFetchSQL

// isolationSetSQL is a session's first statement, in a transaction of
// its own (prepare): it takes default_transaction_isolation off
// serializable for pgdns's session, on which a hot standby refuses every
// statement (its snapshot: "cannot use serializable mode in a hot
// standby"), the parse of the probe's own included. A SET needs no
// snapshot. It is a SET, not a startup parameter as the other pinned
// settings are (dsn.go), so that the session's reset value stays what a
// new session gets from the server (sessionSQL reads it; a reload
// changes it): a startup parameter would take its place.
const isolationSetSQL = "SET default_transaction_isolation = 'read committed'"

// isolationSetting is the setting whose value serializable makes a hot
// standby refuse every query of the sessions that have it.
const isolationSetting = "default_transaction_isolation"

// confLoadedSQL is when pgdns's backend last read the server's
// configuration files (pg_conf_load_time(), in µs since the epoch): a
// reload sets it, so a probe that finds another than sessionSQL did
// knows that the server's values may have changed since the session
// read default_transaction_isolation (confSeen).
const confLoadedSQL = `(extract(epoch FROM pg_catalog.pg_conf_load_time()) OPERATOR(pg_catalog.*) 1000000)::bigint`

// everyRoleSQL is a hash of the settings of every role in every database
// (ALTER ROLE ALL SET; pg_db_role_setting's row of no role and no
// database, readable by any role). PostgreSQL applies
// them when a session starts (process_settings: they outrank the
// configuration file, and are outranked by a database's, a role's and
// the client's), so the probe's session, open for hours, keeps the ones
// it started with: ALTER ROLE ALL SET default_transaction_read_only = on,
// a fence of every new session, would never be seen by it, nor its
// RESET, nor a pgdns.drain set so (review 8, R8-5). sessionSQL reads the
// hash when the session starts, every probe statement reads it again
// (a scan of a catalog of a few rows), and a probe that finds
// another has the session reopened before the next probe, which then
// shows what a new session gets. Only the row of every role in every
// database is the applications' for sure: a database's or pgdns's role's
// is pgdns's own (see above), and is re-read every shadowReopen anyway.
//
// The hash covers the settings of every role in a database too (ALTER
// DATABASE ... SET, the rows of no role), of every database: those of
// the database pgdns and the applications use are what a new session of
// theirs gets (default_transaction_isolation, R8-8), and the others
// cost nothing to include (a change of one reopens the session once).
//
// The hash is of the rows as one ARRAY() sub-select's text, not a sum of
// each row's hash: an aggregate is set up on every run of the statement
// (its state, its result slot), about 28 µs of a replica's probe at rest
// (issue 28), where ARRAY() collects the rows the scan returns. Their
// order is the scan's, which only a change of the catalog's rows (or its
// rewrite, VACUUM FULL) changes; a hash moved by a rewrite alone reopens
// the session once, as any change does.
const everyRoleSQL = `pg_catalog.hashtext(ARRAY(SELECT d::pg_catalog.text
    FROM pg_catalog.pg_db_role_setting d WHERE d.setrole OPERATOR(pg_catalog.=) 0::pg_catalog.oid)::pg_catalog.text)::bigint`

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

// readSources sets c.shadows: nil when the session's settings are the
// server's, else the notes that say which are not and why (the host
// counts as drained; a fence or a serializable standby cannot be seen).
// Called once per session with the result of sourcesSQL, pipelined with
// the probe statement's preparation.
func (c *pgChecker) readSources(rr *pgconn.ResultReader) error {
	var shadowed, readOnly []string
	if cs := clientShadow(c.configs.base.RuntimeParams, "pgdns.drain", "pgdns.offline"); cs != "" {
		shadowed = append(shadowed, cs)
	}
	if cs := clientShadow(c.configs.base.RuntimeParams, readOnlySetting); cs != "" {
		readOnly = append(readOnly, cs)
	}
	var isolation []string
	if cs := clientShadow(c.configs.base.RuntimeParams, isolationSetting); cs != "" {
		isolation = append(isolation, cs)
	}
	// everyRole: ALTER ROLE ALL SET default_transaction_read_only is on;
	// databaseReadOnly: ALTER DATABASE (of the probe's) sets it, which
	// overrides ALTER ROLE ALL's in that database.
	everyRole, databaseReadOnly := false, false
	// appIsolation: default_transaction_isolation as an application's
	// session in the probe's database gets it from the catalog (ALTER
	// DATABASE's, else ALTER ROLE ALL's; "" when neither sets it).
	appIsolation, appIsolationByDB := "", false
	for rr.NextRow() {
		v := rr.Values()
		if len(v) != 3 || v[0] == nil {
			continue
		}
		db, role := string(v[0]) == "t", string(v[1]) == "t"
		note := fmt.Sprintf("%q is set by %s", v[2], settingOrigins[b2i(db)][b2i(role)])
		name, _, _ := strings.Cut(string(v[2]), "=")
		switch name = strings.TrimSpace(name); {
		case strings.EqualFold(name, readOnlySetting):
			_, value, _ := strings.Cut(string(v[2]), "=")
			switch {
			case db || role:
				readOnly = append(readOnly, note)
				databaseReadOnly = databaseReadOnly || (db && !role)
			default: // ALTER ROLE ALL's is every session's: not pgdns's own
				everyRole, _, _ = zone.ParseSwitch(value)
			}
		case strings.EqualFold(name, isolationSetting):
			_, value, _ := strings.Cut(string(v[2]), "=")
			value = strings.ToLower(strings.Trim(strings.TrimSpace(value), `"'`))
			switch {
			case role:
				isolation = append(isolation, note)
			case db: // the probe's database's overrides every role's there
				appIsolation, appIsolationByDB = value, true
			case !appIsolationByDB: // every role's, in every database
				appIsolation = value
			}
		default:
			shadowed = append(shadowed, note)
		}
	}
	if _, err := rr.Close(); err != nil {
		return fmt.Errorf("reading pg_db_role_setting: %w", err)
	}
	c.shadows = nil
	if len(shadowed)+len(readOnly)+len(isolation) == 0 {
		return nil
	}
	n := &shadowNotes{}
	reopened := fmt.Sprintf(" (the session is reopened every %s)", shadowReopen)
	if len(shadowed) > 0 {
		n.drain = strings.Join(shadowed, ", ") + " for pgdns's session, which hides the server's value: counted as drained" + reopened
	}
	if len(readOnly) > 0 {
		n.readOnly = strings.Join(readOnly, ", ") + " for pgdns's session, which hides the server's value: a fence of the server's (ALTER SYSTEM SET default_transaction_read_only = on) cannot be seen" + reopened
		// A fence of every role's is in the rows read: hidden from
		// pgdns's own session by its role's setting (a read-only probe
		// role, the usual hardening) or its options, it is still what an
		// application's session gets (its role's or database's own
		// aside), in this database unless ALTER DATABASE overrides it
		// (review 14a, finding 2: primary answered a fenced primary).
		n.everyRoleReadOnly = everyRole && !databaseReadOnly
	}
	if len(isolation) > 0 {
		n.isolation = strings.Join(isolation, ", ") + " for pgdns's session, which hides the server's value: a hot standby whose new sessions are serializable (refusing every read) cannot be seen" + reopened
		// As for a fence (above): every role's or the database's setting,
		// read from the catalog, is what an application's session gets.
		n.everyRoleSerializable = appIsolation == "serializable"
	}
	c.shadows = n
	return nil
}

// shadowNotes say which of the session's settings a role, database or
// client setting of pgdns's own hides from it, and why ("" for none):
// pgdns.drain and pgdns.offline (the host counts as drained),
// default_transaction_read_only and default_transaction_isolation (the
// server's value cannot be seen).
//
// everyRoleReadOnly: readOnly hides the server's value, but ALTER ROLE ALL
// SET default_transaction_read_only = on, read from the catalog, says that
// every application session's transactions are read-only: the host
// refuses writes all the same (check: Sample.DefaultReadOnly).
type shadowNotes struct {
	drain, readOnly, isolation string
	everyRoleReadOnly          bool
	// everyRoleSerializable: isolation hides the server's value, but ALTER
	// DATABASE (of the probe's database) or ALTER ROLE ALL SET
	// default_transaction_isolation = serializable, read from the
	// catalog, is what every application session there gets.
	everyRoleSerializable bool
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

// readSession reads sessionSQL's row (sessionValue). Called once per
// session, pipelined with the probe statement's preparation.
func (c *pgChecker) readSession(rr *pgconn.ResultReader) error {
	c.everyRoleKnown, c.everyRoleMoved = false, false
	c.serializable, c.confLoaded, c.confReloaded = false, 0, false
	for rr.NextRow() {
		if v := rr.Values(); len(v) == 1 {
			c.sessionValue(string(v[0]))
		}
	}
	_, err := rr.Close()
	return err
}

// sessionValue reads sessionSQL's row: everyRoleSQL's hash,
// confLoadedSQL's time and the value of default_transaction_isolation a
// new session gets, by spaces (the last may hold one).
func (c *pgChecker) sessionValue(v string) {
	hash, rest, _ := strings.Cut(v, " ")
	loaded, isolation, _ := strings.Cut(rest, " ")
	c.everyRoleSeen([]byte(hash))
	c.confLoaded, _ = strconv.ParseInt(loaded, 10, 64)
	c.serializable = isolation == "serializable"
}

// confSeen takes v, confLoadedSQL's column as a probe read it, on a
// server in recovery or not: on a hot standby, a reload since the session
// read default_transaction_isolation (sessionSQL) may have changed what
// a new session gets, so the session is reopened before the next probe,
// which reads it again. On a writable server the value does not count
// (serializable is a writable server's to serve), and a reload there
// reopens nothing.
func (c *pgChecker) confSeen(v []byte, inRecovery bool) {
	if !inRecovery || c.confLoaded == 0 {
		return
	}
	if t, err := strconv.ParseInt(string(v), 10, 64); err == nil && t != c.confLoaded {
		c.confReloaded = true
	}
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
