package probe

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgdns/pgdns/zone"
)

// textOID is the oid of pg_type's text (pgtype.TextOID).
const textOID = 25

// Facts the probe reads beside positions: timeline history and the name a
// replica streams under.

// readHistory returns the history of s's timeline, reading the file only
// when the timeline or the server run (system identifier and start time:
// a re-cloned or restored server at the same address may have another
// history under the same timeline number) changes. Failing to read it is
// not a failed probe. A role that may not read files is asked again once
// per session and every historyRetry within one, so that a GRANT takes
// effect without a restart of pgdns. The end of ctx ends the wait for the
// file as it ends the probe's.
func (c *pgChecker) readHistory(ctx context.Context, s *Sample) []zone.TimelineEnd {
	return c.readHistoryBy(ctx, time.Time{}, 0, s)
}

// readHistoryBy is readHistory within a probe due by by (zero: no
// deadline but ctx's end) whose own round trip took rtt: it
// asks the server only while the time left holds another round trip and
// a half, and otherwise leaves the file to a later probe, returning nil
// as when it cannot be read (review 5, F14: on a path whose round trip
// is over half the probe's timeout, the first probe on a new timeline
// lost its session to the history read, and the next one, needing a new
// session, missed its deadline: the new primary was lost right after a
// failover). A sample without History is one whose file was not read,
// as for a role that may not read files: timelines are then learnt from
// the switches watched (timelines.go), and no fork is claimed from files.
// Never started, the read leaves nothing pending on the session.
func (c *pgChecker) readHistoryBy(ctx context.Context, by time.Time, rtt time.Duration, s *Sample) []zone.TimelineEnd {
	affordable := func() bool { return by.IsZero() || time.Until(by) >= rtt+rtt/2 }
	tl, run := s.Timeline, serverRun{s.SystemID, s.StartedAt.UnixMicro()}
	if tl <= 1 {
		return nil
	}
	if tl == c.historyTL && run == c.historyRun {
		return c.history
	}
	if !affordable() {
		return nil // no room left in this probe: a later one asks
	}
	if permitted, asked := c.historyPermitted(ctx, by); !permitted || asked {
		// Asked in this probe: the file is read at the next one, so that a
		// probe costs at most one exchange beyond its own (a new timeline's
		// first probe on a slow path must still end within probe.timeout).
		return nil
	}
	r, err := c.sess.exchange(ctx, &c.alarm, historyRequest(tl), by)
	if err != nil {
		// Its reply may still come, and must not be taken for the next
		// probe's: the next probe opens a new session (the session's end,
		// if that was it, is the next probe's to report).
		c.Close()
		return nil
	}
	var col [1][]byte
	var null [1]bool
	n, rerr := dataRowColumns(r.row, col[:], null[:])
	if r.err != nil && strings.Contains(r.err.Error(), "permission denied") {
		c.denied() // revoked since it was asked
		return nil
	}
	if r.err != nil || r.rows != 1 || rerr != nil || n != 1 || null[0] || len(col[0]) == 0 {
		return nil // no such file (yet), or no answer: try again on the next probe
	}
	c.historyTL, c.historyRun, c.history = tl, run, ParseHistory(string(col[0]))
	return c.history
}

// historyPermitted reports whether c's session may read history files,
// asking the server (historyPrivilegeSQL) once per session while it may,
// and, while it may not, once per session and every historyRetry; asked
// says that it asked now.
func (c *pgChecker) historyPermitted(ctx context.Context, by time.Time) (permitted, asked bool) {
	if !c.permittedIn.IsZero() && c.permittedIn.Equal(c.connectedAt) {
		return true, false
	}
	if c.noHistories && c.deniedIn.Equal(c.connectedAt) && time.Since(c.deniedAt) < cmp.Or(c.historyRetry, historyRetry) {
		return false, false
	}
	r, err := c.sess.exchange(ctx, &c.alarm, historyPrivilegeRequest, by)
	if err != nil {
		c.Close() // as readHistory does
		return false, true
	}
	var col [1][]byte
	var null [1]bool
	if c.cancelledByUs(r.err) {
		return false, true // a cancel of ours (reachcancel.go): asked again at the next probe
	}
	if n, rerr := dataRowColumns(r.row, col[:], null[:]); r.err != nil || r.rows != 1 || rerr != nil || n != 1 || null[0] || string(col[0]) != "t" {
		c.denied()
		return false, true
	}
	c.noHistories, c.permittedIn = false, c.connectedAt
	return true, true
}

