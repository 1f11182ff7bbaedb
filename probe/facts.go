package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/pgdns/pgdns/zone"
)

// Facts the probe reads beside positions: timeline history and the name a
// replica streams under.

// readHistory returns the history of timeline tl, reading the file only
// when the timeline changes. Failing to read it is not a failed probe.
func (c *pgChecker) readHistory(ctx context.Context, tl uint32) []zone.TimelineEnd {
	if tl <= 1 || c.noHistories {
		return nil
	}
	if tl == c.historyTL {
		return c.history
	}
	var text *string
	err := c.conn.QueryRow(ctx, historySQL, fmt.Sprintf("%08X", tl)).Scan(&text)
	switch {
	case err != nil && strings.Contains(err.Error(), "permission denied"):
		c.noHistories = true
		return nil
	case err != nil || text == nil:
		return nil // try again on the next probe
	}
	c.historyTL, c.history = tl, ParseHistory(*text)
	return c.history
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
// it cannot. PostgreSQL prints that conninfo as keyword=value pairs joined
// by one space, in libpq's fixed order of options, with NO quoting
// (libpqrcv_get_conninfo): "application_name=my standby
// fallback_application_name=walreceiver sslmode=prefer". A value may
// therefore hold spaces and even "keyword=" text, so the name is not a
// word: it is all that lies between "application_name=" and
// " fallback_application_name=", which the receiver always sets (to
// cluster_name, else "walreceiver") and which libpq lists right after
// application_name. Anything else is ambiguous and the name unknown: no
// fallback_application_name with the value this server gives, either of
// the two keywords more than once, or application_name after it.
// Without application_name the primary sees the fallback. An empty
// conninfo is no WAL receiver: it has no name (never "walreceiver": the
// primary's own row would then match a replica's).
func walReceiverAppName(conninfo, clusterName string) (name, why string) {
	if conninfo == "" {
		return "", "it has no WAL receiver"
	}
	fallback := clusterName
	if fallback == "" {
		fallback = "walreceiver"
	}
	const appKey, fallbackKey = "application_name=", "fallback_application_name="
	fbs, apps := keywordAt(conninfo, fallbackKey), keywordAt(conninfo, appKey)
	unclear := "its WAL receiver's conninfo cannot be read without ambiguity (PostgreSQL prints it unquoted): "
	switch {
	case len(fbs) != 1:
		return "", unclear + strconv.Itoa(len(fbs)) + " fallback_application_name= in it"
	case len(apps) > 1:
		return "", unclear + strconv.Itoa(len(apps)) + " application_name= in it"
	}
	f := fbs[0]
	if rest := conninfo[f+len(fallbackKey):]; !strings.HasPrefix(rest, fallback) ||
		(len(rest) > len(fallback) && rest[len(fallback)] != ' ') {
		return "", unclear + "its fallback_application_name is not " + strconv.Quote(fallback)
	}
	if len(apps) == 0 {
		return fallback, ""
	}
	a := apps[0] + len(appKey)
	if a >= f {
		return "", unclear + "application_name= after fallback_application_name="
	}
	return conninfo[a : f-1], ""
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

// parseStandbys reads the primary's pg_stat_replication rows, sent as a
// JSON array of [client_addr, application_name, sync_state, slot_name].
func parseStandbys(text []byte) ([]zone.Standby, error) {
	if bytes.Equal(text, []byte("[]")) {
		return []zone.Standby{}, nil // every replica, every probe: no JSON decoder needed
	}
	var rows [][4]*string
	if err := json.Unmarshal(text, &rows); err != nil {
		return nil, fmt.Errorf("pg_stat_replication rows: %w", err)
	}
	out := make([]zone.Standby, 0, len(rows))
	for _, r := range rows {
		var sb zone.Standby
		if r[0] != nil {
			sb.Addr, _ = netip.ParseAddr(*r[0]) // a Unix socket has none
			sb.Addr = sb.Addr.Unmap()
		}
		if r[1] != nil {
			sb.AppName = *r[1]
		}
		if r[2] != nil {
			sb.Sync = *r[2] == "sync" || *r[2] == "quorum"
		}
		if r[3] != nil {
			sb.Slot = *r[3]
		}
		out = append(out, sb)
	}
	return out, nil
}
