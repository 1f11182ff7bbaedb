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

// walReceiverAppName finds the application name in a WAL receiver's
// conninfo: application_name when set, else fallback_application_name
// (the replica's cluster_name), as libpq would send it.
func walReceiverAppName(conninfo string) string {
	var app, fallback string
	for kv := range strings.FieldsSeq(conninfo) {
		k, v, _ := strings.Cut(kv, "=")
		v = strings.Trim(v, "'")
		switch k {
		case "application_name":
			app = v
		case "fallback_application_name":
			fallback = v
		}
	}
	if app != "" {
		return app
	}
	if fallback != "" {
		return fallback
	}
	return "walreceiver"
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