// denied records that c's session may not read history files.
func (c *pgChecker) denied() {
	c.noHistories, c.permittedIn = true, time.Time{}
	c.deniedIn, c.deniedAt = c.connectedAt, time.Now()
}

// historyPrivilegeRequest asks historyPrivilegeSQL, as the unnamed
// statement: Parse, Bind, Execute, Sync.
var historyPrivilegeRequest = encode(
	&pgproto3.Parse{Query: historyPrivilegeSQL},
	&pgproto3.Bind{},
	&pgproto3.Execute{},
	&pgproto3.Sync{},
)

// historyRetry is how often a session that may not read history files
// asks again (a GRANT takes effect within it).
const historyRetry = 10 * time.Second

// historyRequest reads the history file of timeline tl with historySQL,
// as the unnamed statement: Parse, Bind, Execute, Sync.
func historyRequest(tl uint32) []byte {
	return encode(
		&pgproto3.Parse{Query: historySQL, ParameterOIDs: []uint32{textOID}},
		&pgproto3.Bind{Parameters: [][]byte{fmt.Appendf(nil, "%08X", tl)}},
		&pgproto3.Execute{},
		&pgproto3.Sync{},
	)
}

// ParseHistory parses a timeline history file: one line per earlier
// timeline, "parentTLI<TAB>switchpoint<TAB>reason", comments after '#'.
func ParseHistory(text string) []zone.TimelineEnd {
	var out []zone.TimelineEnd
	for _, line := range strings.Split(text, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		tl, err1 := strconv.ParseUint(f[0], 10, 32)
		end, err2 := zone.ParseLSN(f[1])
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, zone.TimelineEnd{Timeline: uint32(tl), End: end})
	}
	return out
}

// walReceiverAppName finds the application name a WAL receiver gives the
// primary, from its conninfo as pg_stat_wal_receiver shows it, or says why
// it cannot. That column holds one of two texts. Once connected, the
// receiver shows libpq's view of its connection (libpqrcv_get_conninfo):
// keyword=value pairs joined by one space, in libpq's fixed order of
// options, with NO quoting, so "application_name=my standby
// fallback_application_name=walreceiver sslmode=prefer"; a value may hold
// spaces, quotes and even "keyword=" text. The name there is all that lies
// between "application_name=" and " fallback_application_name=", which
// the receiver always sets (to cluster_name, else "walreceiver") and which
// libpq lists right after it (printedAppName). But when the startup
// process asks a running receiver to stream again (a new timeline, say),
// the column shows primary_conninfo as written, with libpq's quoting
// rules (writtenAppName). A text without fallback_application_name is
// the written one; one with it must read as printed, and when it reads as
// written too, to another name, the name is unknown. An empty conninfo is no WAL receiver: it has no name (never
// "walreceiver": the primary's own row would then match a replica's).
func walReceiverAppName(conninfo, clusterName string) (name, why string) {
	if conninfo == "" {
		return "", "it has no WAL receiver"
	}
	fallback := clusterName
	if fallback == "" {
		fallback = "walreceiver"
	}
	written, whyWritten := writtenAppName(conninfo, fallback)
	if len(keywordAt(conninfo, "fallback_application_name=")) == 0 {
		// Never printed by libpq, which always lists the fallback.
		if whyWritten != "" {
			return "", "its WAL receiver's conninfo cannot be read: " + whyWritten
		}
		return written, ""
	}
	printed, whyPrinted := printedAppName(conninfo, fallback)
	switch {
	case whyPrinted != "":
		return "", "its WAL receiver's conninfo cannot be read without ambiguity (PostgreSQL prints it unquoted): " + whyPrinted
	case whyWritten == "" && printed != written:
		return "", "its WAL receiver's conninfo reads as application name " + strconv.Quote(printed) +
			" as PostgreSQL prints it and " + strconv.Quote(written) + " as written"
	}
	return printed, ""
}

