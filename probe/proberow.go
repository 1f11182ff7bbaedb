package probe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// The probe query runs on the connection's pgconn, below pgx's query
// layer: probeSQL has no arguments, so pgx's simple-protocol path would
// only re-sanitize its 1.2 kB of text and scan through its type map on
// every probe, which at a thousand hosts every 250 ms cost more CPU than
// the round trip itself (issue 17). The columns come back in PostgreSQL's
// text format and parseProbeRow reads them directly.

// probeColumns is the number of columns of probeSQL.
const probeColumns = 17

// probeRow is one row of probeSQL in text format. Its buffers are reused
// from probe to probe.
type probeRow struct {
	values [probeColumns][]byte
	null   [probeColumns]bool

	// The strings read from the last row that did not change, kept so
	// that an unchanged value costs no allocation.
	conninfo  []byte
	appName   string // walReceiverAppName(conninfo), when appNameOK
	appNameOK bool
	slot      string
	drain     string
	offline   string
}

// queryProbe runs probeSQL on c's connection (one Query message, one round
// trip) and copies its one row into c.row.
func (c *pgChecker) queryProbe(ctx context.Context) error {
	mrr := c.conn.PgConn().Exec(ctx, probeSQL)
	rows := 0
	var err error
	for mrr.NextResult() {
		rr := mrr.ResultReader()
		for rr.NextRow() {
			rows++
			vals := rr.Values()
			if rows > 1 {
				continue
			}
			if len(vals) != probeColumns {
				err = fmt.Errorf("%d columns, want %d", len(vals), probeColumns)
				continue
			}
			for i, v := range vals {
				c.row.null[i] = v == nil
				c.row.values[i] = append(c.row.values[i][:0], v...)
			}
		}
		if _, rerr := rr.Close(); rerr != nil && err == nil {
			err = rerr
		}
	}
	if cerr := mrr.Close(); cerr != nil {
		return cerr // the server's or the connection's error comes first
	}
	if err != nil {
		return err
	}
	if rows != 1 {
		return fmt.Errorf("%d rows, want 1", rows)
	}
	return nil
}

// parseProbeRow fills s from one row of probeSQL, as the checks of the
// pgx scan it replaces did: no column may be NULL (the query coalesces
// every one that could be), a boolean is t or f, integers are decimal,
// LSNs are PostgreSQL's X/X or empty.
func parseProbeRow(row *probeRow, s *Sample) error {
	for i, null := range row.null {
		if null {
			return fmt.Errorf("column %d is NULL", i+1)
		}
	}
	v := &row.values
	var err error
	if s.InRecovery, err = parseBool(v[0]); err != nil {
		return fmt.Errorf("pg_is_in_recovery(): %w", err)
	}
	if s.InsertLSN, err = optionalLSN(string(v[1])); err == nil {
		if s.ReceiveLSN, err = optionalLSN(string(v[2])); err == nil {
			s.ReplayLSN, err = optionalLSN(string(v[3]))
		}
	}
	if err != nil {
		return err
	}
	block, err1 := strconv.ParseUint(string(v[13]), 10, 64)
	segment, err2 := strconv.ParseUint(string(v[14]), 10, 64)
	if err1 != nil || err2 != nil || block == 0 || segment == 0 || segment%block != 0 {
		return fmt.Errorf("bad wal_block_size %q or wal_segment_size %q", v[13], v[14])
	}
	s.WALBlockSize, s.WALSegmentSize = block, segment
	// No record ends inside a page header (probeSQL).
	s.InsertLSN = s.InsertLSN.PageBoundary(block, segment)
	if !s.InRecovery {
		s.ReplayLSN = s.InsertLSN
	}
	timeline, err1 := strconv.ParseInt(string(v[4]), 10, 64)
	ckptTimeline, err2 := strconv.ParseInt(string(v[5]), 10, 64)
	id, err3 := strconv.ParseInt(string(v[6]), 10, 64)
	started, err4 := strconv.ParseInt(string(v[7]), 10, 64)
	if err := errors.Join(err1, err2, err4); err != nil {
		return err
	}
	s.TimelineHidden = timeline == -1 && s.InRecovery // a WAL receiver whose timeline is hidden
	if s.TimelineHidden {
		timeline = 0
	}
	if err3 != nil || timeline < 0 || timeline > 1<<32-1 || (timeline == 0 && !s.InRecovery) ||
		ckptTimeline <= 0 || ckptTimeline > 1<<32-1 {
		return fmt.Errorf("bad system identifier %q or timeline %d/%d", v[6], timeline, ckptTimeline)
	}
	s.SystemID, s.Timeline, s.CheckpointTimeline = uint64(id), uint32(timeline), uint32(ckptTimeline)
	s.StartedAt = time.UnixMicro(started)
	if s.Standbys, err = parseStandbys(v[8]); err != nil {
		return err
	}
	if !row.appNameOK || !bytes.Equal(v[9], row.conninfo) { // the same on every probe of one WAL receiver
		row.conninfo, row.appNameOK = append(row.conninfo[:0], v[9]...), true
		row.appName = walReceiverAppName(string(v[9]))
	}
	s.AppName = row.appName
	if string(v[10]) != row.slot {
		row.slot = string(v[10])
	}
	s.SlotName = row.slot
	if s.TimelineHidden {
		s.AppName = "" // not "walreceiver": the conninfo is hidden, not empty
	}
	row.drain = reuse(row.drain, v[15])
	row.offline = reuse(row.offline, v[16])
	s.DrainSetting, s.OfflineSetting = row.drain, row.offline
	visible, err5 := parseBool(v[11])
	s.StatsHidden = !visible
	var err6 error
	s.SyncNamesSet, err6 = parseBool(v[12])
	return errors.Join(err5, err6)
}

// reuse returns last when it holds v, else v as a new string: a setting
// that does not change costs no allocation per probe.
func reuse(last string, v []byte) string {
	if string(v) == last {
		return last
	}
	return string(v)
}

// parseBool reads a boolean column in text format.
func parseBool(v []byte) (bool, error) {
	switch {
	case bytes.Equal(v, []byte("t")):
		return true, nil
	case bytes.Equal(v, []byte("f")):
		return false, nil
	}
	return false, fmt.Errorf("%q is not a boolean", v)
}