// printedAppName reads the name from conninfo as libpqrcv_get_conninfo
// prints it (walReceiverAppName), whose receiver falls back to fallback.
func printedAppName(conninfo, fallback string) (string, string) {
	const appKey, fallbackKey = "application_name=", "fallback_application_name="
	fbs, apps := keywordAt(conninfo, fallbackKey), keywordAt(conninfo, appKey)
	switch {
	case len(fbs) != 1:
		return "", strconv.Itoa(len(fbs)) + " fallback_application_name= in it"
	case len(apps) > 1:
		return "", strconv.Itoa(len(apps)) + " application_name= in it"
	}
	f := fbs[0]
	if rest := conninfo[f+len(fallbackKey):]; !strings.HasPrefix(rest, fallback) ||
		(len(rest) > len(fallback) && rest[len(fallback)] != ' ') {
		return "", "its fallback_application_name is not " + strconv.Quote(fallback)
	}
	if len(apps) == 0 {
		return fallback, ""
	}
	a := apps[0] + len(appKey)
	if a >= f {
		return "", "application_name= after fallback_application_name="
	}
	return conninfo[a : f-1], ""
}

// writtenAppName reads the name from conninfo as primary_conninfo is
// written, by libpq's rules (conninfo_parse): keyword = value pairs
// separated by white space, a value either bare up to white space or in
// single quotes, a backslash escaping the next character in either. A URI
// is not read. Without application_name the receiver's fallback is used.
func writtenAppName(conninfo, fallback string) (string, string) {
	if strings.HasPrefix(conninfo, "postgresql://") || strings.HasPrefix(conninfo, "postgres://") {
		return "", "a URI"
	}
	space := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' }
	app, fb, hasApp, hasFb := "", "", false, false
	for i := 0; ; {
		for i < len(conninfo) && space(conninfo[i]) {
			i++
		}
		if i == len(conninfo) {
			break
		}
		k := i
		for i < len(conninfo) && conninfo[i] != '=' && !space(conninfo[i]) {
			i++
		}
		key := conninfo[k:i]
		for i < len(conninfo) && space(conninfo[i]) {
			i++
		}
		if i == len(conninfo) || conninfo[i] != '=' || key == "" {
			return "", "a keyword without a value"
		}
		i++
		for i < len(conninfo) && space(conninfo[i]) {
			i++
		}
		var v strings.Builder
		if i < len(conninfo) && conninfo[i] == '\'' {
			i++
			for {
				if i == len(conninfo) {
					return "", "an unterminated quoted string"
				}
				c := conninfo[i]
				i++
				if c == '\'' {
					break
				}
				if c == '\\' && i < len(conninfo) {
					c = conninfo[i]
					i++
				}
				v.WriteByte(c)
			}
		} else {
			for i < len(conninfo) && !space(conninfo[i]) {
				c := conninfo[i]
				i++
				if c == '\\' && i < len(conninfo) {
					c = conninfo[i]
					i++
				}
				v.WriteByte(c)
			}
		}
		switch key {
		case "application_name":
			app, hasApp = v.String(), true
		case "fallback_application_name":
			fb, hasFb = v.String(), true
		}
	}
	switch {
	case hasApp && app != "":
		return app, ""
	case hasFb && fb != fallback:
		return "", "its fallback_application_name is not " + strconv.Quote(fallback)
	}
	return fallback, ""
}

// keywordAt returns where the keyword key (ending in '=') starts a pair
// of conninfo: at its start or after a space.
func keywordAt(conninfo, key string) []int {
	var at []int
	for i := 0; i+len(key) <= len(conninfo); {
		j := strings.Index(conninfo[i:], key)
		if j < 0 {
			break
		}
		if k := i + j; k == 0 || conninfo[k-1] == ' ' {
			at = append(at, k)
		}
		i += j + 1
	}
	return at
}

// parseReceiver reads the probe's receiver column, "status port host"
// (pg_stat_wal_receiver's status, sender_port, sender_host; the host last,
// as a socket directory may hold spaces), "" when there is no receiver or
// its details are hidden.
func parseReceiver(col string) (status, host string, port int) {
	status, rest, _ := strings.Cut(col, " ")
	p, host, _ := strings.Cut(rest, " ")
	port, _ = strconv.Atoi(p)
	return status, host, port
}

// jsonReader reads JSON text from s[i:], as encoding/json would decode
// it into strings.
type jsonReader struct {
	s []byte
	i int
}

// space skips JSON whitespace.
func (d *jsonReader) space() {
	for d.i < len(d.s) && (d.s[d.i] == ' ' || d.s[d.i] == '\t' || d.s[d.i] == '\n' || d.s[d.i] == '\r') {
		d.i++
	}
}

// eat skips whitespace, then c if it comes next, and reports whether it did.
func (d *jsonReader) eat(c byte) bool {
	d.space()
	if d.i < len(d.s) && d.s[d.i] == c {
		d.i++
		return true
	}
	return false
}

// end reports an error unless only whitespace is left.
func (d *jsonReader) end() error {
	if d.space(); d.i != len(d.s) {
		return d.fail("the end")
	}
	return nil
}

func (d *jsonReader) fail(want string) error {
	if d.i >= len(d.s) {
		return fmt.Errorf("want %s at byte %d, the text ends", want, d.i)
	}
	return fmt.Errorf("want %s at byte %d, have %q", want, d.i, d.s[d.i])
}

// stringOrNull reads a string, appended to buf as encoding/json decodes
// it (escapes resolved, a lone surrogate or invalid UTF-8 as U+FFFD), or
// a null.
func (d *jsonReader) stringOrNull(buf []byte) (v []byte, null bool, err error) {
	d.space()
	if bytes.HasPrefix(d.s[d.i:], []byte("null")) {
		d.i += 4
		return buf, true, nil
	}
	if d.i >= len(d.s) || d.s[d.i] != '"' {
		return nil, false, d.fail("a string or null")
	}
	d.i++
	for d.i < len(d.s) {
		c := d.s[d.i]
		switch {
		case c == '"':
			d.i++
			return buf, false, nil
		case c < ' ':
			return nil, false, d.fail("no control character in a string")
		case c == '\\':
			if d.i+1 >= len(d.s) {
				return nil, false, d.fail("an escape")
			}
			d.i += 2
			switch e := d.s[d.i-1]; e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r := d.hex4()
				if r < 0 {
					return nil, false, d.fail("4 hex digits")
				}
				if utf16.IsSurrogate(r) {
					if d.i+1 < len(d.s) && d.s[d.i] == '\\' && d.s[d.i+1] == 'u' {
						save := d.i
						d.i += 2
						if r2 := d.hex4(); r2 < 0 {
							return nil, false, d.fail("4 hex digits")
						} else if dec := utf16.DecodeRune(r, r2); dec != unicode.ReplacementChar {
							buf = utf8.AppendRune(buf, dec)
							continue
						}
						d.i = save // not a pair: the second escape stands alone
					}
					r = unicode.ReplacementChar
				}
				buf = utf8.AppendRune(buf, r)
			default:
				d.i--
				return nil, false, d.fail("an escape")
			}
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			d.i++
		default:
			r, size := utf8.DecodeRune(d.s[d.i:])
			buf = utf8.AppendRune(buf, r)
			d.i += size
		}
	}
	return nil, false, d.fail("the string's end")
}

// hex4 reads 4 hex digits as a rune, -1 when they are not there.
func (d *jsonReader) hex4() rune {
	if d.i+4 > len(d.s) {
		return -1
	}
	var r rune
	for _, c := range d.s[d.i : d.i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	d.i += 4
	return r
}

// serverRun is one run of one server: its system identifier and its
// postmaster's start time (µs), which a restart, a re-clone or a restore
// changes.
type serverRun struct {
	systemID uint64
	started  int64
}
